package seed003adam

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/experiment"
)

// Fig61 is seed003-adam-fig61: Fig 6.1 in the simulator. protocol/adam on
// three 8-core replicas calls a three-node paxos namespace (the
// co-simulated callee, sim/callee.go) whose answers take 10 ms more (the
// remote computation); each request computes 10 ms locally. The seed's
// Fig 6.1 is a latency-throughput graph: every strategy runs at a sweep of
// closed-loop client counts; the row at the largest count (the saturated
// pipeline) is the one set beside the seed's peak throughputs.
type Fig61 struct {
	// Ops is the operations of a ppm cell; the slower strategies run
	// fewer, in proportion to the seed's throughput (the same simulated
	// time), and never fewer than 3 per client.
	Ops     int
	Clients []int // the sweep; the last is the saturated row
	Batch   int
	SimSeed int64

	points map[string][]ltPoint // the sweep so far, by strategy (for the latency-throughput plot)
}

func (*Fig61) Name() string { return "seed003-adam-fig61" }

func (*Fig61) Description() string {
	return "Seed 003 Fig 6.1 in the simulator: protocol/adam on three 8-core replicas calling a paxos namespace, 20 ms " +
		"requests (10 ms local, callee delay 10 ms), naive / SPM (3 threads) / walls (8 threads) / PPM (3 groups x 8), " +
		"steady-state throughput and latency against the number of closed-loop clients (seed: 45 / ≈90 / ≈300 / 582 req/s, 12.9x)."
}

func (f *Fig61) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&f.Ops, "ops", f.Ops, "operations of a ppm cell (slower strategies run fewer, at least 3 per client; --quick: a quarter)")
	fs.IntSliceVar(&f.Clients, "clients", f.Clients, "closed-loop client counts to sweep, each sending SETs (one nested request each) without think time; the last is the saturated row set beside the seed (--quick: the last only)")
	fs.IntVar(&f.Batch, "batch", f.Batch, "adam's batch: client requests per batch (the seed does not say; adam's default is 48)")
	fs.Int64Var(&f.SimSeed, "seed", f.SimSeed, "simulation seed")
}

func (f *Fig61) clients(quick bool) []int {
	if quick {
		return f.Clients[len(f.Clients)-1:]
	}
	return f.Clients
}

func (f *Fig61) Cells(o experiment.Options) ([]experiment.Cell, error) {
	if len(f.Clients) == 0 || f.Batch < 1 || f.Ops < 1 {
		return nil, fmt.Errorf("--clients %v --batch %d --ops %d: want client counts, a positive batch and operations", f.Clients, f.Batch, f.Ops)
	}
	var cells []experiment.Cell
	for _, s := range fig61 {
		for _, n := range f.clients(o.Quick) {
			cells = append(cells, experiment.NewCell("strategy", string(s.s), "clients", strconv.Itoa(n)))
		}
	}
	return cells, nil
}

func (f *Fig61) RunCell(_ context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	out := experiment.Outcome{Metrics: map[string]float64{}, Labels: map[string]string{"source": "sim"}}
	i := slices.IndexFunc(fig61, func(s fig61Row) bool { return string(s.s) == c.Get("strategy") })
	if i < 0 {
		return out, fmt.Errorf("unknown strategy %q", c.Get("strategy"))
	}
	s := fig61[i]
	clients, _ := strconv.Atoi(c.Get("clients"))
	ops := f.Ops
	if env.Quick {
		ops /= 4
	}
	ops = max(int(float64(ops)*s.seed/582), 3*clients)
	r := simRun{strategy: string(s.s), groups: s.g, threads: s.k, cores: 8, nodes: 3,
		clients: clients, ops: ops, batch: f.Batch, local: 10 * time.Millisecond, remote: 10 * time.Millisecond,
		merkle: "real", seed: f.SimSeed + int64(env.Rep)}
	out.Labels["replay"] = "synod-lab sim " + strings.Join(r.args(), " ")
	if err := r.run(&out); err != nil {
		return out, err
	}
	if f.points == nil {
		f.points = map[string][]ltPoint{}
	}
	f.points[string(s.s)] = append(f.points[string(s.s)], ltPoint{out.Metrics[mTput], out.Metrics[mLatency]})
	// The last cell draws the latency-throughput curves of every cell run.
	if s == fig61[len(fig61)-1] && c.Get("clients") == strconv.Itoa(f.clients(env.Quick)[len(f.clients(env.Quick))-1]) && env.Out != "" {
		var order []string
		seed := map[string]float64{}
		for _, row := range fig61 {
			order = append(order, string(row.s))
			seed[string(row.s)] = row.seed
		}
		if _, err := drawLatencyThroughput(env.Out, order, f.points, seed); err != nil {
			return out, err
		}
		f.points = nil
	}
	return out, nil
}

// Derive adds the speedup over the naive cell with as many clients.
func (*Fig61) Derive(figs experiment.Figures) {
	for k := range figs {
		base, ok := figs.Get(experiment.NewCell("strategy", "naive", "clients", keyGet(k, "clients")).Key, mTput)
		if t, ok2 := figs.Get(k, mTput); ok && ok2 && base > 0 {
			figs.Set(k, mSpeedup, t/base)
		}
	}
}

