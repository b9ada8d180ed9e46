package seed001

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/bench"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/service"
)

// Cell lengths of the throughput experiment.
const (
	defaultCell = 10 * time.Second
	quickCell   = 2 * time.Second
)

// Faults is the experiment "seed001-lock-holder-faults": section 4.4's two
// scenarios, which the seed only describes, measured.
type Faults struct {
	Durability    string
	Nodes         []int
	Protocols     []string
	Scenarios     []string
	Stall         time.Duration
	RestartAfter  time.Duration
	Observe       time.Duration
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration
	InFlight      int
	Params        []string
}

// Scenario names.
const (
	scCrash = "crash"
	scStall = "stall"
)

// NewFaults returns the experiment with its defaults.
func NewFaults() *Faults {
	return &Faults{
		Durability:    config.Fsync,
		Nodes:         []int{3},
		Protocols:     []string{"abd", "blocking"},
		Scenarios:     []string{scCrash, scStall},
		ProbeInterval: 10 * time.Millisecond,
		ProbeTimeout:  time.Second,
		InFlight:      4,
	}
}

func (f *Faults) Name() string { return "seed001-lock-holder-faults" }

func (f *Faults) Description() string {
	return "A crashed and a stalled lock holder, ABD vs blocking (seed 001, section 4.4, measured). " +
		"The lock holder crashes (kill -9, restarted later) or " +
		"stalls (SIGSTOP for --stall, then SIGCONT), for ABD and the blocking protocol. " +
		"The faulty node n1 serves a stream of writes (so that, under the blocking protocol, it holds or " +
		"awaits the lock when the fault hits); clients on every other node probe with a write every " +
		"--probe-interval. Reported: the longest gap between successful probe writes after the fault, " +
		"and the time from the fault until writes flow steadily again, with the protocol settings used."
}

func (f *Faults) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&f.Durability, "durability", f.Durability, "cluster durability: fsync or memory")
	fs.IntSliceVar(&f.Nodes, "nodes", f.Nodes, "cluster sizes N (at least 2: probes run on the nodes that are not faulted)")
	fs.StringSliceVar(&f.Protocols, "protocols", f.Protocols, "protocols")
	fs.StringSliceVar(&f.Scenarios, "scenarios", f.Scenarios, "scenarios: crash, stall")
	fs.DurationVar(&f.Stall, "stall", 0, "how long the stalled node stays stopped (default 3s; 1s with --quick)")
	fs.DurationVar(&f.RestartAfter, "restart-after", 0, "when the crashed node is restarted, after the crash (default 3s; 1.5s with --quick)")
	fs.DurationVar(&f.Observe, "observe", 0, "observation time after the fault (default 8s; 3s with --quick; --duration sets it too)")
	fs.DurationVar(&f.ProbeInterval, "probe-interval", f.ProbeInterval, "time between probe writes per probing client")
	fs.DurationVar(&f.ProbeTimeout, "probe-timeout", f.ProbeTimeout, "timeout of one probe write (then the client reconnects)")
	fs.IntVar(&f.InFlight, "in-flight", f.InFlight, "clients writing through the faulty node")
	paramFlag(fs, &f.Params)
}

// timing resolves the durations from the flags and --quick/--duration.
func (f *Faults) timing(o experiment.Options) (warm, stall, restart, observe time.Duration) {
	warm, stall, restart, observe = 2*time.Second, 3*time.Second, 3*time.Second, 8*time.Second
	if o.Quick {
		warm, stall, restart, observe = 500*time.Millisecond, time.Second, 1500*time.Millisecond, 3*time.Second
	}
	if o.Duration > 0 {
		observe = o.Duration
	}
	if f.Stall > 0 {
		stall = f.Stall
	}
	if f.RestartAfter > 0 {
		restart = f.RestartAfter
	}
	if f.Observe > 0 {
		observe = f.Observe
	}
	return
}

