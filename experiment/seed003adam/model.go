package seed003adam

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/model/adam"
)

// The seed's Fig 6.3 (unreplicated, 16 cores, large requests, req/s) and
// its naive baseline.
const (
	seedReal, seedFake, seedNaive = 972.0, 1371.0, 45.0
	// gapHashPerRequest (ms) is the hashing per request that turns the
	// seed's fake-tree throughput into its real-tree one when hashing holds
	// the pipeline: 1/972 s − 1/1371 s per request.
	gapHashPerRequest = 1000/seedReal - 1000/seedFake
)

// Request sizes in ms (local, remote). The seed defines only large (§6: "10
// ms local computation and 10ms remote computation"); small and medium are
// ours.
var sizes = []struct {
	name          string
	local, remote float64
}{
	{"small", 0.5, 0.5},
	{"medium", 2.5, 2.5},
	{"large", 10, 10},
}

// Fig 6.1's four configurations (§6: naive; single-threaded pipelined with
// three threads; multi-threaded non-pipelined with eight; 3 groups × 8).
type fig61Row struct {
	s    adam.Strategy
	g, k int
	seed float64
	note string
}

var fig61 = []fig61Row{
	{adam.Naive, 1, 1, 45, "\"45 requests per second\""},
	{adam.SPM, 1, 3, 90, "\"twice the performance of the naive implementation\" (no number; 90 is 2 × 45)"},
	{adam.Walls, 1, 8, 300, "\"just over 300\"; expected at most 8x = 360"},
	{adam.PPM, 3, 8, 582, "\"at most 582\", 12.9x in ch. 9"},
}

// Model is seed003-adam-model.
type Model struct {
	// Batch is the number of requests per batch (the seed does not say).
	Batch int
	// HashPerRequest is the checkpoint's hashing per request in it (ms);
	// Verify the verification round trip after a checkpoint (ms).
	HashPerRequest, Verify float64
}

func (*Model) Name() string { return "seed003-adam-model" }

func (*Model) Description() string {
	return "Seed 003 Figs 6.1–6.3 from the unit-slice model with overheads (model, not a measurement): the four strategies " +
		"with 20 ms requests (10 ms local + 10 ms remote) on 8 threads (seed: 45 / ≈90 / ≈300 / 582 req/s), the speedup " +
		"of 3 groups against threads per group for small, medium and large requests (Fig 6.2, 32x ceiling), and a real " +
		"against a zero-cost Merkle tree on 16 threads per group (Fig 6.3: 972 vs 1371 req/s)."
}

func (m *Model) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&m.Batch, "batch", m.Batch, "requests per batch (the seed does not state its batch size)")
	fs.Float64Var(&m.HashPerRequest, "hash", m.HashPerRequest, "checkpoint hashing per request hashed, ms (default: the cost that explains Fig 6.3's gap)")
	fs.Float64Var(&m.Verify, "verify", m.Verify, "verification round trip after each checkpoint, ms (the seed gives none)")
}

func threadList(quick bool) []int {
	if quick {
		return []int{1, 2, 4, 8, 16}
	}
	var ts []int
	for k := 1; k <= 16; k++ {
		ts = append(ts, k)
	}
	return ts
}

func (m *Model) Cells(o experiment.Options) ([]experiment.Cell, error) {
	if m.Batch < 1 || m.HashPerRequest < 0 || m.Verify < 0 {
		return nil, fmt.Errorf("--batch %d --hash %g --verify %g: want a positive batch and non-negative costs", m.Batch, m.HashPerRequest, m.Verify)
	}
	var cells []experiment.Cell
	for _, f := range fig61 {
		cells = append(cells, experiment.NewCell("fig", "6.1", "strategy", string(f.s)))
	}
	for _, s := range sizes {
		for _, k := range threadList(o.Quick) {
			cells = append(cells, experiment.NewCell("fig", "6.2", "size", s.name, "threads", strconv.Itoa(k)))
		}
	}
	for _, tree := range []string{"real", "fake"} {
		for _, k := range threadList(o.Quick) {
			cells = append(cells, experiment.NewCell("fig", "6.3", "tree", tree, "threads", strconv.Itoa(k)))
		}
	}
	return cells, nil
}