func (f *Fig61) Seed() experiment.SeedFigures {
	v := experiment.Figures{}
	notes := map[string]string{}
	top := strconv.Itoa(f.Clients[len(f.Clients)-1])
	for _, s := range fig61 {
		key := experiment.NewCell("strategy", string(s.s), "clients", top).Key
		v.Set(key, mTput, s.seed)
		notes[key] = s.note
	}
	return experiment.SeedFigures{Source: "seed 003 §6 Fig 6.1 (fully replicated, r = 1, 8-core replicas, 20 ms requests; peak throughputs from the text, the curves are not in it)", Values: v, Notes: notes}
}

// Summary sets the saturated rows beside the seed's and explains the gap.
func (f *Fig61) Summary(ours, _ experiment.Figures) []string {
	top := strconv.Itoa(f.Clients[len(f.Clients)-1])
	get := func(s, m string) float64 {
		v, _ := ours.Get(experiment.NewCell("strategy", s, "clients", top).Key, m)
		return v
	}
	naive, spm, walls, ppm := get("naive", mTput), get("spm", mTput), get("walls", mTput), get("ppm", mTput)
	if naive <= 0 || walls <= 0 {
		return nil
	}
	slot := 1000*8/ppm - 10
	return []string{
		fmt.Sprintf("%s clients, steady state: naive %.0f, spm %.0f, walls %.0f, ppm %.0f req/s (seed 45 / ≈90 / ≈300 / 582)", top, naive, spm, walls, ppm),
		fmt.Sprintf("speedups over naive: spm %.2fx (seed ≈2x), walls %.2fx (seed 6.67x), ppm 3x8 %.2fx (seed 12.9x); ppm over walls %.2fx (seed 1.94x)", spm/naive, walls/naive, ppm/naive, ppm/walls),
		fmt.Sprintf("naive %.0f req/s, not 50: each request is two verified eve slots (its wall and its resume: tokens, the verifiers' accept round) and its nested request a paxos commit before the callee's 10 ms; %.1f ms per request beyond the 20 ms of work (the seed's naive verifies nothing and loses 2.2 ms)", naive, 1000/naive-20),
		fmt.Sprintf("ppm: one wall of 8 requests every %.1f ms, %.1f ms beyond the 10 ms of local work: protocol/adam has one eve slot in flight, so the next group computes only after the previous wall is verified (execution, tokens, the verifiers' accept round, %s); the seed's implied overhead is 8/582 s - 10 ms = 3.7 ms per wall", 1000*8/ppm, slot, "hash_cost per written object"),
		"warm-up excluded: throughput and latency over the answers between the 10th and 90th percentile of answer times; the first version divided every answer by the whole run of 150 (--quick) or 600 operations, which counts the callee's first election (about 0.85 s of simulated time, no nested call answered) and the pipeline's fill and drain: ppm 150 operations in 1.50 s = 100 req/s, 600 in 2.97 s = 202 (the `req/s incl. warm-up` column is that division on these runs)",
	}
}

func (f *Fig61) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{{Metric: mTput, Header: "req/s", Format: "%.0f"}, {Metric: mSpeedup, Header: "speedup", Format: "%.2f"},
			{Metric: mLatency, Header: "latency ms", Format: "%.1f"}, {Metric: mAll, Header: "req/s incl. warm-up", Format: "%.0f"}},
		Labels: []string{"source"},
		Plots: []experiment.PlotSpec{
			{File: "fig61-sim", Title: "Fig 6.1 (simulator): steady throughput, 20 ms requests, 8-core replicas", Kind: experiment.Bars,
				Metric: mTput, YLabel: "req/s", X: "strategy", XLabel: "strategy", Filter: map[string]string{"clients": strconv.Itoa(f.Clients[len(f.Clients)-1])}},
			{File: "fig61-tput", Title: "Fig 6.1 (simulator): throughput against closed-loop clients", Kind: experiment.Lines,
				Metric: mTput, YLabel: "req/s", X: "clients", XLabel: "closed-loop clients", Series: []string{"strategy"}},
			{File: "fig61-latency", Title: "Fig 6.1 (simulator): mean latency against closed-loop clients", Kind: experiment.Lines,
				Metric: mLatency, YLabel: "latency (ms)", X: "clients", XLabel: "closed-loop clients", Series: []string{"strategy"}},
		},
		Notes: []string{
			"sim: protocol/adam on 3 nodes (execution replicas and verifiers co-located), 8 virtual cores each, local_cost 10 ms, merkle real with adam's default hash_cost (0) and timeout (100 ms); network 100 µs each way; callee: paxos on 3 nodes, every answer 10 ms later (--callee-delay constant:10ms); closed-loop clients sending SETs (one nested request each) without think time; no faults; invariants checked, histories not (the conformance suite does that); the replay label is the `synod-lab sim` command of the cell",
			"configurations as the seed's: naive 1 thread, spm 3 threads (\"equivalent to our implementation using three groups\"), walls 8 threads, ppm 3 groups x 8 threads",
			"steady state: answers between the 10th and 90th percentile of answer times (warm-up and drain excluded); `req/s incl. warm-up` divides every answer by the whole simulated run",
			"fig61-latency-throughput.png is the seed's kind of graph (mean latency against steady throughput, a point per client count, the seed's peaks as triangles on the axis), drawn by the sweep's last cell; fig61-tput and fig61-latency show the same cells against the client count; a batch starts when the previous one has finished, so a full batch needs more clients than threads",
		},
	}
}

// keyGet returns parameter name of a cell key ("name=value,...").
func keyGet(key, name string) string {
	for _, p := range strings.Split(key, ",") {
		if n, v, ok := strings.Cut(p, "="); ok && n == name {
			return v
		}
	}
	return ""
}