func (f *Faults) Cells(o experiment.Options) ([]experiment.Cell, error) {
	if err := experiment.CheckDurability(f.Durability); err != nil {
		return nil, err
	}
	if _, err := parseParams(f.Params); err != nil {
		return nil, err
	}
	_, stall, restart, observe := f.timing(o)
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--stall", f.Stall}, {"--restart-after", f.RestartAfter}, {"--observe", f.Observe}} {
		if d.v < 0 {
			return nil, fmt.Errorf("%s %v is negative", d.name, d.v)
		}
	}
	if f.ProbeInterval <= 0 || f.ProbeTimeout <= 0 {
		return nil, fmt.Errorf("--probe-interval and --probe-timeout must be positive")
	}
	if f.InFlight < 1 {
		return nil, fmt.Errorf("--in-flight %d: must be at least 1", f.InFlight)
	}
	var cells []experiment.Cell
	for _, p := range f.Protocols {
		for _, n := range f.Nodes {
			if n < 2 || n > 99 {
				return nil, fmt.Errorf("--nodes: %d: need 2-99 nodes (probes run on the nodes that are not faulted)", n)
			}
			for _, s := range f.Scenarios {
				switch s {
				case scCrash:
					if restart >= observe {
						return nil, fmt.Errorf("--restart-after %v must be shorter than --observe %v", restart, observe)
					}
				case scStall:
					if stall >= observe {
						return nil, fmt.Errorf("--stall %v must be shorter than --observe %v", stall, observe)
					}
				default:
					return nil, fmt.Errorf("--scenarios: unknown scenario %q (known: crash, stall)", s)
				}
				cells = append(cells, experiment.NewCell("protocol", p, "N", strconv.Itoa(n), "scenario", s))
			}
		}
	}
	return cells, nil
}

// Metric names of this experiment.
const (
	mGap       = "longest_gap_ms"
	mRecovery  = "recovery_ms"
	mBaseline  = "baseline_gap_ms"
	mFaultEnd  = "fault_end_ms"
	mProbesOK  = "probes_ok"
	mProbesBad = "probes_failed"
)

// settings describes the protocol parameters in force: the protocol's
// defaults (automaton.DefaultParams) and the --param overrides.
func settings(proto string, overrides map[string]string) string {
	var def string
	if _, err := automaton.LookupAny(proto); err != nil {
		return proto + ": not registered"
	}
	if d := automaton.DefaultParams(proto); d != nil {
		def = formatParams(d)
	} else {
		def = "not reported by the protocol; see protocol/" + proto + "'s package doc"
	}
	s := proto + " defaults: " + def
	if len(overrides) > 0 {
		s += "; set with --param: " + formatParams(overrides)
	}
	return s
}

// victim is the node that is crashed or stalled.
const victim = "n1"