// throughput runs one batch and returns its req/s and its speedup over the
// naive strategy on the same requests.
func (m *Model) throughput(s adam.Strategy, g, k int, local, remote, hash float64) (float64, float64, error) {
	c := adam.Config{Strategy: s, Groups: g, Threads: k, Requests: adam.Uniform(m.Batch, local, remote),
		HashPerRequest: hash, Verify: m.Verify}
	r, err := adam.Run(c)
	if err != nil {
		return 0, 0, err
	}
	c.Strategy = adam.Naive
	base, err := adam.Run(c)
	if err != nil {
		return 0, 0, err
	}
	return 1000 * r.Throughput(m.Batch), base.Makespan / r.Makespan, nil
}

func (m *Model) RunCell(_ context.Context, _ *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	out := experiment.Outcome{Metrics: map[string]float64{}, Labels: map[string]string{"source": "model"}}
	var (
		s             = adam.PPM
		g, k          = 3, 0
		local, remote = 10.0, 10.0
		hash          = m.HashPerRequest
	)
	k, _ = strconv.Atoi(c.Get("threads"))
	switch c.Get("fig") {
	case "6.1":
		for _, f := range fig61 {
			if string(f.s) == c.Get("strategy") {
				s, g, k = f.s, f.g, f.k
			}
		}
		if k == 0 {
			return out, fmt.Errorf("unknown strategy %q", c.Get("strategy"))
		}
	case "6.2":
		for _, z := range sizes {
			if z.name == c.Get("size") {
				local, remote = z.local, z.remote
			}
		}
	case "6.3":
		if c.Get("tree") == "fake" {
			hash = 0
		}
	}
	tput, speedup, err := m.throughput(s, g, k, local, remote, hash)
	out.Metrics[mTput], out.Metrics[mSpeedup] = tput, speedup
	return out, err
}

func (*Model) Seed() experiment.SeedFigures {
	v := experiment.Figures{}
	notes := map[string]string{}
	for _, f := range fig61 {
		key := experiment.NewCell("fig", "6.1", "strategy", string(f.s)).Key
		v.Set(key, mTput, f.seed)
		v.Set(key, mSpeedup, f.seed/seedNaive)
	}
	for _, f := range fig61[1:] {
		notes[experiment.NewCell("fig", "6.1", "strategy", string(f.s)).Key] = f.note
	}
	large16 := experiment.NewCell("fig", "6.2", "size", "large", "threads", "16").Key
	v.Set(large16, mSpeedup, seedReal/seedNaive)
	notes[large16] = "Fig 6.2's points are not in the text; this is Fig 6.3's real tree (972/45); ceiling 32x"
	for _, sz := range []string{"small", "medium"} {
		notes[experiment.NewCell("fig", "6.2", "size", sz, "threads", "16").Key] = "not defined by the seed; \"deviate from the theoretical benefit even more for shorter requests\""
	}
	for tree, t := range map[string]float64{"real": seedReal, "fake": seedFake} {
		key := experiment.NewCell("fig", "6.3", "tree", tree, "threads", "16").Key
		v.Set(key, mTput, t)
		v.Set(key, mSpeedup, t/seedNaive)
	}
	return experiment.SeedFigures{Source: "seed 003 §6 Figs 6.1 (fully replicated, 8-core replicas), 6.2 and 6.3 (unreplicated, 16 cores); speedups over the seed's naive 45 req/s", Values: v, Notes: notes}
}

