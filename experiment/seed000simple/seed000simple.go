// Package seed000simple is the experiment "seed000-simple-vs-optimised":
// SimpleESDSImpl's communication method (protocol/esds impl=simple: gossip
// as I/O combinations under the reservation system, the ESDS thesis §3.3.4,
// §3.3.5, §3.4.3) against ESDSImpl's asynchronous channels (impl=optimised,
// §3.3.6), in the simulator at the seed's settings. The seed ran every
// experiment on the optimised implementation only (chapter 5) and says of
// the reservation system only that it "is costly, as it reduces potential
// concurrency" (§3.3.6) and "may have a severe performance penalty"
// (§3.3.7); this measures how much.
//
// Settings (those of package experiment/seed000, which models chapter 5):
// the Counter service, 300 adds per run submitted at 33 ops/s (Test Series
// 3) by one client per operation spread evenly over the replicas, N = 2, 4,
// 6 replicas, 0% and 100% strict operations, a 20 ms gossip interval,
// values recomputed from the stable state as the thesis's ESDSOptImpl does,
// and the simulator's CPU model: 28 ms per client request, 200 µs per
// Apply, 300 µs per message received (reservation messages included), with
// 0.5-1.5 ms links. Averages over --runs seeds.
//
// Metrics: throughput = completed / (last response - first submission),
// mean and p99 latency, messages per completed operation (every message
// sent in the run, the settling phase after the last operation included,
// until the replicas agree), and the run's virtual time to convergence.
package seed000simple

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/sim"
)

func init() { experiment.Register(New()) }

// Metric names.
const (
	mTput    = "throughput"
	mLat     = "latency_ms"
	mP99     = "p99_ms"
	mMsgs    = "msgs_per_op"
	mSettle  = "sim_s"
	mUnknown = "unanswered"
)

// Experiment is "seed000-simple-vs-optimised".
type Experiment struct {
	Nodes  []int
	Strict []int // percent
	Ops    int
	Runs   int
	Rate   float64
	First  int64 // first simulation seed
}

// New returns the experiment with the seed's settings.
func New() *Experiment {
	return &Experiment{Nodes: []int{2, 4, 6}, Strict: []int{0, 100}, Ops: 300, Runs: 3, Rate: 33, First: 1}
}

func (e *Experiment) Name() string { return "seed000-simple-vs-optimised" }

func (e *Experiment) Description() string {
	return "ESDS gossip by I/O combinations with reservations (SimpleESDSImpl, impl=simple, seed 000 §3.3.4-5) against " +
		"asynchronous channels (ESDSImpl, impl=optimised, §3.3.6), in simulation at the seed's chapter-5 settings " +
		"(Counter, 300 operations at 33 ops/s, N = 2, 4, 6, 0% and 100% strict): throughput, latency and messages per " +
		"operation. The seed measured the optimised implementation only."
}

func (e *Experiment) Flags(fs *pflag.FlagSet) {
	fs.IntSliceVar(&e.Nodes, "nodes", e.Nodes, "replica counts N")
	fs.IntSliceVar(&e.Strict, "strict", e.Strict, "percentages of strict operations")
	fs.IntVar(&e.Ops, "ops", e.Ops, "operations per run (the seed: 300)")
	fs.IntVar(&e.Runs, "runs", e.Runs, "simulated runs (seeds) averaged per cell")
	fs.Float64Var(&e.Rate, "rate", e.Rate, "submission rate, operations/s (the seed's Test Series 3: 33)")
	fs.Int64Var(&e.First, "seed", e.First, "first simulation seed")
}

var impls = []string{"optimised", "simple"}

func (e *Experiment) Cells(o experiment.Options) ([]experiment.Cell, error) {
	if e.Ops < 1 || e.Runs < 1 || e.Rate <= 0 {
		return nil, fmt.Errorf("--ops, --runs and --rate must be positive")
	}
	for _, p := range e.Strict {
		if p < 0 || p > 100 {
			return nil, fmt.Errorf("--strict %d: not a percentage", p)
		}
	}
	ns := e.Nodes
	if o.Quick {
		ns = []int{2, 3}
	}
	var cells []experiment.Cell
	for _, p := range e.Strict {
		for _, n := range ns {
			for _, impl := range impls {
				cells = append(cells, experiment.NewCell("strict", strconv.Itoa(p), "N", strconv.Itoa(n), "impl", impl))
			}
		}
	}
	return cells, nil
}

