package seed004

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/orca/programs"
	"github.com/synod-dev/synod/protocol/orcaprimary"
	"github.com/synod-dev/synod/service"
)

func init() { experiment.Register(&Micro{}) }

// Micro is seed004-micro: the Orca paper §5.1 and §5.2's basic costs (Figures 3
// and 4, the remote operations, re-installing a copy, a short reliable
// broadcast to 10 processors) measured in the virtual-time world, and §5.1's
// cost arithmetic (when invalidation beats update) redone with them.
//
// What each bench times (virtual time, one process, the world settled
// before: every earlier acknowledgement and unlock has been handled):
//
//   - inc-int / setall-1k: a write of the 4-byte integer (inc 1) or of the
//     whole 1 KB array (setall) with the object on `replicas` nodes, mean of
//     three. orca-primary: the writer runs on the primary's node and the
//     other replicas-1 nodes hold a secondary copy (fetched by a read before
//     each write), so the figure is §5.1's cost of invalidating or updating
//     the copies; orca-bcast: the writer is the node farthest from the
//     sequencer (not the sequencer itself, §4.1's two packets) and the time
//     is until its update is applied locally, as §4.2's writer blocks.
//   - remote-read/write-4b/1k: a node with no copy (replicate_after=0)
//     reading or writing the object at its primary on the other node.
//   - reinstall-4b/1k: after a write invalidated every copy on 10 nodes, one
//     node's read miss fetching the object again (§5.1: "re-installing copies
//     costs 5.3 msec per copy (i.e., the costs of a remote read operation)").
//   - bcast-short: a write of the 4-byte integer on 10 nodes until the last
//     node has applied it (processes on every other node wait with a guarded
//     read): the reliable broadcast itself, §4.1's 2.7 ms.
type Micro struct {
	// Replicas caps the replica axis (default 10).
	Replicas int
}

const (
	mMs      = "ms"
	mPerOp   = "msgs_per_op"
	microRep = 3 // timed writes averaged per cell
)

// microRuntime is a runtime and the network it is measured on: orca-bcast
// as the paper ran it (FLIP over Ethernet multicast: one frame for the
// sequencer's broadcast) and over Synod's point-to-point sends.
type microRuntime struct {
	name      string
	rt        programs.Runtime
	multicast bool
}

var microRuntimes = []microRuntime{
	{"orca-primary/invalidate", programs.Runtime{Protocol: "orca-primary", Strategy: "invalidate"}, false},
	{"orca-primary/update", programs.Runtime{Protocol: "orca-primary", Strategy: "update"}, false},
	{"orca-bcast", programs.Runtime{Protocol: "orca-bcast"}, true},
	{"orca-bcast/p2p", programs.Runtime{Protocol: "orca-bcast"}, false},
}

func microRuntimeNamed(s string) (microRuntime, bool) {
	for _, r := range microRuntimes {
		if r.name == s {
			return r, true
		}
	}
	return microRuntime{}, false
}

func (m *Micro) Name() string { return "seed004-micro" }

func (m *Micro) Description() string {
	return "Seed 004 §5.1-5.2 micro-benchmarks in the virtual-time world: incrementing a 4-byte integer and replacing a 1 KB array " +
		"against the number of replicas (1-10) under invalidation, two-phase update and broadcast update (Figures 3 and 4: 27.8 / 58.0 / 63.4 / 4.2 / 8.9 ms on 10), " +
		"remote read and write of 4 B and 1 KB objects (5.3 / 4.2 and 12.7 / 7.6 ms), re-installing an invalidated copy, a short reliable broadcast to 10 nodes (2.7 ms); " +
		"then §5.1's cost arithmetic redone with our costs."
}

func (m *Micro) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&m.Replicas, "replicas", 10, "largest number of replicas (the paper: 10)")
}

func cell(bench, rt string, n int) experiment.Cell {
	return experiment.NewCell("bench", bench, "runtime", rt, "replicas", strconv.Itoa(n))
}

