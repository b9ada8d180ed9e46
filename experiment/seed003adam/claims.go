package seed003adam

import (
	"fmt"
	"strconv"

	"github.com/synod-dev/synod/experiment"
)

// Claims of the unit-slice figures: the model is package model/adam, written
// from the seed's description of the strategies (not fitted to its
// figures), deterministic, so each figure is an exact rule.
func (*Slices) Claims(d experiment.Data) []experiment.Claim {
	var out []experiment.Claim
	for _, f := range seedFigure {
		key := experiment.NewCell("part", "figure", "strategy", string(f.s)).Key
		text := fmt.Sprintf("%s: %s on 12 requests takes %g time slices and %g checkpoints", f.fig, f.s, f.slices, f.ckpts)
		paper := fmt.Sprintf("%g slices, %g checkpoints", f.slices, f.ckpts)
		if c, ok := d.NotRun(text, paper, key); ok {
			out = append(out, c)
			continue
		}
		s, c := d.Ours[key][mSlices], d.Ours[key][mCkpts]
		out = append(out, experiment.Claim{Text: text, Paper: paper, Judgement: experiment.Exact(s == f.slices && c == f.ckpts,
			fmt.Sprintf("%g slices, %g checkpoints", s, c), "unit-slice model (model/adam) of the seed's strategy", d.Sample(key, mSlices), d.Sample(key, mCkpts))})
	}
	// §4.2: the pipelined speedup rises towards 2k and never reaches it.
	var xs []float64
	var ys []experiment.Sample
	var below = true
	for _, n := range batches {
		key := experiment.NewCell("part", "speedup", "k", "16", "N", strconv.Itoa(n)).Key
		if s := d.Sample(key, mSpeedup); s != nil {
			xs = append(xs, float64(n))
			ys = append(ys, s)
			below = below && s.Mean() < 32
		}
	}
	text := "§4.2: the speedup of 3 groups of 16 threads over naive grows with the batch towards 2k = 32, never reaching it"
	j := experiment.AllOf(experiment.SlopeAbove("speedup per request of batch", xs, ys, 0),
		experiment.Exact(below, fmt.Sprintf("every batch below 32: %v", below), "unit-slice model", ys...))
	out = append(out, experiment.Claim{Text: text, Paper: "towards 2k", Judgement: j})
	return out
}

// Claims of the model with overheads: its hashing cost per request is the
// seed's own Fig 6.3 gap (1/972 s - 1/1371 s), so Fig 6.3 is consistent by
// construction; Figs 6.1 and 6.2 are exact rules on the deterministic model.
func (m *Model) Claims(d experiment.Data) []experiment.Claim {
	k := func(nv ...string) string { return experiment.NewCell(nv...).Key }
	naive, spm := k("fig", "6.1", "strategy", "naive"), k("fig", "6.1", "strategy", "spm")
	walls, ppm := k("fig", "6.1", "strategy", "walls"), k("fig", "6.1", "strategy", "ppm")
	var out []experiment.Claim
	add := func(text, paper string, cells []string, j func() experiment.Judgement) {
		if c, ok := d.NotRun(text, paper, cells...); ok {
			out = append(out, c)
			return
		}
		out = append(out, experiment.Claim{Text: text, Paper: paper, Judgement: j()})
	}
	add("Fig 6.1 (model): single-threaded pipelining gives \"twice the performance of the naive implementation\" (1.8x-2.2x)", "≈90 vs 45 req/s",
		[]string{naive, spm}, func() experiment.Judgement {
			r := d.Ours[spm][mTput] / d.Ours[naive][mTput]
			return experiment.Exact(r > 1.8 && r < 2.2, fmt.Sprintf("spm/naive %.2f", r), "unit-slice model with overheads", d.Sample(spm, mTput), d.Sample(naive, mTput))
		})
	add("Fig 6.1 (model): pipelining walls \"close to the throughput doubling\" (ppm/walls 1.6x-2.2x)", "582 vs ≈300 req/s (1.94x)",
		[]string{walls, ppm}, func() experiment.Judgement {
			r := d.Ours[ppm][mTput] / d.Ours[walls][mTput]
			return experiment.Constructed(fmt.Sprintf("ppm/walls %.2f", r), fmt.Sprintf("the walls' checkpoint cost is the seed's own Fig 6.3 gap (%.3f ms hashed per request) and a chosen %.1f ms verification", m.HashPerRequest, m.Verify))
		})
	large, small := k("fig", "6.2", "size", "large", "threads", "16"), k("fig", "6.2", "size", "small", "threads", "16")
	add("Fig 6.2 (model): large requests come closest to the 32x ceiling, shorter ones fall further short", "large 21.6x (972/45)",
		[]string{large, small}, func() experiment.Judgement {
			l, s := d.Ours[large][mSpeedup], d.Ours[small][mSpeedup]
			return experiment.Constructed(fmt.Sprintf("large %.1fx, small %.1fx", l, s), fmt.Sprintf("the checkpoint cost is the seed's own Fig 6.3 gap (%.3f ms per request) and a chosen %.1f ms verification; the simulator's figure is judged in seed003-adam-fig62", m.HashPerRequest, m.Verify))
		})
	real, fake := k("fig", "6.3", "tree", "real", "threads", "16"), k("fig", "6.3", "tree", "fake", "threads", "16")
	add("Fig 6.3 (model): a real Merkle tree costs throughput against a zero-cost one", "972 vs 1371 req/s (0.709)",
		[]string{real, fake}, func() experiment.Judgement {
			return experiment.Constructed(fmt.Sprintf("%.0f vs %.0f req/s (%.3f)", d.Ours[real][mTput], d.Ours[fake][mTput], d.Ours[real][mTput]/d.Ours[fake][mTput]),
				fmt.Sprintf("the model's hashing cost per request, %.3f ms, is the seed's own gap 1/972 s - 1/1371 s; Synod's Merkle tree's measured cost is judged in seed003-adam-fig63 (tree=measured)", m.HashPerRequest))
		})
	return out
}