// config is one run's simulation (package experiment/seed000's settings).
func (e *Experiment) config(impl string, n, strictPct, ops int, seed int64) sim.Config {
	clients := ((ops + n - 1) / n) * n // one per operation, a multiple of N
	return sim.Config{
		Protocol: "esds", Service: "counter", Mix: "add:1", Nodes: n, Clients: clients, Ops: ops, Seed: seed,
		StickyClients: true, Rate: e.Rate, StrictFrac: float64(strictPct) / 100,
		OpCost: "constant:28ms", ApplyCost: "constant:200us", MsgCost: "constant:300us",
		Latency: "uniform:500us:1500us", ClientLatency: "uniform:500us:1500us", Fsync: "constant:0s",
		RequestTimeout: time.Hour, DrainTime: 10 * time.Minute, MaxTime: time.Hour,
		Params: map[string]string{"impl": impl, "gossip": "20ms", "values": "recompute"},
	}
}

func (e *Experiment) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	n, _ := strconv.Atoi(c.Get("N"))
	p, _ := strconv.Atoi(c.Get("strict"))
	ops, runs := e.Ops, e.Runs
	if env.Options.Quick {
		ops, runs = min(ops, 40), 1
	}
	sum := map[string]float64{}
	var replay []string
	for i := 0; i < runs; i++ {
		if err := ctx.Err(); err != nil {
			return experiment.Outcome{}, err
		}
		cfg := e.config(c.Get("impl"), n, p, ops, e.First+int64(env.Rep*runs+i)) // run r of the cell: its own seeds
		r, err := sim.Run(cfg)
		if err != nil {
			return experiment.Outcome{}, fmt.Errorf("%v (replay: %s)", err, cfg.Command())
		}
		if r.Violation || r.Invariant != "" {
			return experiment.Outcome{}, fmt.Errorf("check failed: %s%s (replay: %s)", r.Invariant, esdsDetail(r), cfg.Command())
		}
		m := metrics(r)
		for k, v := range m {
			sum[k] += v / float64(runs)
		}
		if i == 0 {
			replay = append(replay, cfg.Command())
		}
		env.Logf("%s run %d/%d: %.1f ops/s, %.1f ms, %.1f msgs/op", c.Key, i+1, runs, m[mTput], m[mLat], m[mMsgs])
	}
	return experiment.Outcome{Metrics: sum, Labels: map[string]string{"runs": strconv.Itoa(runs)},
		Detail: map[string]any{"replay_first": replay}}, nil
}

func esdsDetail(r *sim.Result) string {
	if r.ESDS == nil {
		return ""
	}
	return " " + r.ESDS.Detail()
}

// metrics of one run.
func metrics(r *sim.Result) map[string]float64 {
	var first, last int64 = math.MaxInt64, 0
	var lats []time.Duration
	for _, o := range r.History.Ops {
		if o.Outcome != history.OK {
			continue
		}
		first, last = min(first, o.Call), max(last, o.Return)
		lats = append(lats, time.Duration(o.Return-o.Call))
	}
	m := map[string]float64{mUnknown: float64(r.Ops - len(lats)), mSettle: r.SimTime.Seconds()}
	if len(lats) == 0 {
		return m
	}
	slices.Sort(lats)
	var s time.Duration
	for _, d := range lats {
		s += d
	}
	m[mLat] = float64(s) / float64(len(lats)) / 1e6
	m[mP99] = float64(lats[min(len(lats)-1, int(0.99*float64(len(lats))))]) / 1e6
	if span := time.Duration(last - first); span > 0 {
		m[mTput] = float64(len(lats)) / span.Seconds()
	}
	m[mMsgs] = float64(r.Stats.MsgsSent) / float64(len(lats))
	return m
}

func (e *Experiment) Seed() experiment.SeedFigures {
	return experiment.SeedFigures{Source: "seed 000 (Cheiner 1997): no figures; every experiment of chapter 5 ran ESDSOptImpl, and §3.3.6-3.3.7 only say the reservation system is costly"}
}

