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
	"github.com/synod-dev/synod/experiment/seed003eve"
	"github.com/synod-dev/synod/model/adam"
)

// figHashCost is adam's hash_cost in Figs 6.2 and 6.3: a request writes
// two objects (its suspension, its completion), so 150 µs each is the
// 0.299 ms per request that the seed's Fig 6.3 gap implies
// (gapHashPerRequest).
const figHashCost = 150 * time.Microsecond

// Fig63 is seed003-adam-fig63: Fig 6.3 in the simulator with the real
// protocol: the unreplicated setting of Fig62, large requests, 3 groups of
// k threads on 16 virtual cores, with adam's merkle=real (hash_cost per
// written object, charged to the wall's makespan) against merkle=fake
// (the seed's zero-cost tree: the same operations, hashing free).
type Fig63 struct {
	SimSeed  int64
	HashCost time.Duration

	measured time.Duration // Synod's tree's cost per written object, measured once per run
}

// mHashNs is the measured hash cost per written object (ns) of tree=measured.
const mHashNs = "hash_ns"

// medianHashCost is the median of five measurements of Synod's sharded-KV
// Merkle tree's cost per written object (seed003eve.HashCostPerWrite).
func medianHashCost() time.Duration {
	var ds []time.Duration
	for i := 0; i < 5; i++ {
		ds = append(ds, seed003eve.HashCostPerWrite())
	}
	slices.Sort(ds)
	return max(ds[2], time.Nanosecond)
}

func (*Fig63) Name() string { return "seed003-adam-fig63" }

func (*Fig63) Description() string {
	return "Seed 003 Fig 6.3 in the simulator: protocol/adam unreplicated (1 execution replica, 4 verifiers, 16 virtual cores), " +
		"large requests (10+10 ms), 3 groups of k threads, merkle=real (hash_cost per written object) against merkle=fake, " +
		"beside the unit-slice model's (seed003-adam-model) and the seed's 972 vs 1371 req/s on 16 cores."
}

func (f *Fig63) Flags(fs *pflag.FlagSet) {
	fs.Int64Var(&f.SimSeed, "seed", f.SimSeed, "simulation seed")
	fs.DurationVar(&f.HashCost, "hash-cost", f.HashCost, "adam's hash_cost with merkle=real: simulated Merkle cost per written object (a request writes two)")
}

func (*Fig63) Cells(o experiment.Options) ([]experiment.Cell, error) {
	ks := []int{1, 2, 4, 8, 12, 16}
	if o.Quick {
		ks = []int{16}
	}
	cells := []experiment.Cell{experiment.NewCell("strategy", "naive", "tree", "real")}
	for _, tree := range []string{"real", "fake"} {
		for _, k := range ks {
			cells = append(cells, experiment.NewCell("strategy", "ppm", "tree", tree, "threads", strconv.Itoa(k)))
		}
	}
	// tree=measured: hash_cost is Synod's own tree's cost per written
	// object, measured on this machine (not derived from the seed's gap).
	cells = append(cells, experiment.NewCell("strategy", "ppm", "tree", "measured", "threads", "16"))
	return cells, nil
}

func (f *Fig63) RunCell(_ context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	out := experiment.Outcome{Metrics: map[string]float64{}, Labels: map[string]string{"source": "sim"}}
	k, _ := strconv.Atoi(c.Get("threads"))
	hash, tree := f.HashCost, c.Get("tree")
	if tree == "measured" {
		if f.measured == 0 {
			f.measured = medianHashCost() // once per run: one figure for every run of the cell
		}
		hash, tree = f.measured, "real"
		out.Metrics[mHashNs] = float64(f.measured.Nanoseconds())
		out.Labels["source"] = "sim, hash_cost " + f.measured.String() + " measured here"
	}
	r := unreplicated(c.Get("strategy"), k, 10*time.Millisecond, 10*time.Millisecond, hash, tree, f.SimSeed+int64(env.Rep), env.Quick)
	out.Labels["replay"] = "synod-lab sim " + strings.Join(r.args(), " ")
	if err := r.run(&out); err != nil {
		return out, err
	}
	if c.Get("strategy") == "ppm" && c.Get("tree") != "measured" {
		hash := gapHashPerRequest
		if c.Get("tree") == "fake" {
			hash = 0
		}
		tput, _, err := defaultModel().throughput(adam.PPM, 3, k, 10, 10, hash)
		if err != nil {
			return out, err
		}
		out.Metrics[mModelTput] = tput
	}
	return out, nil
}