// Claims of Fig 6.1 in the simulator, on the most clients run (the
// steady throughput of every run, seeds varied by run).
func (f *Fig61) Claims(d experiment.Data) []experiment.Claim {
	cl := f.clients(d.Quick)
	top := strconv.Itoa(cl[len(cl)-1])
	k := func(s string) string { return experiment.NewCell("strategy", s, "clients", top).Key }
	t := func(s string) experiment.Sample { return d.Sample(k(s), mTput) }
	var out []experiment.Claim
	text := "Fig 6.1: throughput rises naive < spm < walls < ppm (" + top + " clients)"
	paper := "45 / ≈90 / ≈300 / 582 req/s"
	if c, ok := d.NotRun(text, paper, k("naive"), k("spm"), k("walls"), k("ppm")); ok {
		return []experiment.Claim{c}
	}
	cause := fmt.Sprintf("measured per request beyond the 20 ms of work: naive %.1f ms (two verified eve slots and a paxos commit per request); ppm: one wall of 8 every %.1f ms, %.1f ms beyond its 10 ms of local work (protocol/adam keeps one eve slot in flight: the next group computes only after the previous wall is verified)",
		1000/t("naive").Mean()-20, 8000/t("ppm").Mean(), 8000/t("ppm").Mean()-10)
	out = append(out, experiment.Claim{Text: text, Paper: paper, Cause: cause, Judgement: experiment.AllOf(
		experiment.RatioAbove("spm/naive", t("spm"), t("naive"), 1),
		experiment.RatioAbove("walls/spm", t("walls"), t("spm"), 1),
		experiment.RatioAbove("ppm/walls", t("ppm"), t("walls"), 1))})
	out = append(out, experiment.Claim{Text: "Fig 6.1: multi-threaded pipelining 3x8 reaches 12.9x naive (judged: above 10x)", Paper: "582/45 = 12.9x",
		Cause: cause, Judgement: experiment.RatioAbove("ppm/naive", t("ppm"), t("naive"), 10)})
	return out
}