func (m *Micro) top() int {
	if m.Replicas > 1 {
		return m.Replicas
	}
	return 10
}

func (m *Micro) Cells(o experiment.Options) ([]experiment.Cell, error) {
	top := m.top()
	var ns []int
	if o.Quick {
		ns = []int{1, 2, top}
	} else {
		for n := 1; n <= top; n++ {
			ns = append(ns, n)
		}
	}
	var cells []experiment.Cell
	for _, b := range []string{"inc-int", "setall-1k"} {
		for _, r := range microRuntimes {
			for _, n := range ns {
				cells = append(cells, cell(b, r.name, n))
			}
		}
	}
	for _, b := range []string{"remote-read-4b", "remote-write-4b", "remote-read-1k", "remote-write-1k"} {
		cells = append(cells, cell(b, "orca-primary/update", 2))
	}
	for _, b := range []string{"reinstall-4b", "reinstall-1k"} {
		cells = append(cells, cell(b, "orca-primary/invalidate", top))
	}
	cells = append(cells, cell("bcast-short", "orca-bcast", top), cell("bcast-short", "orca-bcast/p2p", top))
	return cells, nil
}

func (m *Micro) net(r microRuntime) programs.Net {
	n := programs.Ethernet10
	n.Multicast = r.multicast
	return n
}

func (m *Micro) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	r, ok := microRuntimeNamed(c.Get("runtime"))
	if !ok {
		return experiment.Outcome{}, fmt.Errorf("runtime %q", c.Get("runtime"))
	}
	n, err := strconv.Atoi(c.Get("replicas"))
	if err != nil || n < 1 {
		return experiment.Outcome{}, fmt.Errorf("replicas %q", c.Get("replicas"))
	}
	res, err := MeasureMicro(c.Get("bench"), r.rt, n, m.net(r))
	if err != nil {
		return experiment.Outcome{}, err
	}
	return experiment.Outcome{
		Metrics: map[string]float64{mMs: float64(res.Time) / float64(time.Millisecond), mPerOp: res.MsgsPerOp},
		Labels:  map[string]string{"net": netLabel(r.multicast)},
		Detail:  res,
	}, nil
}

func netLabel(mc bool) string {
	if mc {
		return "multicast"
	}
	return "point-to-point"
}

// MicroResult is one micro-benchmark's figure.
type MicroResult struct {
	Time      time.Duration // mean virtual time of the timed operation
	MsgsPerOp float64       // messages sent per timed operation (acknowledgements and unlocks included)
	Stats     programs.Stats
}