func (m *Model) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{{Metric: mTput, Header: "req/s", Format: "%.0f"}, {Metric: mSpeedup, Header: "speedup", Format: "%.2f"}},
		Labels:  []string{"source"},
		Plots: []experiment.PlotSpec{
			{File: "fig61", Title: "Fig 6.1 (model): 20 ms requests, 8 threads", Kind: experiment.Bars, Metric: mTput, YLabel: "req/s",
				X: "strategy", XLabel: "strategy", Filter: map[string]string{"fig": "6.1"}},
			{File: "fig62", Title: "Fig 6.2 (model): speedup of 3 groups over naive", Kind: experiment.Lines, Metric: mSpeedup, YLabel: "speedup over naive",
				X: "threads", XLabel: "threads per group", Series: []string{"size"}, Filter: map[string]string{"fig": "6.2"}},
			{File: "fig63", Title: "Fig 6.3 (model): real against zero-cost Merkle tree, large requests", Kind: experiment.Lines, Metric: mTput, YLabel: "req/s",
				X: "threads", XLabel: "threads per group", Series: []string{"tree"}, Filter: map[string]string{"fig": "6.3"}},
		},
		Notes: []string{
			fmt.Sprintf("model, not a measurement: package model/adam, one batch of %d requests, every computing thread on a core of its own; speedup = naive makespan / makespan on the same requests (the seed's rows: over its naive 45 req/s)", m.Batch),
			fmt.Sprintf("overheads: each checkpoint hashes %.3f ms per request run since the previous one, holding the pipeline; a %.1f ms verification round trip follows, before nested requests leave and before results are released (hidden behind other groups' turns in the PPM); naive and SPM take no checkpoints", m.HashPerRequest, m.Verify),
			"Fig 6.1 rows: naive 1 thread, spm 3 threads (the seed: \"equivalent to our implementation using three groups\"), walls 8 threads, ppm 3 groups x 8 threads; Figs 6.2 and 6.3: 3 groups x threads, the Merkle tree's hashing per request real (--hash) or zero",
			"request sizes: small 0.5+0.5 ms and medium 2.5+2.5 ms are ours (the seed does not define them); large is the seed's 10+10 ms",
			"the seed's latency curves (Fig 6.1) are not modelled: one batch has no queueing",
		},
	}
}

// Summary sets the seed's claims beside the model and states the checkpoint
// costs the seed's figures imply.
func (m *Model) Summary(ours, _ experiment.Figures) []string {
	get := func(metric string, nv ...string) float64 {
		x, _ := ours.Get(experiment.NewCell(nv...).Key, metric)
		return x
	}
	naive := get(mTput, "fig", "6.1", "strategy", "naive")
	spm := get(mTput, "fig", "6.1", "strategy", "spm")
	walls := get(mTput, "fig", "6.1", "strategy", "walls")
	ppm := get(mTput, "fig", "6.1", "strategy", "ppm")
	real := get(mTput, "fig", "6.3", "tree", "real", "threads", "16")
	fake := get(mTput, "fig", "6.3", "tree", "fake", "threads", "16")
	large := get(mSpeedup, "fig", "6.2", "size", "large", "threads", "16")
	small := get(mSpeedup, "fig", "6.2", "size", "small", "threads", "16")
	return []string{
		fmt.Sprintf("Fig 6.1: naive %.0f req/s (seed 45; the model has no agreement or messaging cost, the seed's own ceiling is 50)", naive),
		fmt.Sprintf("Fig 6.1: SPM %.2fx naive (seed: \"twice\") => %s", spm/naive, holds(spm/naive > 1.8 && spm/naive < 2.2)),
		fmt.Sprintf("Fig 6.1: walls %.0f req/s, %.1fx (seed just over 300, 6.7x; at most 8x)", walls, walls/naive),
		fmt.Sprintf("Fig 6.1: PPM 3x8 %.0f req/s, %.1fx naive, %.2fx walls (seed 582, 12.9x, %.2fx: pipelining \"close to the throughput doubling\") => %s",
			ppm, ppm/naive, ppm/walls, 582.0/300, holds(ppm/walls > 1.6 && ppm/walls <= 2.2)),
		fmt.Sprintf("Fig 6.2: large requests reach %.1fx on 16 threads per group, small %.1fx (seed: large closest to 32x, smaller further short) => %s",
			large, small, holds(large > small && large < 32)),
		fmt.Sprintf("Fig 6.3: real %.0f vs zero-cost %.0f req/s, ratio %.3f (seed 972 vs 1371, ratio %.3f)", real, fake, real/fake, seedReal/seedFake),
		fmt.Sprintf("checkpoint cost that explains the seed's Fig 6.3 gap: 1/972 s - 1/1371 s = %.3f ms per request hashed, %.2f ms per checkpoint of 16 requests (used here with --hash %.3f)",
			gapHashPerRequest, 16*gapHashPerRequest, m.HashPerRequest),
		fmt.Sprintf("Fig 6.1 implies more: 582 req/s on 3x8 needs 8/582 s - 10 ms = %.2f ms per checkpoint of 8 (%.2f ms per request); 300 req/s with walls needs %.2f ms of checkpoint and verification per round",
			8000/582.0-10, (8000/582.0-10)/8, 8000/300.0-20),
		fmt.Sprintf("the zero-cost tree's 1371 (not 1600) leaves %.2f ms per 16-request turn that the seed does not account for; the model has no such cost, hence its higher figures", 16000/seedFake-10),
	}
}
