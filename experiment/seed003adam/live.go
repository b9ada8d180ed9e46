package seed003adam

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/bench"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/experiment"
)

// Live is seed003-adam-live: the "live on this machine's cores".
// A three-node Synod cluster on loopback serves two namespaces: the
// default one runs protocol/adam (execution replicas and verifiers
// co-located), its SETs calling the namespace "remote", which runs paxos
// on the same nodes (node/call.go carries a nested call to a namespace of
// the same cluster). Closed-loop clients send SETs for a short while; each
// strategy is one cell.
//
// Live, a request's local step does local_cost of CPU work (cpuwork iterations) on a real core (eve's live
// executor, Engine.Cost); its remote part is the paxos namespace's real
// commit on loopback, not a configured delay.
type Live struct {
	Clients int
	Local   time.Duration
}

// liveDuration is a cell's load without --duration (--quick: liveQuick).
const liveDuration, liveQuick = 5 * time.Second, 2 * time.Second

func (*Live) Name() string { return "seed003-adam-live" }

func (*Live) Description() string {
	return "Seed 003 Adam live on this machine: a 3-node loopback cluster with an adam namespace calling a paxos namespace " +
		"of the same cluster, closed-loop SETs (one nested request each), naive / spm / walls / ppm; the speedup this machine " +
		"really gives, and why it stops (seed: 45 / ≈90 / ≈300 / 582 req/s on 8-core replicas)."
}

func (l *Live) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&l.Clients, "clients", l.Clients, "closed-loop clients")
	fs.DurationVar(&l.Local, "local-cost", l.Local, "adam's local_cost: the CPU work of each request's local step")
}

func (*Live) Cells(experiment.Options) ([]experiment.Cell, error) {
	var cells []experiment.Cell
	for _, s := range fig61 {
		cells = append(cells, experiment.NewCell("strategy", string(s.s)))
	}
	return cells, nil
}

func (l *Live) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	out := experiment.Outcome{Metrics: map[string]float64{}, Labels: map[string]string{"source": "live"}}
	var g, k int
	for _, s := range fig61 {
		if string(s.s) == c.Get("strategy") {
			g, k = s.g, s.k
		}
	}
	cl, err := env.Up("adam-"+c.Get("strategy"), cluster.UpOptions{
		Nodes: 3, Protocol: adamProtocol, Durability: "memory",
		Params: map[string]string{"strategy": c.Get("strategy"), "groups": strconv.Itoa(g), "threads": strconv.Itoa(k),
			"local_cost": l.Local.String(), "callee": "remote", "batch": "48"},
		Extra: []config.Namespace{{Name: "remote", Protocol: "paxos", Service: "kv"}},
	})
	if err != nil {
		return out, err
	}
	defer env.Down(cl)
	load := bench.DefaultConfig()
	load.Addrs = nil
	for _, n := range cl.Nodes {
		load.Addrs = append(load.Addrs, n.Client)
	}
	load.Clients = l.Clients
	load.ReadRatio = 0
	load.Keys = 100000
	load.Duration = env.CellDuration(liveDuration, liveQuick)
	load.OpTimeout = 10 * time.Second
	load.DurabilityLabel = "memory"
	rep, err := bench.Run(ctx, load, nil)
	if err != nil {
		return out, err
	}
	if rep.All.Count == 0 {
		return out, fmt.Errorf("no SET answered: %v", rep.ErrorSamples)
	}
	out.Metrics[mTput] = rep.All.Throughput
	out.Metrics[mLatency] = rep.All.MeanMs
	if rep.All.Errors > 0 {
		out.Labels["errors"] = fmt.Sprintf("%d errors, e.g. %v", rep.All.Errors, rep.ErrorSamples)
	}
	return out, nil
}

// Derive adds the speedup over the naive cell.
func (*Live) Derive(figs experiment.Figures) {
	base, ok := figs.Get(experiment.NewCell("strategy", "naive").Key, mTput)
	if !ok || base <= 0 {
		return
	}
	for k := range figs {
		if t, ok := figs.Get(k, mTput); ok {
			figs.Set(k, mSpeedup, t/base)
		}
	}
}

func (*Live) Seed() experiment.SeedFigures {
	v := experiment.Figures{}
	for _, s := range fig61 {
		v.Set(experiment.NewCell("strategy", string(s.s)).Key, mTput, s.seed)
	}
	return experiment.SeedFigures{Source: "seed 003 §6 Fig 6.1 (8-core replicas, 20 ms requests; not this machine's setting)", Values: v}
}

func (l *Live) Summary(ours, _ experiment.Figures) []string {
	get := func(s string) float64 { v, _ := ours.Get(experiment.NewCell("strategy", s).Key, mTput); return v }
	naive := get("naive")
	if naive <= 0 {
		return nil
	}
	return []string{
		fmt.Sprintf("live, %d CPUs: naive %.0f, spm %.0f (%.2fx), walls %.0f (%.2fx), ppm %.0f (%.2fx) req/s; ceiling for sequential local steps 1/local_cost = %.0f req/s",
			runtime.NumCPU(), naive, get("spm"), get("spm")/naive, get("walls"), get("walls")/naive, get("ppm"), get("ppm")/naive, 1/l.Local.Seconds()),
		fmt.Sprintf("CPU budget: every replica executes every local step, so a request costs 3 x local_cost = %v of CPU; %d cores give at most %.0f req/s whatever the strategy, before verification, paxos, the clients and other work on the machine take their share",
			3*l.Local, runtime.NumCPU(), float64(runtime.NumCPU())/(3*l.Local.Seconds())),
		"why it stops: adam's live execution runs a slot's steps one after another (protocol/eve runLive parallelises only a sharded state; adam's state, service.NestedState with its suspended requests, is not one), so walls and ppm gain no cores live; what remains is pipelining, which overlaps the paxos namespace's commit (the remote part, about a millisecond on loopback, not the seed's 10 ms) with the next group's local steps; and the machine has 2 cores shared by the three nodes of both namespaces, the clients and other work",
	}
}

func (l *Live) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{{Metric: mTput, Header: "req/s", Format: "%.0f"}, {Metric: mSpeedup, Header: "speedup", Format: "%.2f"},
			{Metric: mLatency, Header: "latency ms", Format: "%.1f"}},
		Labels: []string{"source"},
		Plots: []experiment.PlotSpec{{File: "live", Title: "Adam live on loopback: SETs calling a paxos namespace", Kind: experiment.Bars,
			Metric: mTput, YLabel: "req/s", X: "strategy", XLabel: "strategy"}},
		Notes: []string{
			fmt.Sprintf("live: 3 synod node processes on 127.0.0.1, durability memory; namespace default runs adam (local_cost %v spun per local step, batch 48, seed 6.1's configurations: naive 1, spm 3 threads, walls 8, ppm 3x8), namespace remote runs paxos; %d closed-loop clients send SETs over RESP to every node for %v per strategy (--duration; --quick %v); the seed's rows are its 8-core figures with 20 ms requests, not this setting", l.Local, l.Clients, liveDuration, liveQuick),
		},
	}
}