// MeasureMicro runs bench with the object on n nodes under rt.
func MeasureMicro(bench string, rt programs.Runtime, n int, net programs.Net) (MicroResult, error) {
	params := rt.Params()
	primary := rt.Protocol == "orca-primary"
	if primary {
		// A micro-benchmark times one operation at a fixed placement: no
		// migration (on by default, protocol/orcaprimary's doc).
		params["replicate_after"], params["drop_after"], params["migrate_after"] = "1", "0", "0"
		if strings.HasPrefix(bench, "remote-") {
			params["replicate_after"] = "0"
			n = max(n, 2)
		}
	}
	w, err := programs.NewWorld(rt.Protocol, n, params, net, 1)
	if err != nil {
		return MicroResult{}, err
	}
	ids := make([]automaton.NodeID, n)
	for i := range ids {
		ids[i] = w.ID(i)
	}
	// An object whose primary copy starts on node 0 (orca-bcast: the
	// sequencer's node).
	key := "x"
	for i := 0; orcaprimary.InitialPrimary(ids, key) != ids[0]; i++ {
		key = "x" + strconv.Itoa(i)
	}
	create, write, read := orca.New("int", key), orca.Call("int", key, "inc", orca.Int(1)), orca.Call("int", key, "value")
	if strings.HasSuffix(bench, "1k") {
		create = orca.New("array", key, orca.Int(1024))
		write = orca.Call("array", key, "setall", make([]byte, 1024))
		read = orca.Call("array", key, "read")
	}
	const limit = 24 * time.Hour
	phase := func(node int, f func(p *programs.Proc)) error { return w.Phase(node, "micro", f, limit) }
	var total time.Duration
	sends := 0
	// timed runs op on node and counts its time and its messages (the
	// settled tail included: acknowledgements, unlocks, state messages).
	timed := func(node int, op service.Op) error {
		before := w.Stats.Sends
		err := phase(node, func(p *programs.Proc) {
			t := p.Now()
			p.Must(op)
			total += p.Now() - t
		})
		sends += w.Stats.Sends - before
		return err
	}
	// install gives every node but node 0 a secondary copy (orca-primary:
	// a read miss with replicate_after=1 fetches one).
	install := func() error {
		for i := 1; i < n && primary; i++ {
			if err := phase(i, func(p *programs.Proc) { p.Must(read) }); err != nil {
				return err
			}
		}
		return nil
	}
	if err := phase(0, func(p *programs.Proc) { p.Must(create) }); err != nil {
		return MicroResult{}, err
	}
	reps := microRep
	for r := 0; r < reps && err == nil; r++ {
		switch bench {
		case "inc-int", "setall-1k":
			if primary {
				if err = install(); err == nil {
					err = timed(0, write)
				}
			} else {
				err = timed(n-1, write)
			}
		case "remote-read-4b", "remote-read-1k":
			err = timed(1, read)
		case "remote-write-4b", "remote-write-1k":
			err = timed(1, write)
		case "reinstall-4b", "reinstall-1k":
			if err = install(); err == nil {
				if err = phase(0, func(p *programs.Proc) { p.Must(write) }); err == nil {
					err = timed(n-1, read)
				}
			}
		case "bcast-short":
			err = broadcastToAll(w, n, key, write, &total, &sends)
		default:
			return MicroResult{}, fmt.Errorf("bench %q", bench)
		}
	}
	if err != nil {
		return MicroResult{}, err
	}
	return MicroResult{Time: total / time.Duration(reps), MsgsPerOp: float64(sends) / float64(reps), Stats: w.Stats}, nil
}

// broadcastToAll times a write from the last node until every node has
// applied it: a process on each other node waits for the new value with
// the guarded read await (served locally by orca-bcast).
func broadcastToAll(w *programs.World, n int, key string, write service.Op, total *time.Duration, sends *int) error {
	var cur int64
	if err := w.Phase(0, "read", func(p *programs.Proc) { cur = p.Must(orca.Call("int", key, "value")).Int }, 24*time.Hour); err != nil {
		return err
	}
	start, last := w.Now(), w.Now()
	before := w.Stats.Sends
	for i := 0; i < n-1; i++ {
		w.Spawn(i, "wait", func(p *programs.Proc) {
			p.Must(orca.Call("int", key, "await", orca.Int(cur+1)))
			last = max(last, p.Now())
		})
	}
	w.Spawn(n-1, "write", func(p *programs.Proc) {
		p.Must(write)
		last = max(last, p.Now())
	})
	if err := w.Run(24 * time.Hour); err != nil {
		return err
	}
	err := w.Settle(24 * time.Hour)
	*total += last - start
	*sends += w.Stats.Sends - before
	return err
}