// Derive adds the speedup over the naive cell.
func (*Fig63) Derive(figs experiment.Figures) {
	base, ok := figs.Get(experiment.NewCell("strategy", "naive", "tree", "real").Key, mTput)
	if !ok || base <= 0 {
		return
	}
	for k := range figs {
		if t, ok := figs.Get(k, mTput); ok {
			figs.Set(k, mSpeedup, t/base)
		}
	}
}

func (*Fig63) Seed() experiment.SeedFigures {
	v := experiment.Figures{}
	v.Set(experiment.NewCell("strategy", "naive", "tree", "real").Key, mTput, seedNaive)
	for tree, t := range map[string]float64{"real": seedReal, "fake": seedFake} {
		v.Set(experiment.NewCell("strategy", "ppm", "tree", tree, "threads", "16").Key, mTput, t)
	}
	return experiment.SeedFigures{Source: "seed 003 §6 Fig 6.3 (unreplicated, 16 cores, large requests): 972 (real tree) and 1371 (fake tree) req/s, naive 45", Values: v}
}

func (f *Fig63) Summary(ours, _ experiment.Figures) []string {
	get := func(m string, nv ...string) float64 {
		x, _ := ours.Get(experiment.NewCell(nv...).Key, m)
		return x
	}
	real := get(mTput, "strategy", "ppm", "tree", "real", "threads", "16")
	fake := get(mTput, "strategy", "ppm", "tree", "fake", "threads", "16")
	naive := get(mTput, "strategy", "naive", "tree", "real")
	if real <= 0 || fake <= 0 {
		return nil
	}
	return []string{
		fmt.Sprintf("16 threads per group: real %.0f vs fake %.0f req/s, ratio %.3f (seed 972 vs 1371, ratio %.3f; model %.0f vs %.0f)", real, fake, real/fake, seedReal/seedFake,
			get(mModelTput, "strategy", "ppm", "tree", "real", "threads", "16"), get(mModelTput, "strategy", "ppm", "tree", "fake", "threads", "16")),
		fmt.Sprintf("over naive %.0f req/s (real tree): real %.1fx, fake %.1fx (seed 21.6x, 30.5x over 45)", naive, real/naive, fake/naive),
		fmt.Sprintf("hash_cost %v per written object = %v per request (its suspension and its completion): the seed's gap 1/972 s - 1/1371 s = %.3f ms per request (seed003-adam-model)", f.HashCost, 2*f.HashCost, gapHashPerRequest),
		"the fake tree does not reach 32x: each wall's verification round (tokens to 4 verifiers, their accept round) holds the pipeline, as adam keeps one eve slot in flight",
	}
}

func (f *Fig63) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{{Metric: mTput, Header: "req/s", Format: "%.0f"}, {Metric: mSpeedup, Header: "speedup", Format: "%.2f"},
			{Metric: mModelTput, Header: "model req/s", Format: "%.0f"}, {Metric: mLatency, Header: "latency ms", Format: "%.1f"}},
		Labels: []string{"source"},
		Plots: []experiment.PlotSpec{{File: "fig63-sim", Title: "Fig 6.3 (simulator): real against zero-cost Merkle tree, large requests, 16 cores", Kind: experiment.Lines,
			Metric: mTput, YLabel: "req/s", X: "threads", XLabel: "threads per group", Series: []string{"tree"}, Filter: map[string]string{"strategy": "ppm"}}},
		Notes: []string{
			fmt.Sprintf("sim: the unreplicated setting of seed003-adam-fig62 (1 execution replica, 4 verifiers, 16 virtual cores), large requests 10+10 ms, 3 groups of k threads; merkle=real with hash_cost %v per written object (two per request), merkle=fake: hashing costs nothing", f.HashCost),
			"speedup over the naive strategy with the real tree; model req/s: seed003-adam-model (0.299 ms hashing per request with the real tree, 0 with the fake, 2 ms verification)",
		},
	}
}
