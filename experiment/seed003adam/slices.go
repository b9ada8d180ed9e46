// Package seed003adam reproduces the Eve/Adam thesis's figures for Adam (Wetterau
// 2015, chapters 3, 4 and 6) from package model/adam, the unit-slice model of
// the four execution strategies:
//
//   - seed003-adam-slices: the 12-request figures (Figs 3.2–3.4, 4.1: 24 /
//     12 with 7 checkpoints / 13 / 7 slices) and the multi-threaded
//     pipeline's speedup against the batch size for 2, 8 and 16 threads per
//     group (§4.2: towards 2k);
//
//   - seed003-adam-model: Figs 6.1–6.3 from the model with overheads,
//     labelled "model": the four strategies with 20 ms requests on 8 threads
//     (45 / ≈90 / ≈300 / 582 req/s), the speedup against threads per group for
//     three request sizes (Fig 6.2, the 32x ceiling), and a real against a
//     zero-cost Merkle tree (Fig 6.3: 972 vs 1371 req/s), with the checkpoint
//     cost that would explain the seed's gap.
//
//   - seed003-adam-fig61: Fig 6.1 in the simulator: protocol/adam on three
//     8-core replicas calling a paxos namespace (sim/callee.go), 10 ms local
//     computation and a 10 ms callee delay, for the four strategies.
//
// The first two are computation only (milliseconds); the third runs the
// protocol in the simulator (a few seconds).
package seed003adam

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/model/adam"
)

func init() {
	experiment.Register(&Slices{})
	experiment.Register(&Model{Batch: 960, HashPerRequest: gapHashPerRequest, Verify: 2})
	experiment.Register(&Fig61{Ops: 1200, Clients: []int{8, 24, 48, 96}, Batch: 48, SimSeed: 1})
	experiment.Register(&Fig62{SimSeed: 1, HashCost: figHashCost})
	experiment.Register(&Fig63{SimSeed: 1, HashCost: figHashCost})
	experiment.Register(&Live{Clients: 48, Local: 5 * time.Millisecond})
}

// Metrics.
const (
	mSlices  = "slices"
	mCkpts   = "checkpoints"
	mFormula = "closed_form"
	mSpeedup = "speedup"
	mLimit   = "limit"
	mTput    = "throughput"
)

// seedFigure is the 12-request figure of each strategy: slices, checkpoints,
// and the threads (groups for the PPM) it draws.
var seedFigure = []struct {
	s              adam.Strategy
	slices, ckpts  float64
	groups, thread int
	fig            string
}{
	{adam.Naive, 24, 0, 1, 1, "Fig 3.2"},
	{adam.Walls, 12, 7, 1, 2, "Fig 3.3"},
	{adam.SPM, 13, 0, 1, 2, "Fig 3.4"},
	{adam.PPM, 7, 7, 2, 2, "Fig 4.1"},
}

// The batch sizes and threads per group of the speedup part; three groups
// as in the seed's experiments.
var (
	batches      = []int{12, 24, 48, 96, 192, 480, 960}
	speedThreads = []int{2, 8, 16}
)

const speedGroups = 3

// Slices is seed003-adam-slices.
type Slices struct{}

func (*Slices) Name() string { return "seed003-adam-slices" }

func (*Slices) Description() string {
	return "Seed 003's unit-slice model (model only): 12 requests of one local and one remote slice under naive sequential, " +
		"walls on 2 threads, single-threaded pipelining on 2 threads and multi-threaded pipelining on 2 groups × 2 " +
		"(Figs 3.2–3.4, 4.1: 24 / 12 with 7 checkpoints / 13 / 7 slices), and the pipelined speedup over naive against " +
		"the batch size for 3 groups of 2, 8 and 16 threads (§4.2: towards 2k)."
}

func (*Slices) Flags(*pflag.FlagSet) {}

func (*Slices) Cells(experiment.Options) ([]experiment.Cell, error) {
	var cells []experiment.Cell
	for _, f := range seedFigure {
		cells = append(cells, experiment.NewCell("part", "figure", "strategy", string(f.s)))
	}
	for _, k := range speedThreads {
		for _, n := range batches {
			cells = append(cells, experiment.NewCell("part", "speedup", "k", strconv.Itoa(k), "N", strconv.Itoa(n)))
		}
	}
	return cells, nil
}

func (*Slices) RunCell(_ context.Context, _ *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	out := experiment.Outcome{Metrics: map[string]float64{}, Labels: map[string]string{"source": "model"}}
	if c.Get("part") == "figure" {
		for _, f := range seedFigure {
			if string(f.s) != c.Get("strategy") {
				continue
			}
			r, err := adam.Run(adam.Config{Strategy: f.s, Groups: f.groups, Threads: f.thread, Requests: adam.Uniform(12, 1, 1)})
			if err != nil {
				return out, err
			}
			out.Metrics[mSlices] = r.Makespan
			out.Metrics[mCkpts] = float64(r.Checkpoints)
			out.Metrics[mSpeedup] = 24 / r.Makespan
			out.Metrics[mFormula] = float64(closedForm(f.s, 12, f.groups, f.thread))
			return out, nil
		}
		return out, fmt.Errorf("unknown strategy %q", c.Get("strategy"))
	}
	k, _ := strconv.Atoi(c.Get("k"))
	n, _ := strconv.Atoi(c.Get("N"))
	s, err := adam.Speedup(adam.Config{Strategy: adam.PPM, Groups: speedGroups, Threads: k, Requests: adam.Uniform(n, 1, 1)})
	if err != nil {
		return out, err
	}
	out.Metrics[mSpeedup] = s
	out.Metrics[mFormula] = adam.PPMSpeedup(n, speedGroups, k)
	out.Metrics[mLimit] = float64(2 * k)
	return out, nil
}