// Claims of Fig 6.2 in the simulator.
func (f *Fig62) Claims(d experiment.Data) []experiment.Claim {
	sp := func(size, k string) experiment.Sample {
		return d.Sample(experiment.NewCell("strategy", "ppm", "size", size, "threads", k).Key, mSpeedup)
	}
	var out []experiment.Claim
	var xs []float64
	var ys []experiment.Sample
	for _, k := range []int{1, 2, 3, 4, 6, 8, 10, 12, 14, 16} {
		if s := sp("large", strconv.Itoa(k)); s != nil {
			xs = append(xs, float64(k))
			ys = append(ys, s)
		}
	}
	text := "Fig 6.2: with large requests the speedup of 3 groups grows with the threads per group"
	if len(xs) < 2 {
		out = append(out, experiment.Claim{Text: text, Paper: "towards 21.6x at 16 threads",
			Judgement: experiment.Judgement{Verdict: experiment.NotMeasured, Ours: "-", Stats: "fewer than two thread counts ran"},
			Cause:     "fewer than two thread counts ran"})
	} else {
		out = append(out, experiment.Claim{Text: text, Paper: "towards 21.6x at 16 threads", Judgement: experiment.SlopeAbove("speedup per thread", xs, ys, 0)})
	}
	text = "Fig 6.2: \"we deviate from the theoretical benefit even more for shorter requests\": small requests' speedup below large's (16 threads)"
	if c, ok := d.NotRun(text, "large 21.6x of 32x", experiment.NewCell("strategy", "ppm", "size", "small", "threads", "16").Key,
		experiment.NewCell("strategy", "ppm", "size", "large", "threads", "16").Key); ok {
		out = append(out, c)
	} else {
		out = append(out, experiment.Claim{Text: text, Paper: "large 21.6x of 32x",
			Judgement: experiment.RatioBelow("small/large speedup", sp("small", "16"), sp("large", "16"), 1),
			Cause:     "a wall's verification (tokens to 4 verifiers, their accept round) holds the pipeline, a fixed cost per wall that weighs more the shorter the requests"})
	}
	return out
}

// Claims of Fig 6.3 in the simulator: the simulated hash cost is derived
// from the seed's own gap (consistent by construction); with the cost of
// Synod's tree measured on this machine, the question is open.
func (f *Fig63) Claims(d experiment.Data) []experiment.Claim {
	k := func(tree string) string {
		return experiment.NewCell("strategy", "ppm", "tree", tree, "threads", "16").Key
	}
	t := func(tree string) experiment.Sample { return d.Sample(k(tree), mTput) }
	var out []experiment.Claim
	text := "Fig 6.3: a real Merkle tree costs throughput against a zero-cost one (16 threads per group), with the simulator's hash_cost derived from the seed's gap"
	paper := "972 vs 1371 req/s (0.709)"
	if c, ok := d.NotRun(text, paper, k("real"), k("fake")); ok {
		out = append(out, c)
	} else {
		j := experiment.Constructed(fmt.Sprintf("real/fake %.3f", t("real").Mean()/t("fake").Mean()),
			fmt.Sprintf("hash_cost %v per written object is the seed's gap (1/972 s - 1/1371 s = %.3f ms per request, two objects each)", f.HashCost, gapHashPerRequest))
		out = append(out, experiment.Claim{Text: text, Paper: paper, Judgement: j})
	}
	text = "Fig 6.3: a real Merkle tree costs throughput (real/fake below 0.9), with Synod's tree's hashing cost measured on this machine"
	if c, ok := d.NotRun(text, paper, k("measured"), k("fake")); ok {
		out = append(out, c)
	} else {
		h := d.Ours[k("measured")][mHashNs]
		j := experiment.RatioBelow("measured-tree/fake throughput", t("measured"), t("fake"), 0.9)
		cl := experiment.Claim{Text: text, Paper: paper, Judgement: j}
		if j.Verdict != experiment.Holds {
			cl.Cause = fmt.Sprintf("Synod's sharded-KV Merkle tree costs %.1f µs per written object here (seed003-eve's HashCostPerWrite, median of 5), %.4f ms per request of 20 ms: "+
				"against the %.3f ms per request the seed's gap implies, hashing is too cheap to hold the pipeline", h/1000, 2*h/1e6, gapHashPerRequest)
		}
		out = append(out, cl)
	}
	return out
}

// Claims of the live run: the machine's speedup, judged against the naive
// strategy on the same cluster.
func (l *Live) Claims(d experiment.Data) []experiment.Claim {
	k := func(s string) string { return experiment.NewCell("strategy", s).Key }
	text := "Fig 6.1 live: multi-threaded pipelining (ppm) beats the naive strategy on this machine"
	paper := "582 vs 45 req/s on 8-core replicas"
	if c, ok := d.NotRun(text, paper, k("ppm"), k("naive")); ok {
		return []experiment.Claim{c}
	}
	return []experiment.Claim{{Text: text, Paper: paper,
		Judgement: experiment.RatioAbove("ppm/naive throughput", d.Sample(k("ppm"), mTput), d.Sample(k("naive"), mTput), 1),
		Cause: fmt.Sprintf("every replica executes every local step (3 x local_cost = %v of CPU per request on %s shared cores), adam's live execution runs a slot's steps one after another "+
			"(protocol/eve runLive parallelises only a sharded state), so only pipelining remains: it overlaps the paxos commit (about a millisecond on loopback) with the next group's local steps", 3*l.Local, "this machine's")}}
}