func (f *Faults) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	proto, scenario := c.Get("protocol"), c.Get("scenario")
	n, _ := strconv.Atoi(c.Get("N"))
	if err := available(proto); err != nil {
		return experiment.Outcome{}, err
	}
	warm, stall, restartAfter, observe := f.timing(env.Options)
	pp, _ := parseParams(f.Params)
	cl, err := env.Up(fmt.Sprintf("%s-n%d-%s", proto, n, scenario), cluster.UpOptions{Nodes: n, Protocol: proto, Durability: f.Durability, Params: pp[proto]})
	if err != nil {
		return experiment.Outcome{}, err
	}
	defer env.Down(cl)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	t0 := time.Now()
	since := func() time.Duration { return time.Since(t0) }

	// Writes in flight through the victim.
	load, err := bench.Preset("seed001")
	if err != nil {
		return experiment.Outcome{}, err
	}
	load.Addrs = []string{cl.Nodes[0].Client}
	load.Clients = f.InFlight
	load.ReadRatio = 0
	load.Preload = false
	load.KeyPrefix = "inflight:"
	load.Duration = warm + observe + time.Minute // ended by cancel
	load.OpTimeout = f.ProbeTimeout
	load.DurabilityLabel = f.Durability
	var loadWG sync.WaitGroup
	var loadRep *bench.Report
	var loadErr error
	loadWG.Add(1)
	go func() {
		defer loadWG.Done()
		loadRep, loadErr = bench.Run(runCtx, load, nil)
	}()

	// Probes on every other node.
	pr := &probes{interval: f.ProbeInterval, timeout: f.ProbeTimeout, since: since}
	var probeWG sync.WaitGroup
	for _, nd := range cl.Nodes[1:] {
		probeWG.Add(1)
		go func() { defer probeWG.Done(); pr.run(runCtx, nd.ID, nd.Client) }()
	}
	stopAll := func() {
		cancel()
		probeWG.Wait()
		loadWG.Wait()
	}

	sleepUntil := func(d time.Duration) error {
		select {
		case <-time.After(time.Until(t0.Add(d))):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	progress := func(what string) {
		ok, bad := pr.counts()
		env.Logf("%s (probe writes: %d ok, %d failed)", what, ok, bad)
	}
	if err := sleepUntil(warm); err != nil {
		stopAll()
		return experiment.Outcome{}, err
	}
	fault := since()
	var faultEnd time.Duration
	var what string
	switch scenario {
	case scCrash:
		what = fmt.Sprintf("kill -9 %s, restarted %v later", victim, restartAfter)
		if err := env.Kill(cl, victim); err != nil {
			stopAll()
			return experiment.Outcome{}, err
		}
		progress("killed " + victim)
		if err := sleepUntil(fault + restartAfter); err != nil {
			stopAll()
			return experiment.Outcome{}, err
		}
		if err := env.Restart(cl, victim); err != nil {
			stopAll()
			return experiment.Outcome{}, fmt.Errorf("restarting %s: %w", victim, err)
		}
		faultEnd = since() - fault
		progress("restarted " + victim)
	case scStall:
		what = fmt.Sprintf("SIGSTOP %s for %v, then SIGCONT", victim, stall)
		if err := env.Pause(cl, victim); err != nil {
			stopAll()
			return experiment.Outcome{}, err
		}
		progress("stopped " + victim)
		err := sleepUntil(fault + stall)
		if rerr := env.Resume(cl, victim); rerr != nil && err == nil {
			err = rerr
		}
		if err != nil {
			stopAll()
			return experiment.Outcome{}, err
		}
		faultEnd = since() - fault
		progress("continued " + victim)
	}
	if err := sleepUntil(fault + observe); err != nil {
		stopAll()
		return experiment.Outcome{}, err
	}
	end := since()
	stopAll()

	succ, bad := pr.result()
	w := windows(succ, fault, fault+faultEnd, end)
	out := experiment.Outcome{
		Metrics: map[string]float64{
			mGap:       ms(w.longestGap),
			mBaseline:  ms(w.baselineGap),
			mFaultEnd:  ms(faultEnd),
			mProbesOK:  float64(len(succ)),
			mProbesBad: float64(bad),
		},
		Labels: map[string]string{
			"durability": f.Durability,
			"fault":      what,
			"settings":   settings(proto, pp[proto]),
			"recovered":  "no (not within the observation)",
		},
	}
	if w.recovered {
		out.Metrics[mRecovery] = ms(w.recovery)
		out.Labels["recovered"] = "yes"
	}
	detail := map[string]any{
		"fault_at_ms": ms(fault), "end_ms": ms(end), "warmup_ms": ms(warm),
		"probe_interval_ms": ms(f.ProbeInterval), "probe_timeout_ms": ms(f.ProbeTimeout),
		"victim": victim, "probers": len(cl.Nodes) - 1, "longest_gap_from_ms": ms(w.gapFrom),
	}
	if loadRep != nil {
		detail["in_flight_writes_ok"] = loadRep.Writes.Count
		detail["in_flight_writes_failed"] = loadRep.Writes.Errors
	} else if loadErr != nil {
		detail["in_flight_error"] = loadErr.Error()
	}
	out.Detail = detail
	env.Logf("longest write gap %.0f ms after the fault; %s", ms(w.longestGap), out.Labels["recovered"])
	return out, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// probes are clients, one per node other than the victim, each writing its
// own key every interval; they record when each successful write was issued
// and when it completed.
type probes struct {
	interval, timeout time.Duration
	since             func() time.Duration

	mu   sync.Mutex
	succ []probeWrite
	bad  int
}

// probeWrite is one successful probe write, times from the start of the run.
type probeWrite struct{ issued, done time.Duration }

func (p *probes) counts() (int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.succ), p.bad
}

// result returns the successful writes ordered by completion time.
func (p *probes) result() ([]probeWrite, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := append([]probeWrite(nil), p.succ...)
	sort.Slice(s, func(i, j int) bool { return s[i].done < s[j].done })
	return s, p.bad
}

func (p *probes) run(ctx context.Context, id, addr string) {
	var t *bench.RedisTarget
	defer func() {
		if t != nil {
			t.Close()
		}
	}()
	key := "probe:" + id
	next := time.Now()
	for seq := 0; ctx.Err() == nil; seq++ {
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		}
		next = time.Now().Add(p.interval)
		if t == nil {
			var err error
			t, err = bench.NewRedisTarget(ctx, addr, bench.RedisOptions{Timeout: p.timeout})
			if err != nil {
				t = nil
				if ctx.Err() == nil {
					p.mu.Lock()
					p.bad++
					p.mu.Unlock()
				}
				continue
			}
		}
		issued := p.since()
		res, err := t.Do(ctx, service.Op{Kind: "set", Key: key, Args: [][]byte{[]byte(strconv.Itoa(seq))}})
		done := p.since()
		if ctx.Err() != nil {
			return // the run ended: this write's outcome does not count
		}
		p.mu.Lock()
		if err == nil && !res.IsErr() {
			p.succ = append(p.succ, probeWrite{issued, done})
		} else {
			p.bad++
		}
		p.mu.Unlock()
		if err != nil {
			t.Close()
			t = nil
		}
	}
}

