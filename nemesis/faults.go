package nemesis

import (
	"fmt"
	"github.com/synod-dev/synod/automaton"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Fault kinds (Options.Faults; "all" names every one).
const (
	FaultPartition = "partition" // majority/minority, both ways (kernel routes)
	FaultBridge    = "bridge"    // one node sees both sides of a split (kernel routes)
	FaultOneWay    = "oneway"    // one node can receive but not send (kernel routes)
	FaultDelay     = "delay"     // every frame delayed 20 ms + jitter [0, 30 ms), order kept (relays)
	FaultLoss      = "loss"      // 20% of frames dropped (relays)
	FaultDup       = "dup"       // 20% of frames sent twice (relays)
	FaultReorder   = "reorder"   // every frame held [0, 40 ms) independently (relays)
	FaultReset     = "reset"     // every peer connection closed at once (relays)
	FaultPause     = "pause"     // SIGSTOP one node, SIGCONT at the end
	FaultKill      = "kill"      // kill -9 one node, restart it at the end
	FaultDiskFull  = "diskfull"  // fill one node's tmpfs data directory, free it at the end
)

// AllFaults lists every kind in the order reports print them.
var AllFaults = []string{FaultPartition, FaultBridge, FaultOneWay, FaultDelay, FaultLoss, FaultDup,
	FaultReorder, FaultReset, FaultPause, FaultKill, FaultDiskFull}

// ParseFaults reads a comma-separated list of kinds, or "all".
func ParseFaults(s string) ([]string, error) {
	if s == "" || s == "all" {
		return slices.Clone(AllFaults), nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(AllFaults, f) {
			return nil, fmt.Errorf("nemesis: unknown fault %q (kinds: %s, or all)", f, strings.Join(AllFaults, ","))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// Event is one fault injected: its kind, what it hit, and when it started
// and ended, measured from the start of the run.
type Event struct {
	Kind   string
	Detail string
	Start  time.Duration
	End    time.Duration
	Err    string // a fault that could not be injected or healed
}

// inject starts one fault of kind and returns the function that heals it.
func (r *runner) inject(kind string, rng *rand.Rand) (detail string, heal func() error, err error) {
	n := r.opts.Nodes
	perm := rng.Perm(n)
	for k := range perm {
		perm[k]++
	}
	cut := func(a, b []int) error {
		for _, i := range a {
			for _, j := range b {
				if err := r.net.Block(i, j); err != nil {
					return err
				}
				if err := r.net.Block(j, i); err != nil {
					return err
				}
			}
		}
		return nil
	}
	relays := func(f LinkFaults) func() error {
		for _, rl := range r.relays {
			rl.set(f)
		}
		return func() error {
			for _, rl := range r.relays {
				rl.set(LinkFaults{})
			}
			return nil
		}
	}
	if r.opts.Leader {
		// The leader first: the node a fault hits (perm[0]) and the
		// partition's minority. The seed's draws are the same either way.
		r.aimed = r.leader()
		if r.aimed > 0 {
			k := slices.Index(perm, r.aimed)
			perm[0], perm[k] = perm[k], perm[0]
		}
	}
	x := perm[0]
	nd := r.nodes[x-1]
	switch kind {
	case FaultPartition:
		minority, majority := perm[:(n-1)/2], perm[(n-1)/2:]
		if len(minority) == 0 { // one node: nothing to split
			return "no-op (1 node)", func() error { return nil }, nil
		}
		return fmt.Sprintf("minority %v | majority %v", minority, majority), r.net.HealAll, cut(minority, majority)
	case FaultBridge:
		rest := perm[1:]
		a, b := rest[:len(rest)/2], rest[len(rest)/2:]
		return fmt.Sprintf("%v | %v, n%d sees both", a, b, x), r.net.HealAll, cut(a, b)
	case FaultOneWay:
		for j := 1; j <= n; j++ {
			if j != x {
				if err := r.net.Block(x, j); err != nil {
					return "", r.net.HealAll, err
				}
			}
		}
		return fmt.Sprintf("n%d cannot send, still receives", x), r.net.HealAll, nil
	case FaultDelay:
		return "all links: 20ms + jitter 30ms", relays(LinkFaults{Delay: 20 * time.Millisecond, Jitter: 30 * time.Millisecond}), nil
	case FaultLoss:
		return "all links: 20% of frames dropped", relays(LinkFaults{Loss: 0.2}), nil
	case FaultDup:
		return "all links: 20% of frames duplicated", relays(LinkFaults{Dup: 0.2}), nil
	case FaultReorder:
		return "all links: frames held 0-40ms each", relays(LinkFaults{Reorder: 40 * time.Millisecond}), nil
	case FaultReset:
		for _, rl := range r.relays {
			rl.resetConns()
		}
		return "every peer connection closed", func() error { return nil }, nil
	case FaultPause:
		if err := nd.signal(syscall.SIGSTOP); err != nil {
			return "", func() error { return nil }, err
		}
		nd.paused = true
		return fmt.Sprintf("SIGSTOP n%d", x), func() error { nd.paused = false; return nd.signal(syscall.SIGCONT) }, nil
	case FaultKill:
		nd.kill()
		return fmt.Sprintf("kill -9 n%d", x), func() error { return r.restart(nd) }, nil
	case FaultDiskFull:
		free, err := fillDisk(nd.dataDir)
		// Freed at the end; a node whose storage failed meanwhile (it
		// acknowledges nothing more until restarted, node/storagefault.go)
		// is then restarted, as its error asks the operator to.
		return fmt.Sprintf("n%d's %d-byte tmpfs filled", x, r.opts.DiskSize), func() error {
			free()
			if !nd.storageFailed() {
				return nil
			}
			r.logf("n%d's storage failed while its disk was full: restarting it", x)
			r.mu.Lock()
			r.storageRestarts++
			r.mu.Unlock()
			nd.kill()
			return r.restart(nd)
		}, err
	}
	return "", nil, fmt.Errorf("nemesis: unknown fault %q", kind)
}

// schedule injects one fault at a time, drawn from the seed, until stop:
// a quiet gap of 200-700 ms, then a fault held for 0.5-2 s (at most a
// fifth of the run) and healed. Kinds come in shuffled rounds, each
// round every kind once, so a short run still covers many kinds.
func (r *runner) schedule(stop <-chan struct{}, rng *rand.Rand) {
	maxHold := max(r.opts.Duration/5, 300*time.Millisecond)
	var round []string
	for {
		if len(round) == 0 {
			round = slices.Clone(r.opts.Faults)
			rng.Shuffle(len(round), func(a, b int) { round[a], round[b] = round[b], round[a] })
		}
		gap := time.Duration(200+rng.IntN(500)) * time.Millisecond
		select {
		case <-stop:
			return
		case <-time.After(gap):
		}
		kind := round[0]
		round = round[1:]
		hold := min(time.Duration(500+rng.IntN(1500))*time.Millisecond, maxHold)
		ev := Event{Kind: kind, Start: r.since()}
		detail, heal, err := r.inject(kind, rng)
		if r.opts.Leader {
			if r.aimed > 0 {
				detail += fmt.Sprintf(" (leader: n%d)", r.aimed)
			} else {
				detail += " (no leader named: the seed's pick)"
			}
		}
		ev.Detail = detail
		if err != nil {
			ev.Err = err.Error()
		}
		r.logf("fault %-9s start %8v  %s%s", kind, ev.Start.Round(time.Millisecond), detail, errSuffix(err))
		select {
		case <-stop:
		case <-time.After(hold):
		}
		if heal != nil {
			if err := heal(); err != nil && ev.Err == "" {
				ev.Err = "heal: " + err.Error()
			}
		}
		ev.End = r.since()
		r.logf("fault %-9s end   %8v%s", kind, ev.End.Round(time.Millisecond), errSuffix(nil))
		r.mu.Lock()
		r.events = append(r.events, ev)
		r.mu.Unlock()
	}
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return " (error: " + err.Error() + ")"
}

// simKinds maps the simulator's fault kinds (automaton.FaultAssumer) to
// the nemesis kinds that make the same fault on real processes.
var simKinds = map[string][]string{
	"crash":     {FaultKill},
	"partition": {FaultPartition, FaultBridge, FaultOneWay},
	"loss":      {FaultLoss, FaultReset},
	"dup":       {FaultDup},
	"reorder":   {FaultReorder},
	"pause":     {FaultPause},
	"slow":      {FaultDelay},
}

// FaultsFor lists the kinds that apply to protocol: every kind, unless it
// declares a narrower failure model (automaton.SafeFaultsOf: primary-backup
// assumes a perfect failure detector), then the kinds that model its safe
// simulator faults.
func FaultsFor(protocol string) []string {
	safe := automaton.SafeFaultsOf(protocol)
	if safe == "all" {
		return slices.Clone(AllFaults)
	}
	var out []string
	for _, k := range AllFaults {
		for _, s := range strings.Split(safe, ",") {
			if slices.Contains(simKinds[s], k) && !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out
}
