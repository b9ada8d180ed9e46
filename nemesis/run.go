package nemesis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/check"
	"github.com/synod-dev/synod/storage"
)

// ErrUnavailable wraps the reason a harness cannot be built here (not
// root, no ip, namespaces refused); tests skip on it.
var ErrUnavailable = errors.New("nemesis: network namespaces unavailable")

// DefaultDiskSize is each node's tmpfs: four times the size below which
// the storage WAL never compacts (storage.DefaultWALCompactMin, 64 MiB).
// A tmpfs no larger than that fills with a busy node's own log, whose
// storage then fails for good (a 4-minute eve run under the old 64 MiB
// default ended with every final read unanswered); tmpfs takes memory
// only for what is written.
const DefaultDiskSize = 4 * storage.DefaultWALCompactMin

// Options configure one run.
type Options struct {
	Protocol string
	Params   map[string]string // protocol parameters (nil: defaults)
	Duration time.Duration     // load and faults; healing and draining come after
	Nodes    int               // default 3
	Clients  int               // default 4
	Keys     int               // default 10
	Faults   []string          // default AllFaults
	Seed     uint64            // draws the schedule, the targets and the relays' choices
	Binary   string            // the synod binary to run as nodes (default: this executable)
	DiskSize int64             // each node's tmpfs, bytes (default DefaultDiskSize)
	Log      io.Writer         // fault log and progress (nil: discarded)
	// Leader aims the faults that hit one node (oneway, pause, kill,
	// diskfull) and a partition's minority at the node a live node names
	// as the namespace's leader (SYNOD LEADER), when one does: every such
	// fault then forces a leader change.
	Leader bool
}

// Report is what a run found.
type Report struct {
	Protocol   string
	Model      automaton.Consistency
	Elapsed    time.Duration
	Events     []Event
	ByKind     map[string]int
	Ops        int // operations in the history
	Checked    int // operations the checker judged
	Verdict    string
	Detail     string
	Violations int // 1 when the checker found the history illegal
	AckedWrite int64
	Unknown    int64
	Lost       map[string]string // key -> why its last acknowledged write is missing
	Unanswered int               // final reads no node answered within FinalReadWait
	ReadsTook  time.Duration     // from the start of the final reads until the last was judged
	Pruned     int               // unknown writes never read, left out of the check (prune.go)
	// StorageRestarts counts nodes restarted because their storage failed
	// under a full disk (they refuse everything until restarted).
	StorageRestarts int
	Frames          relayStats
	History         string // where the history was saved when Failed
	// Logs is where the nodes' logs were copied when the run failed or a
	// final read went unanswered (the run's directory is removed).
	Logs string
}

// FinalReadWait bounds the final reads: after the faults heal and the load
// drains, every key must be read through every node within it. A final
// read still unanswered then is a namespace that stayed down after the
// faults ended (the brief: "no namespace stays down"), so it fails the run.
// One minute, not seconds: a node restarted as the faults heal must first
// recover and a new leader or primary be chosen, and the run's machine may
// be loaded (the long runs share two cores with other work).
const FinalReadWait = time.Minute

// Failed reports a consistency violation, a lost acknowledged write, or a
// final read no node answered within FinalReadWait (the namespace stayed
// down after the faults healed).
func (r *Report) Failed() bool { return r.Violations > 0 || len(r.Lost) > 0 || r.Unanswered > 0 }

// Unsafe reports a safety failure alone: a violation or a lost write.
func (r *Report) Unsafe() bool { return r.Violations > 0 || len(r.Lost) > 0 }

// Print writes the summary the chaos command prints.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "protocol         %s (%s)\n", r.Protocol, r.Model)
	fmt.Fprintf(w, "duration         %v\n", r.Elapsed.Round(time.Millisecond))
	var kinds []string
	for _, k := range AllFaults {
		if r.ByKind[k] > 0 {
			kinds = append(kinds, fmt.Sprintf("%s=%d", k, r.ByKind[k]))
		}
	}
	fmt.Fprintf(w, "faults           %d: %s\n", len(r.Events), strings.Join(kinds, " "))
	fmt.Fprintf(w, "relayed frames   %d (dropped %d, duplicated %d, delayed %d)\n", r.Frames.frames, r.Frames.dropped, r.Frames.duplicated, r.Frames.delayed)
	fmt.Fprintf(w, "operations       %d in history, %d checked (%d writes acknowledged, %d unknown, %d of them never read and left out)\n", r.Ops, r.Checked, r.AckedWrite, r.Unknown, r.Pruned)
	fmt.Fprintf(w, "checker          %s\n", r.Verdict)
	fmt.Fprintf(w, "violations       %d\n", r.Violations)
	fmt.Fprintf(w, "lost writes      %d\n", len(r.Lost))
	for _, k := range slices.Sorted(maps.Keys(r.Lost)) {
		fmt.Fprintf(w, "  %s: %s\n", k, r.Lost[k])
	}
	if r.StorageRestarts > 0 {
		fmt.Fprintf(w, "restarted        %d times after storage failed under a full disk\n", r.StorageRestarts)
	}
	if r.Unanswered > 0 {
		fmt.Fprintf(w, "unanswered final reads %d (no answer %v after the faults healed: the namespace stayed down)\n", r.Unanswered, FinalReadWait)
	}
	fmt.Fprintf(w, "final reads      judged in %v\n", r.ReadsTook.Round(time.Millisecond))
	if r.Detail != "" {
		fmt.Fprintf(w, "detail           %s\n", r.Detail)
	}
	if r.Logs != "" {
		fmt.Fprintf(w, "node logs saved  %s\n", r.Logs)
	}
	if r.History != "" {
		fmt.Fprintf(w, "history saved    %s (replay: synod check %s)\n", r.History, r.History)
	}
}