// Seed: §5.1 and §5.2's figures (ms, 10 MC68030s on a 10 Mbit/s Ethernet).
func (m *Micro) Seed() experiment.SeedFigures {
	v := experiment.Figures{}
	notes := map[string]string{}
	set := func(c experiment.Cell, ms float64, note string) {
		v.Set(c.Key, mMs, ms)
		if note != "" {
			notes[c.Key] = note
		}
	}
	set(cell("inc-int", "orca-primary/update", 10), 58.0, "\"updating 10 copies costs 58.0 msec\"")
	set(cell("inc-int", "orca-primary/invalidate", 10), 27.8, "\"Invalidating 10 copies takes 27.8 msec\"")
	set(cell("setall-1k", "orca-primary/update", 10), 63.4, "\"For large (1 Kb) objects, updating 10 copies takes 63.4 msec\"")
	set(cell("setall-1k", "orca-primary/invalidate", 10), 27.8, "invalidation \"does not depend on the size of the object\"")
	set(cell("inc-int", "orca-bcast", 10), 4.2, "§5.3: a multicast update of a small object on 10 CPUs")
	set(cell("setall-1k", "orca-bcast", 10), 8.9, "§5.3: an update carrying 1 Kb of parameters")
	set(cell("remote-read-4b", "orca-primary/update", 2), 5.3, "")
	set(cell("remote-write-4b", "orca-primary/update", 2), 4.2, "")
	set(cell("remote-read-1k", "orca-primary/update", 2), 12.7, "")
	set(cell("remote-write-1k", "orca-primary/update", 2), 7.6, "the unit is not printed; msec presumed")
	set(cell("reinstall-4b", "orca-primary/invalidate", 10), 5.3, "\"re-installing copies costs 5.3 msec per copy (i.e., the costs of a remote read operation)\"")
	set(cell("reinstall-1k", "orca-primary/invalidate", 10), 12.7, "a remote read of 1 Kb (§5.1's arithmetic)")
	set(cell("bcast-short", "orca-bcast", 10), 2.7, "§4.1: \"Sending a short message reliably to 10 processors ... takes 2.7 msec\"")
	return experiment.SeedFigures{Source: "seed 004 §4.1, §5.1-5.3 (10 MC68030 CPUs, 10 Mbit/s Ethernet, Amoeba RPC and FLIP multicast)", Values: v, Notes: notes}
}

func (m *Micro) Report() experiment.ReportSpec {
	var plots []experiment.PlotSpec
	for _, b := range []string{"inc-int", "setall-1k"} {
		what := "incrementing a 4-byte integer"
		if b == "setall-1k" {
			what = "replacing a 1 KB array"
		}
		plots = append(plots, experiment.PlotSpec{File: "micro-" + b, Title: "seed 004: " + what + " against replicas (Figures 3, 4)",
			Kind: experiment.Lines, Metric: mMs, YLabel: "ms (virtual)", X: "replicas", XLabel: "replicas",
			Series: []string{"runtime"}, Filter: map[string]string{"bench": b}})
	}
	plots = append(plots, experiment.PlotSpec{File: "micro-remote", Title: "seed 004: remote operations and re-installing a copy",
		Kind: experiment.Bars, Metric: mMs, YLabel: "ms (virtual)", X: "bench", XLabel: "operation", Series: []string{"runtime"}})
	return experiment.ReportSpec{
		Columns: []experiment.Column{{Metric: mMs, Header: "ms", Format: "%.2f"}, {Metric: mPerOp, Header: "msgs/op", Format: "%.1f"}},
		Labels:  []string{"net"},
		Plots:   plots,
		Notes: []string{
			"Cost model: " + programs.Ethernet10.String() + "; orca-bcast rows use hardware multicast (the paper's FLIP: the sequencer's broadcast is one frame), orca-bcast/p2p Synod's point-to-point sends.",
			"All figures are virtual time in orca/programs.World, mean of " + strconv.Itoa(microRep) + " operations, the world settled between them; orca-primary writes run at the primary with every other replica holding a secondary copy; orca-bcast writes come from the node farthest from the sequencer and end when applied there.",
			"Model difference that decides the arithmetic: Amoeba RPC made the paper's primary contact its copies one RPC after another (costs grow by a round trip per copy: 27.8 ms for 10 invalidations), while orca-primary sends every invalidate or lock-and-update at once and collects the acknowledgements in parallel (costs grow by the processor time per acknowledgement), so invalidation and update differ far less here than in Figure 3.",
			"msgs/op counts every message the timed operation caused, acknowledgements, unlocks and state messages included.",
		},
	}
}

