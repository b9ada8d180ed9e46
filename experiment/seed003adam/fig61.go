package seed003adam

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/sim"
)

// adamProtocol is protocol/adam's registered name.
const adamProtocol = "adam"

// Fig61 is seed003-adam-fig61: Fig 6.1 in the simulator. protocol/adam on
// three 8-core replicas calls a three-node paxos namespace (the
// co-simulated callee, sim/callee.go) whose answers take 10 ms more (the
// remote computation); each request computes 10 ms locally.
type Fig61 struct {
	Ops, Clients, Batch int
	SimSeed             int64
}

func (*Fig61) Name() string { return "seed003-adam-fig61" }

func (*Fig61) Description() string {
	return "Seed 003 Fig 6.1 in the simulator: protocol/adam on three 8-core replicas calling a paxos namespace, 20 ms " +
		"requests (10 ms local, callee delay 10 ms), naive / SPM (3 threads) / walls (8 threads) / PPM (3 groups x 8) " +
		"(seed: 45 / ≈90 / ≈300 / 582 req/s)."
}

func (f *Fig61) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&f.Ops, "ops", f.Ops, "operations per cell (--quick: 150)")
	fs.IntVar(&f.Clients, "clients", f.Clients, "closed-loop clients, each sending SETs (every SET makes one nested request) without think time (--quick: at most 48)")
	fs.IntVar(&f.Batch, "batch", f.Batch, "adam's batch: client requests per batch (the seed does not say)")
	fs.Int64Var(&f.SimSeed, "seed", f.SimSeed, "simulation seed")
}

func (*Fig61) Cells(experiment.Options) ([]experiment.Cell, error) {
	var cells []experiment.Cell
	for _, s := range fig61 {
		cells = append(cells, experiment.NewCell("strategy", string(s.s)))
	}
	return cells, nil
}

func (f *Fig61) RunCell(_ context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	out := experiment.Outcome{Metrics: map[string]float64{}, Labels: map[string]string{"source": "sim"}}
	if _, err := automaton.Lookup(adamProtocol); err != nil {
		return out, experiment.Unavailable("protocol %s is not registered in this binary", adamProtocol)
	}
	var g, k int
	for _, s := range fig61 {
		if string(s.s) == c.Get("strategy") {
			g, k = s.g, s.k
		}
	}
	ops, clients := f.Ops, f.Clients
	if env.Quick {
		ops, clients = 150, min(clients, 48)
	}
	args := []string{"--protocol", adamProtocol, "--nodes", "3", "--clients", strconv.Itoa(clients),
		"--ops", strconv.Itoa(ops), "--faults", "none", "--keys", "100000", "--mix", "set:1", "--think", "constant:0s", "--timeout", "60s",
		"--seeds", strconv.FormatInt(f.SimSeed, 10),
		"--param", "strategy=" + c.Get("strategy"), "--param", "groups=" + strconv.Itoa(g),
		"--param", "threads=" + strconv.Itoa(k), "--param", "cores=8", "--param", "batch=" + strconv.Itoa(f.Batch),
		"--param", "local_cost=" + (10 * time.Millisecond).String(), "--param", "merkle=real",
		"--param", "callee=" + sim.DefaultCalleeNamespace,
		"--callee-protocol", "paxos", "--callee-delay", "constant:10ms"}
	cfg, seeds, err := sim.ParseArgs(args)
	if err != nil {
		return out, err
	}
	cfg.Seed = seeds[0]
	cfg.NoCheck = true // figures, not verdicts: the conformance suite checks histories
	res, err := sim.Run(cfg)
	if err != nil {
		return out, err
	}
	if res.Invariant != "" || res.Divergence != "" {
		return out, fmt.Errorf("the simulation failed: invariant %q, divergence %q", res.Invariant, res.Divergence)
	}
	out.Metrics[mTput] = float64(res.Completed) / res.SimTime.Seconds()
	return out, nil
}

// Derive adds the speedup over the naive cell.
func (*Fig61) Derive(figs experiment.Figures) {
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

func (*Fig61) Seed() experiment.SeedFigures {
	v := experiment.Figures{}
	for _, s := range fig61 {
		v.Set(experiment.NewCell("strategy", string(s.s)).Key, mTput, s.seed)
	}
	return experiment.SeedFigures{Source: "seed 003 §6 Fig 6.1 (fully replicated, r = 1, 8-core replicas, 20 ms requests)", Values: v}
}

// Summary sets the simulated ratios beside the seed's and says where the
// simulated protocol departs from the seed's system.
func (*Fig61) Summary(ours, _ experiment.Figures) []string {
	get := func(s string) float64 {
		v, _ := ours.Get(experiment.NewCell("strategy", s).Key, mTput)
		return v
	}
	naive, spm, walls, ppm := get("naive"), get("spm"), get("walls"), get("ppm")
	if naive <= 0 || walls <= 0 {
		return nil
	}
	return []string{
		fmt.Sprintf("naive %.0f req/s (seed 45, model 50): each request's wall is a verified eve slot (execution, tokens, verifiers) and its nested request a paxos commit before the 10 ms delay; the seed's naive verifies nothing", naive),
		fmt.Sprintf("SPM %.2fx naive (seed 2x), walls %.2fx (seed 6.67x), PPM 3x8 %.2fx (seed 12.93x); PPM over walls %.2fx (seed 1.94x)", spm/naive, walls/naive, ppm/naive, ppm/walls),
		"protocol/adam runs one wall at a time through eve's engine (one slot in flight, protocol/adam/ppm.go): the next group computes only after the previous wall is verified, so pipelining overlaps the remote computation but not the verification; the unit-slice model (seed003-adam-model) hands the pipeline on before the verification answer",
	}
}

func (*Fig61) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{{Metric: mTput, Header: "req/s", Format: "%.0f"}, {Metric: mSpeedup, Header: "speedup", Format: "%.2f"}},
		Labels:  []string{"source"},
		Plots: []experiment.PlotSpec{{File: "fig61-sim", Title: "Fig 6.1 (simulator): 20 ms requests, 8-core replicas", Kind: experiment.Bars,
			Metric: mTput, YLabel: "req/s", X: "strategy", XLabel: "strategy"}},
		Notes: []string{
			"sim: protocol/adam on 3 nodes (execution replicas and verifiers co-located), 8 virtual cores each, local_cost 10 ms, merkle real with adam's default hash_cost; callee: paxos on 3 nodes, every answer 10 ms later (--callee-delay constant:10ms); closed-loop clients sending SETs (one nested request each) without think time; no faults; invariants checked, histories not (the conformance suite does that)",
			"configurations as the seed's: naive 1 thread, spm 3 threads, walls 8 threads, ppm 3 groups x 8 threads",
		},
	}
}