func figureConfigs() string {
	var parts []string
	for _, f := range seedFigure {
		parts = append(parts, fmt.Sprintf("%s %s (%s)", f.s, configLabel(f.s, f.groups, f.thread), f.fig))
	}
	return strings.Join(parts, ", ")
}

func closedForm(s adam.Strategy, n, g, k int) int {
	switch s {
	case adam.Naive:
		return adam.NaiveSlices(n)
	case adam.Walls:
		return adam.WallsSlices(n, k)
	case adam.SPM:
		return adam.SPMSlices(n, k)
	}
	return adam.PPMSlices(n, g, k)
}

func configLabel(s adam.Strategy, g, k int) string {
	switch s {
	case adam.Naive:
		return "1 thread"
	case adam.PPM:
		return fmt.Sprintf("%d groups x %d threads", g, k)
	}
	return fmt.Sprintf("%d threads", k)
}

func (*Slices) Seed() experiment.SeedFigures {
	v := experiment.Figures{}
	notes := map[string]string{}
	for _, f := range seedFigure {
		key := experiment.NewCell("part", "figure", "strategy", string(f.s)).Key
		v.Set(key, mSlices, f.slices)
		v.Set(key, mCkpts, f.ckpts)
	}
	ppm := experiment.NewCell("part", "figure", "strategy", string(adam.PPM)).Key
	v.Set(ppm, mSpeedup, 24.0/7)
	notes[experiment.NewCell("part", "figure", "strategy", string(adam.Walls)).Key] = "\"seven total checkpoints (three of which are not pictured)\"; \"a 2x increase\""
	// §4.2: 2 threads per group "about a 4x"; §6: eight threads "closer to a
	// 16x improvement"; 16 cores "32 times".
	for k, lim := range map[int]float64{2: 4, 8: 16, 16: 32} {
		for _, n := range batches {
			v.Set(experiment.NewCell("part", "speedup", "k", strconv.Itoa(k), "N", strconv.Itoa(n)).Key, mLimit, lim)
		}
	}
	v.Set(experiment.NewCell("part", "speedup", "k", "2", "N", "12").Key, mSpeedup, 24.0/7)
	notes[experiment.NewCell("part", "speedup", "k", "2", "N", "12").Key] = "24/7 ≈ 3.43 at 12 requests (2 groups × 2; 3 groups give the same 7 slices), \"converges to the desired 4x\""
	return experiment.SeedFigures{Source: "seed 003 §3.2 Figs 3.2–3.4, §4 Fig 4.1, §4.2 (unit slices, 12 requests); limits §4.2 and §6", Values: v, Notes: notes}
}

func (*Slices) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mSlices, Header: "slices", Format: "%.0f"},
			{Metric: mCkpts, Header: "checkpoints", Format: "%.0f"},
			{Metric: mFormula, Header: "closed form", Format: "%.2f"},
			{Metric: mSpeedup, Header: "speedup", Format: "%.2f"},
			{Metric: mLimit, Header: "limit 2k", Format: "%.0f"},
		},
		Labels: []string{"source"},
		Plots: []experiment.PlotSpec{
			{File: "slices-12", Title: "12 requests, one local + one remote slice each (unit-slice model)", Kind: experiment.Bars,
				Metric: mSlices, YLabel: "time slices", X: "strategy", XLabel: "strategy", Filter: map[string]string{"part": "figure"}},
			{File: "speedup-batch", Title: "Multi-threaded pipelining (3 groups x k): speedup over naive against batch size (model)", Kind: experiment.Lines,
				Metric: mSpeedup, YLabel: "speedup over naive", X: "N", XLabel: "requests per batch", Series: []string{"k"}, Filter: map[string]string{"part": "speedup"}},
		},
		Notes: []string{
			"figure rows: " + figureConfigs(),
			"model: package model/adam, a discrete-event simulation of one batch; 'closed form' is 2N, 2⌈N/k⌉, N+1, ⌈N/k⌉+1 slices (figure rows) or 2N/(⌈N/k⌉+1) (speedup rows)",
			"checkpoints: walls + end of batch; the PPM takes as many as the walls strategy (§4.1); the seed's 7 for walls = 6 walls + 1 end of batch",
			"speedup rows: 3 groups of k threads (the seed's experiments use 3 groups), batches that fill every thread rise monotonically towards 2k and never reach it",
		},
	}
}

// Summary states whether the seed's figures hold in the model.
func (*Slices) Summary(ours, seed experiment.Figures) []string {
	var out []string
	for _, f := range seedFigure {
		key := experiment.NewCell("part", "figure", "strategy", string(f.s)).Key
		s, _ := ours.Get(key, mSlices)
		c, _ := ours.Get(key, mCkpts)
		out = append(out, fmt.Sprintf("%s %s: %g slices, %g checkpoints (seed: %g, %g) => %s", f.fig, f.s, s, c, f.slices, f.ckpts, holds(s == f.slices && c == f.ckpts)))
	}
	for _, n := range []int{12, 48, 480} {
		s, _ := ours.Get(experiment.NewCell("part", "speedup", "k", "16", "N", strconv.Itoa(n)).Key, mSpeedup)
		out = append(out, fmt.Sprintf("3 groups x 16 threads, N=%d: speedup %.1fx (limit 32x)", n, s))
	}
	return out
}

// holds says whether a figure matches the seed's (the verdicts are the
// claims', see claims.go).
func holds(ok bool) string {
	if ok {
		return "as the seed"
	}
	return "unlike the seed"
}