// Summary redoes §5.1's cost arithmetic with our measured costs.
func (m *Micro) Summary(ours, seed experiment.Figures) []string {
	top := m.top()
	get := func(f experiment.Figures, c experiment.Cell) (float64, bool) { return f.Get(c.Key, mMs) }
	var lines []string
	for _, src := range []struct {
		name string
		f    experiment.Figures
		n    int
	}{{"paper", seed, 10}, {"ours", ours, top}} {
		a, ok := arithmetic(func(c experiment.Cell) (float64, bool) { return get(src.f, c) }, src.n)
		if !ok {
			lines = append(lines, src.name+": the arithmetic needs every cell on "+strconv.Itoa(src.n)+" replicas")
			continue
		}
		lines = append(lines, src.name+": "+a.String())
	}
	return lines
}

// Claims judges §5.1's conclusions with our arithmetic. The costs are
// deterministic virtual time, so the rule is exact (experiment.Exact) as
// long as every run gave the same costs.
func (m *Micro) Claims(d experiment.Data) []experiment.Claim {
	top := m.top()
	inputs := []experiment.Cell{cell("inc-int", "orca-primary/invalidate", top), cell("inc-int", "orca-primary/update", top),
		cell("setall-1k", "orca-primary/update", top), cell("reinstall-4b", "orca-primary/invalidate", top),
		cell("reinstall-1k", "orca-primary/invalidate", top)}
	var samples []experiment.Sample
	var keys []string
	for _, c := range inputs {
		samples = append(samples, d.Sample(c.Key, mMs))
		keys = append(keys, c.Key)
	}
	p, _ := arithmetic(func(c experiment.Cell) (float64, bool) { return d.Seed.Get(c.Key, mMs) }, 10)
	o, ok := arithmetic(func(c experiment.Cell) (float64, bool) { return d.Ours.Get(c.Key, mMs) }, top)
	type claim struct {
		text, paper, ours string
		holds             bool
	}
	cs := []claim{
		{"§5.1: \"if fewer than 3 processors read the [1 Kb] object, invalidation is more efficient\"", fmt.Sprintf("from %d readers", p.LargeReaders),
			fmt.Sprintf("invalidation wins below %d readers", o.LargeReaders), o.LargeReaders == p.LargeReaders},
		{"§5.1: \"if a large object is written three or more times successively, invalidation will be more efficient\"", fmt.Sprintf("from %d writes", p.LargeWrites),
			fmt.Sprintf("from %d writes", o.LargeWrites), o.LargeWrites == p.LargeWrites},
		{"§5.1: for a small object \"updating will outperform invalidation\" from 6 readers", fmt.Sprintf("from %d readers", p.SmallReaders),
			fmt.Sprintf("from %d readers", o.SmallReaders), o.SmallReaders == p.SmallReaders},
		{"§5.1: a small object written twice without being read: \"the invalidation scheme is more efficient\"", "invalidation cheaper",
			fmt.Sprintf("update %.1f ms vs invalidate + re-install all %.1f ms", 2*o.U4, o.I+float64(o.N-1)*o.R4), o.SmallTwiceInvalidates},
		{"§5.1: a large object written twice then read by all: \"updating is still cheaper\"", "updating cheaper",
			fmt.Sprintf("update %.1f ms vs invalidate + re-install all %.1f ms", 2*o.U1k, o.I+float64(o.N-1)*o.R1k), o.LargeTwiceUpdates},
	}
	var out []experiment.Claim
	for _, c := range cs {
		if nr, missing := d.NotRun(c.text, c.paper, keys...); missing || !ok {
			out = append(out, nr)
			continue
		}
		cl := experiment.Claim{Text: c.text, Paper: c.paper,
			Judgement: experiment.Exact(c.holds, c.ours, "§5.1's arithmetic on our costs on "+strconv.Itoa(top)+" replicas ("+o.String()+")", samples...)}
		if !c.holds {
			cl.Cause = "Amoeba RPC made the paper's primary contact its copies one after another (a round trip per copy: 27.8 ms to invalidate 10), " +
				"orca-primary sends every invalidate or lock-and-update at once and collects the acknowledgements in parallel: " +
				fmt.Sprintf("here invalidating %d copies costs %.1f ms and updating them %.1f ms (4 B) / %.1f ms (1 KB), against 27.8 / 58.0 / 63.4 ms in the paper.", top, o.I, o.U4, o.U1k)
		}
		out = append(out, cl)
	}
	return out
}