func (e *Experiment) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mTput, Header: "ops/s", Format: "%.1f"},
			{Metric: mLat, Header: "mean ms", Format: "%.1f"},
			{Metric: mP99, Header: "p99 ms", Format: "%.1f"},
			{Metric: mMsgs, Header: "msgs/op", Format: "%.1f"},
			{Metric: mSettle, Header: "sim s", Format: "%.1f"},
		},
		Labels: []string{"runs"},
		Plots: []experiment.PlotSpec{
			{File: "latency", Title: "mean latency: reservations against channels", Kind: experiment.Bars,
				Metric: mLat, YLabel: "ms", X: "N", XLabel: "replicas", Series: []string{"impl", "strict"}},
			{File: "messages", Title: "messages per operation", Kind: experiment.Bars,
				Metric: mMsgs, YLabel: "messages/op", X: "N", XLabel: "replicas", Series: []string{"impl", "strict"}},
		},
		Notes: []string{
			"sim: deterministic simulator, CPU model on (28 ms per request, 200 us per Apply, 300 us per message received), 0.5-1.5 ms links, 20 ms gossip.",
			"msgs/op: every message of the run, including the gossip after the last response until the replicas agree (sim s is that run time).",
		},
	}
}

// Claims judges §3.3.6 ("the reservation system is costly"): the simple
// implementation's latency above the optimised one's, per strict share, on
// the largest N run (every run's seeds differ).
func (e *Experiment) Claims(d experiment.Data) []experiment.Claim {
	var out []experiment.Claim
	top := 0
	for _, cr := range d.Cells {
		if n, err := strconv.Atoi(cr.Get("N")); err == nil && cr.Status == experiment.StatusOK {
			top = max(top, n)
		}
	}
	for _, p := range e.Strict {
		key := func(impl string) string {
			return experiment.NewCell("strict", strconv.Itoa(p), "N", strconv.Itoa(top), "impl", impl).Key
		}
		text := fmt.Sprintf("§3.3.6: the reservation system \"is costly, as it reduces potential concurrency\" (%d%% strict, N=%d): SimpleESDSImpl's latency above ESDSImpl's", p, top)
		if c, ok := d.NotRun(text, "no figure", key("simple"), key("optimised")); ok {
			out = append(out, c)
			continue
		}
		cl := experiment.Claim{Text: text, Paper: "no figure",
			Judgement: experiment.RatioAbove("simple/optimised latency", d.Sample(key("simple"), mLat), d.Sample(key("optimised"), mLat), 1)}
		cl.Cause = fmt.Sprintf("messages per operation simple %.1f vs optimised %.1f", d.Ours[key("simple")][mMsgs], d.Ours[key("optimised")][mMsgs])
		out = append(out, cl)
	}
	return out
}

// Summary states the cost of the reservations: simple against optimised,
// per strict share and N.
func (e *Experiment) Summary(ours, _ experiment.Figures) []string {
	out := []string{"Seed 000 §3.3.6: the reservation system \"is costly, as it reduces potential concurrency\"; it measured none of it. Here (simple / optimised):"}
	for _, p := range e.Strict {
		var parts []string
		for n := 1; n <= 64; n++ {
			key := func(impl string) string { return fmt.Sprintf("strict=%d,N=%d,impl=%s", p, n, impl) }
			lo, ok1 := ours.Get(key("optimised"), mLat)
			ls, ok2 := ours.Get(key("simple"), mLat)
			mo, _ := ours.Get(key("optimised"), mMsgs)
			ms, _ := ours.Get(key("simple"), mMsgs)
			to, _ := ours.Get(key("optimised"), mTput)
			ts, _ := ours.Get(key("simple"), mTput)
			if !ok1 || !ok2 || lo == 0 || mo == 0 || to == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("N=%d latency x%.2f (%.1f vs %.1f ms), messages/op x%.2f (%.1f vs %.1f), throughput x%.2f",
				n, ls/lo, ls, lo, ms/mo, ms, mo, ts/to))
		}
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("  %d%% strict: %s", p, strings.Join(parts, "; ")))
		}
	}
	return out
}