type runner struct {
	opts   Options
	start  time.Time
	net    *Net
	dir    string
	nodes  []*node
	relays []*relay
	stats  relayStats
	mu     sync.Mutex
	events []Event
	// storageRestarts counts nodes restarted after their storage failed
	// under a full disk.
	storageRestarts int
	aimed           int // the leader the last fault was aimed at (Options.Leader), 0 if none
}

func (r *runner) since() time.Duration { return time.Since(r.start) }

func (r *runner) logf(format string, args ...any) {
	if r.opts.Log != nil {
		fmt.Fprintf(r.opts.Log, "[%7.3fs] %s\n", r.since().Seconds(), fmt.Sprintf(format, args...))
	}
}

// restart starts a node that is down again (after kill -9 or a crash of
// its own) and waits for it; a running node is left alone.
func (r *runner) restart(n *node) error {
	if n.running() {
		if n.paused {
			n.paused = false
			return n.signal(syscall.SIGCONT)
		}
		return nil
	}
	if err := n.start(r.opts.Binary, r.net.ns(n.i)); err != nil {
		return err
	}
	return n.waitReady(r.net.ClientAddr(n.i), 15*time.Second)
}

// Run builds the harness, runs load under faults for opts.Duration, heals,
// drains, reads every key back and checks the history. Everything it made
// is removed before it returns, also when ctx is cancelled.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if why := Available(); why != "" {
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, why)
	}
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.Clients <= 0 {
		opts.Clients = 4
	}
	if opts.Keys <= 0 {
		opts.Keys = 10
	}
	if len(opts.Faults) == 0 {
		opts.Faults = slices.Clone(AllFaults)
	}
	if opts.DiskSize <= 0 {
		opts.DiskSize = DefaultDiskSize
	}
	if opts.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		opts.Binary = exe
	}
	model, err := automaton.ConsistencyOf(opts.Protocol)
	if err != nil {
		return nil, err
	}
	r := &runner{opts: opts, start: time.Now()}
	defer r.close()
	if r.dir, err = os.MkdirTemp("", fmt.Sprintf("%s%d-", dirPrefix, os.Getpid())); err != nil {
		return nil, err
	}
	if r.net, err = NewNet(opts.Nodes); err != nil {
		return nil, err
	}
	cfgs, err := writeConfigs(r.dir, r.net, opts.Nodes, opts.Protocol, opts.Params)
	if err != nil {
		return nil, err
	}
	for i := 1; i <= opts.Nodes; i++ {
		id := fmt.Sprintf("n%d", i)
		n := &node{i: i, id: id, cfgPath: cfgs[i-1], dataDir: filepath.Join(r.dir, "data", id), logPath: filepath.Join(r.dir, id+".log")}
		if err := mountData(n.dataDir, opts.DiskSize); err != nil {
			return nil, err
		}
		r.nodes = append(r.nodes, n)
		for j := 1; j <= opts.Nodes; j++ {
			if j != i {
				rl, err := newRelay(r.net.RelayAddr(j, i), r.net.PeerAddr(i), opts.Seed*100+uint64(10*j+i), &r.stats)
				if err != nil {
					return nil, err
				}
				r.relays = append(r.relays, rl)
			}
		}
	}
	for _, n := range r.nodes {
		if err := n.start(opts.Binary, r.net.ns(n.i)); err != nil {
			return nil, err
		}
	}
	var addrs []string
	for _, n := range r.nodes {
		addrs = append(addrs, r.net.ClientAddr(n.i))
		if err := n.waitReady(r.net.ClientAddr(n.i), 15*time.Second); err != nil {
			return nil, err
		}
	}
	r.logf("%d nodes up in namespaces %s..%s, subnet %s.0/24", opts.Nodes, r.net.ns(1), r.net.ns(opts.Nodes), r.net.subnet)

	// Load, with faults from the seed.
	ld := newLoad(opts.Protocol)
	keys := make([]string, opts.Keys)
	for k := range keys {
		keys[k] = fmt.Sprintf("k%02d", k)
	}
	sticky := automaton.NeedsStickyClients(opts.Protocol)
	stopLoad, stopFaults := make(chan struct{}), make(chan struct{})
	var wg, fwg sync.WaitGroup
	for c := 0; c < opts.Clients; c++ {
		mine := append(slices.Clone(addrs[c%len(addrs):]), addrs[:c%len(addrs)]...)
		if sticky {
			mine = mine[:1]
		}
		wg.Add(1)
		go func() { defer wg.Done(); ld.client(c, mine, keys, stopLoad) }()
	}
	fwg.Add(1)
	go func() {
		defer fwg.Done()
		r.schedule(stopFaults, rand.New(rand.NewPCG(opts.Seed, 1)))
	}()
	select {
	case <-ctx.Done():
	case <-time.After(opts.Duration):
	}
	close(stopFaults)
	fwg.Wait()

	// Heal and drain: every node up and running, links clean, then load
	// without faults for a moment before the final reads.
	r.net.HealAll()
	for _, rl := range r.relays {
		rl.set(LinkFaults{})
	}
	for _, n := range r.nodes {
		if err := r.restart(n); err != nil {
			r.logf("drain: %s: %v", n.id, err)
		}
	}
	r.logf("healed; draining")
	if ctx.Err() == nil {
		time.Sleep(time.Second)
	}
	close(stopLoad)
	wg.Wait()
	readsStart := time.Now()
	lost, unanswered := ld.finalReads(addrs, keys, FinalReadWait, model == automaton.Linearizable || model == automaton.Sequential)

	rep := &Report{Protocol: opts.Protocol, Model: model, Elapsed: r.since(), ByKind: map[string]int{},
		AckedWrite: ld.acked.Load(), Unknown: ld.unk.Load(), Lost: lost, Unanswered: unanswered,
		ReadsTook: time.Since(readsStart)}
	r.mu.Lock()
	rep.Events = slices.Clone(r.events)
	r.mu.Unlock()
	sort.Slice(rep.Events, func(a, b int) bool { return rep.Events[a].Start < rep.Events[b].Start })
	for _, e := range rep.Events {
		rep.ByKind[e.Kind]++
	}
	rep.Frames = r.stats.snapshot()

	full := ld.rec.History()
	rep.Ops = len(full.Ops)
	h, pruned := unobserved(full)
	rep.Pruned = pruned
	// The check's time limit grows with the run: a long run's history is
	// large (about 600 operations a second with the default clients).
	limit := max(60*time.Second, opts.Duration/2)
	switch model {
	case automaton.Linearizable, automaton.Sequential:
		cr, err := check.ForHistory(model, h)(h, check.Options{IgnoreDelCount: true, Timeout: limit})
		if err != nil {
			return nil, fmt.Errorf("nemesis: check: %w", err)
		}
		rep.Verdict, rep.Checked = cr.Result, cr.Ops
		if cr.Result == check.Illegal {
			rep.Violations = 1
			rep.Detail = cr.Detail
		} else if cr.Result == check.Unknown {
			rep.Verdict += fmt.Sprintf(" (undecided within %v: not counted as a violation)", limit)
		}
	default:
		rep.Verdict = fmt.Sprintf("none (no history checker for %s; every node must end on a value a client wrote, all nodes the same)", model)
	}
	rep.StorageRestarts = r.storageRestarts
	if rep.Failed() {
		if f, err := os.CreateTemp("", "synod-chaos-failure-*.json"); err == nil {
			f.Close()
			if full.Save(f.Name()) == nil {
				rep.History = f.Name()
			}
		}
	}
	if rep.Failed() {
		rep.Logs = r.saveLogs()
	}
	return rep, nil
}

// saveLogs copies every node's log to a new directory and returns it ("" if
// it cannot be made).
func (r *runner) saveLogs() string {
	dir, err := os.MkdirTemp("", "synod-chaos-logs-*")
	if err != nil {
		return ""
	}
	for _, n := range r.nodes {
		if b, err := os.ReadFile(n.logPath); err == nil {
			os.WriteFile(filepath.Join(dir, n.id+".log"), b, 0o644)
		}
	}
	return dir
}

// close stops every process, relay, mount and namespace the run made.
func (r *runner) close() {
	for _, n := range r.nodes {
		n.kill()
	}
	for _, rl := range r.relays {
		rl.close()
	}
	for _, n := range r.nodes {
		syscall.Unmount(n.dataDir, syscall.MNT_DETACH)
	}
	if r.net != nil {
		r.net.Close()
	}
	if r.dir != "" {
		os.RemoveAll(r.dir)
	}
}