// window is what the probe record says about one fault.
type window struct {
	// baselineGap is the longest gap between successful writes before the fault.
	baselineGap time.Duration
	// longestGap is the longest time without a successful write completing,
	// counted from the last success before the fault (the gap the fault falls
	// into) to the end of the observation; gapFrom is when it began.
	longestGap, gapFrom time.Duration
	// recovery is the time from the fault until the first write issued after
	// the fault succeeded; recovered is false when none did.
	recovery  time.Duration
	recovered bool
}

// windows computes the window from the successful writes (ordered by
// completion), the fault time, when the fault ended (restart answered, or
// SIGCONT) and the end of the observation.
//
// The stall the fault caused is the last gap between successful writes
// longer than twice the longest gap before the fault (and at least 20 ms)
// that begins before the fault ended; recovery is from the fault to the
// write that ends it (the first write after the stall). Without such a gap,
// recovery is from the fault to the first success of a write issued after
// it. A jitter gap after the fault ended is no stall of the fault's.
func windows(succ []probeWrite, fault, faultEnd, end time.Duration) window {
	var w window
	prev := time.Duration(-1)
	for _, s := range succ {
		if s.done >= fault {
			break
		}
		if prev >= 0 && s.done-prev > w.baselineGap {
			w.baselineGap = s.done - prev
		}
		prev = s.done
	}
	stallMin := max(2*w.baselineGap, 20*time.Millisecond)
	last := max(prev, 0) // no success before the fault: the gap runs from the start
	w.gapFrom = last
	var firstAfter time.Duration
	haveFirst, stalled := false, false
	for _, s := range succ {
		if s.done < fault {
			continue
		}
		gap := s.done - last
		if gap > w.longestGap {
			w.longestGap, w.gapFrom = gap, last
		}
		if gap > stallMin && last < faultEnd {
			stalled, w.recovery = true, s.done-fault
		}
		last = s.done
		if !haveFirst && s.issued >= fault {
			haveFirst, firstAfter = true, s.done-fault
		}
	}
	w.recovered = haveFirst
	if !stalled {
		w.recovery = firstAfter
	}
	if tail := end - last; tail > w.longestGap {
		w.longestGap, w.gapFrom = tail, last
	}
	if tail := end - last; tail > stallMin && last < faultEnd {
		w.recovered = false // the stall runs to the end of the observation
	}
	return w
}