// Arithmetic is §5.1's comparison of invalidation and update from the
// basic costs on n replicas (ms): I invalidating the copies, U4/U1k
// updating them for a small / large object, R4/R1k re-installing one copy.
type Arithmetic struct {
	N                     int
	I, U4, U1k, R4, R1k   float64
	SmallReaders          int  // fewest readers after a write for which updating a small object wins
	LargeReaders          int  // the same for a large object (paper: 3)
	SmallTwiceInvalidates bool // a small object written twice unread: invalidation cheaper
	LargeTwiceUpdates     bool // a large object written twice then read by all: update cheaper
	LargeWrites           int  // fewest successive writes of a large object after which invalidation wins (paper: 3)
}

func arithmetic(get func(experiment.Cell) (float64, bool), n int) (Arithmetic, bool) {
	a := Arithmetic{N: n}
	ok := true
	for _, x := range []struct {
		p *float64
		c experiment.Cell
	}{
		{&a.I, cell("inc-int", "orca-primary/invalidate", n)}, {&a.U4, cell("inc-int", "orca-primary/update", n)},
		{&a.U1k, cell("setall-1k", "orca-primary/update", n)}, {&a.R4, cell("reinstall-4b", "orca-primary/invalidate", n)},
		{&a.R1k, cell("reinstall-1k", "orca-primary/invalidate", n)},
	} {
		v, have := get(x.c)
		ok = ok && have
		*x.p = v
	}
	if !ok {
		return a, false
	}
	sec := float64(n - 1)
	a.SmallReaders = readersToUpdate(a.I, a.R4, a.U4, n-1)
	a.LargeReaders = readersToUpdate(a.I, a.R1k, a.U1k, n-1)
	a.SmallTwiceInvalidates = 2*a.U4 > a.I+sec*a.R4
	a.LargeTwiceUpdates = 2*a.U1k < a.I+sec*a.R1k
	a.LargeWrites = 0
	for w := 1; w <= 100; w++ {
		if float64(w)*a.U1k > a.I+sec*a.R1k {
			a.LargeWrites = w
			break
		}
	}
	return a, true
}

// readersToUpdate is the fewest readers k (at most max) for which
// invalidating and re-installing k copies costs more than updating; max+1
// when invalidation always wins.
func readersToUpdate(inv, reinstall, upd float64, most int) int {
	for k := 0; k <= most; k++ {
		if inv+float64(k)*reinstall > upd {
			return k
		}
	}
	return most + 1
}

func (a Arithmetic) String() string {
	sec := float64(a.N - 1)
	return fmt.Sprintf("on %d replicas invalidate %.1f, update 4 B %.1f / 1 KB %.1f, re-install 4 B %.1f / 1 KB %.1f ms; "+
		"small object: update wins from %d readers (%.1f + k·%.1f > %.1f); written twice unread: update %.1f vs invalidate+re-install all %.1f; "+
		"large object: update wins from %d readers (%.1f + k·%.1f > %.1f), invalidation below; written twice then read by all: update %.1f vs %.1f; "+
		"invalidation wins from %d successive writes (w·%.1f > %.1f)",
		a.N, a.I, a.U4, a.U1k, a.R4, a.R1k,
		a.SmallReaders, a.I, a.R4, a.U4, 2*a.U4, a.I+sec*a.R4,
		a.LargeReaders, a.I, a.R1k, a.U1k, 2*a.U1k, a.I+sec*a.R1k,
		a.LargeWrites, a.U1k, a.I+sec*a.R1k)
}