func (f *Faults) Seed() experiment.SeedFigures {
	notes := map[string]string{}
	for _, n := range f.Nodes {
		ns := strconv.Itoa(n)
		key := func(p, s string) string {
			return experiment.NewCell("protocol", p, "N", ns, "scenario", s).Key
		}
		notes[key("abd", scCrash)] = "\"clients do not maintain locks ... a crashing client will have no performance impact on the rest\" (4.4.1)"
		notes[key("blocking", scCrash)] = "\"the system will be in deadlock\"; with \"a fair timeout on lock ownership\" the impact \"will be directly proportional to the timeout\" (4.4.1); no figures"
		notes[key("abd", scStall)] = "slow clients hurt their own users and leave replicas stale, but do not stop the others (4.4.2); no figures"
		notes[key("blocking", scStall)] = "a slow lock holder forces every other writer to wait \"unfair amounts of time\" until a lock-ownership timeout revokes it (4.4.2); no figures"
	}
	return experiment.SeedFigures{Source: "seed 001, section 4.4 (qualitative only: no measurements)", Notes: notes}
}

func (f *Faults) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mGap, Header: "longest gap ms", Format: "%.0f"},
			{Metric: mRecovery, Header: "stall ended after ms", Format: "%.0f"},
			{Metric: mFaultEnd, Header: "fault ended at ms", Format: "%.0f"},
			{Metric: mBaseline, Header: "gap before ms", Format: "%.0f"},
			{Metric: mProbesOK, Header: "probes ok", Format: "%.0f"},
			{Metric: mProbesBad, Header: "failed", Format: "%.0f"},
		},
		Labels: []string{"durability", "recovered"},
		Plots: []experiment.PlotSpec{{
			File: "longest-write-gap", Title: "Longest time without a successful write after the fault", Kind: experiment.Bars,
			Metric: mGap, YLabel: "ms", X: "scenario", XLabel: "fault on the node serving writes (n1)",
			Series: []string{"protocol", "N"},
		}},
		Notes: []string{
			"Times are from the fault (kill -9 or SIGSTOP of n1). \"longest gap\": the longest time with no probe write",
			"completing, from the last success before the fault to the end of the observation. \"stall ended after\": from the",
			"fault to the first write completing after the stall it caused (the last gap over twice the longest gap before the fault,",
			"and over 20 ms, that began before the fault ended); with no such gap, to the first success of a write issued after",
			"the fault. \"gap before\": the longest gap before the",
			"fault (disk and scheduling jitter: with fsync, gaps of a few hundred ms occur here without any fault).",
			"\"fault ended at\": when n1 answered PING again after its restart, or got SIGCONT.",
			"Settings: " + f.settingsNote(),
			"The seed's \"crashing/slow client\" holding the lock is, in Synod, the node whose gateway holds the lock for",
			"its client's write: n1, which serves a stream of writes from --in-flight clients when the fault hits.",
		},
	}
}

func (f *Faults) settingsNote() string {
	pp, _ := parseParams(f.Params)
	var parts []string
	for _, p := range f.Protocols {
		parts = append(parts, settings(p, pp[p]))
	}
	return strings.Join(parts, "; ")
}
