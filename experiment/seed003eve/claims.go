package seed003eve

import (
	"fmt"
	"strings"

	"github.com/synod-dev/synod/experiment"
)

// liveNote points at the live cluster cells (cluster.go).
const liveNote = "the live cluster cells (mode=cluster) measure the speedup on this machine's 2 real CPUs with request work as CPU work (automaton/cpuwork)"

// Claims judges the seed's Eve figures on the simulated cells (every run
// its own simulation seed).
func (e *Eve) Claims(d experiment.Data) []experiment.Claim {
	switch e.kind {
	case kSpeedup:
		return e.speedupClaims(d)
	case kMerkle:
		k := func(tree, cores string) string {
			return experiment.NewCell("cost", "1ms", "tree", tree, "cores", cores).Key
		}
		text := "§6 (Adam's Fig 6.3, asked of Eve): a real Merkle tree costs throughput against a zero-cost one (real/zero below 0.9, 1 ms requests, 16 cores)"
		paper := "972 vs 1371 req/s (0.709), Adam"
		if c, ok := d.NotRun(text, paper, k("real", "16"), k("zero", "16")); ok {
			return []experiment.Claim{c}
		}
		j := experiment.RatioBelow("real/zero throughput", d.Sample(k("real", "16"), mTput), d.Sample(k("zero", "16"), mTput), 0.9)
		c := experiment.Claim{Text: text, Paper: paper, Judgement: j}
		if j.Verdict != experiment.Holds {
			c.Cause = fmt.Sprintf("the hashing cost measured here is %v per written object (HashCostPerWrite, median of 5) against 1 ms of work per request: "+
				"too cheap to hold the pipeline", e.hashCost)
		}
		return []experiment.Claim{c}
	case kRollback:
		k := func(conf, keys string) string { return experiment.NewCell("conflicts", conf, "keys", keys).Key }
		text := "§2.2.1: the mixer \"greatly reduced the likelihood that replicas would diverge\": fewer rollbacks with the service's declared conflicts than with loose ones (8 keys)"
		paper := "no figure"
		if c, ok := d.NotRun(text, paper, k("service", "8"), k("loose", "8")); ok {
			return []experiment.Claim{c}
		}
		return []experiment.Claim{{Text: text, Paper: paper,
			Judgement: experiment.DiffBelow("rollback % service - loose", d.Sample(k("service", "8"), mRollback), d.Sample(k("loose", "8"), mRollback), 0)}}
	}
	k := func(s string) string { return experiment.NewCell("system", s, "cost", "1ms").Key }
	k0 := func(s string) string { return experiment.NewCell("system", s, "cost", "0s").Key }
	var out []experiment.Claim
	text := "§2.2.4: Eve's parallel execution outperforms sequential execution (eve-16 over eve-1: the same accounting)"
	if c, ok := d.NotRun(text, "Eve 4.7x over Remus; no Paxos figure", k("eve-16"), k("eve-1")); ok {
		out = append(out, c)
	} else {
		out = append(out, experiment.Claim{Text: text, Paper: "Eve 4.7x over Remus; no Paxos figure",
			Judgement: experiment.RatioAbove("eve-16/eve-1 throughput", d.Sample(k("eve-16"), mTput), d.Sample(k("eve-1"), mTput), 1)})
	}
	text = "§2.2.4: Eve outperforms replication with sequential execution (Multi-Paxos), like for like: eve-16 over paxos, Eve's execution charged to the node's CPU as Paxos's Apply"
	paper := "Eve 4.7x over Remus; no Paxos figure"
	if c, ok := d.NotRun(text, paper, k("eve-16"), k("paxos")); ok {
		return append(out, c)
	}
	j := experiment.RatioAbove("eve-16/paxos throughput", d.Sample(k("eve-16"), mTput), d.Sample(k("paxos"), mTput), 1)
	c := experiment.Claim{Text: text, Paper: paper, Judgement: j}
	if a, b := d.Sample(k("eve-1"), mTput), d.Sample(k("paxos"), mTput); a != nil && b != nil {
		c.Judgement.Ours += fmt.Sprintf("; sequential Eve (eve-1)/paxos %.2f", a.Mean()/b.Mean())
	}
	c.Cause = "measured per request (1/throughput, means): " + breakdown(d, k0, k, "paxos", "eve-1", "eve-16")
	return append(out, c)
}

// breakdown is, per system, the time per request of the protocol alone
// (1/throughput at cost 0) and what 1 ms of execution adds (1/throughput
// at 1 ms minus it).
func breakdown(d experiment.Data, k0, k func(string) string, systems ...string) string {
	var parts []string
	proto, total := map[string]float64{}, map[string]float64{}
	for _, s := range systems {
		a, b := d.Sample(k0(s), mTput), d.Sample(k(s), mTput)
		if a == nil || b == nil || a.Mean() <= 0 || b.Mean() <= 0 {
			continue
		}
		p, t := 1000/a.Mean(), 1000/b.Mean()
		proto[s], total[s] = p, t
		parts = append(parts, fmt.Sprintf("%s %.3f ms = protocol %.3f ms (ordering, persistence, rounds; cost 0) + execution %.3f ms", s, t, p, t-p))
	}
	out := strings.Join(parts, "; ")
	if p, ok := proto["paxos"]; ok && total["eve-1"] > 0 && p > total["eve-1"] {
		out += fmt.Sprintf(". Paxos's protocol alone (%.3f ms per request with no execution) takes longer than sequential Eve with 1 ms of execution per request (%.3f ms): "+
			"the gap is the protocols' own cost per request (Eve orders and verifies batches of up to 64), not the execution's accounting", p, total["eve-1"])
	}
	return out
}

func (e *Eve) speedupClaims(d experiment.Data) []experiment.Claim {
	seed := map[string]float64{"100us": 3.3, "1ms": 10, "10ms": 12.5}
	var out []experiment.Claim
	for _, c := range costs {
		key := experiment.NewCell("mode", "sim", "cost", c, "cores", "16").Key
		text := fmt.Sprintf("§2.2.4: Eve's speedup over one core with %s requests on 16 cores reaches the seed's %.1fx (judged: at least 80%% of it, simulated cores)", c, seed[c])
		paper := fmt.Sprintf("%.1fx", seed[c])
		if cl, ok := d.NotRun(text, paper, key); ok {
			out = append(out, cl)
			continue
		}
		j := experiment.MeanAbove("speedup", d.Sample(key, mSpeedup), 0.8*seed[c])
		cl := experiment.Claim{Text: text, Paper: paper, Judgement: j}
		if j.Verdict == experiment.DoesNotHold {
			cl.Cause = fmt.Sprintf("measured per batch (one in flight; %d closed-loop clients, batch_max %d): %s; %s. The speedup is bounded by "+
				"(execution + rest) on 1 core over (execution + rest) on 16: the rest does not shrink with cores (the seed: \"the inability to saturate the system with client requests\"). %s",
				e.Clients, e.Batch, slotBreakdown(d, experiment.NewCell("mode", "sim", "cost", c, "cores", "1").Key, "1 core"),
				slotBreakdown(d, key, "16 cores"), liveNote)
		}
		out = append(out, cl)
	}
	out = append(out, e.clusterClaims(d)...)
	a := d.Sample(experiment.NewCell("mode", "sim", "cost", "100us", "cores", "16").Key, mSpeedup)
	b := d.Sample(experiment.NewCell("mode", "sim", "cost", "10ms", "cores", "16").Key, mSpeedup)
	text := "§2.2.4: heavier requests gain more (0.1 ms requests' speedup below 10 ms requests', 16 cores)"
	if a == nil || b == nil {
		out = append(out, experiment.Claim{Text: text, Paper: "3.3x vs 12.5x", Judgement: experiment.Judgement{Verdict: experiment.NotMeasured, Ours: "-", Stats: "no runs"}})
	} else {
		out = append(out, experiment.Claim{Text: text, Paper: "3.3x vs 12.5x", Judgement: experiment.RatioBelow("100us/10ms speedup", a, b, 1), Cause: liveNote})
	}
	return out
}

// clusterClaims judge the live cluster cells: with one execution replica,
// cores=2 on 2 CPUs against cores=1 (a real speedup, bounded by the
// machine's 2 CPUs), and pinned to one CPU (no speedup: the work is CPU).
func (e *Eve) clusterClaims(d experiment.Data) []experiment.Claim {
	var out []experiment.Claim
	k := func(cost, cpus, cores string) string {
		return experiment.NewCell("mode", "cluster", "layout", "exec1", "cost", cost, "cpus", cpus, "cores", cores).Key
	}
	for _, c := range []string{"1ms", "10ms"} {
		if d.Sample(k(c, "2", "1"), mTput) == nil && d.Sample(k(c, "1", "1"), mTput) == nil {
			continue
		}
		for _, cpus := range []string{"2", "1"} {
			var text string
			var j experiment.Judgement
			a, b := d.Sample(k(c, cpus, "2"), mTput), d.Sample(k(c, cpus, "1"), mTput)
			if cpus == "2" {
				text = fmt.Sprintf("§2.2.4 live (%s requests of CPU work, cores from the cluster file, one execution replica on 2 CPUs): cores=2 speeds Eve up over cores=1 (ratio above 1.2; the machine's 2 CPUs bound it at 2)", c)
			} else {
				text = fmt.Sprintf("Synod's check, live (%s requests, one execution replica pinned to 1 CPU): cores=2 gains nothing over cores=1 (ratio below 1.2), so the work is CPU, not wall time", c)
			}
			paper := "10x (1 ms) / 12.5x (10 ms) on 16 cores"
			if cl, ok := d.NotRun(text, paper, k(c, cpus, "2"), k(c, cpus, "1")); ok {
				out = append(out, cl)
				continue
			}
			if cpus == "2" {
				j = experiment.RatioAbove("cores=2/cores=1 throughput", a, b, 1.2)
			} else {
				j = experiment.RatioBelow("cores=2/cores=1 throughput", a, b, 1.2)
			}
			cl := experiment.Claim{Text: text, Paper: paper, Judgement: j}
			cl.Cause = "measured: " + clusterBreakdown(d, k(c, cpus, "1"), "cores=1") + "; " + clusterBreakdown(d, k(c, cpus, "2"), "cores=2")
			if u := d.Sample(k(c, cpus, "1"), mUtil); u != nil && u.Mean() < 50 {
				cl.Cause += fmt.Sprintf(". At %.0f%% of its CPU bound the cluster is not CPU-bound: its time goes to waiting (the protocol's rounds, and the scheduler on a shared machine: see the loadavg), so cores cannot show", u.Mean())
			}
			out = append(out, cl)
		}
	}
	return out
}

// clusterBreakdown is a cluster cell's throughput against its CPU bound and
// the nodes' CPU per request.
func clusterBreakdown(d experiment.Data, key, name string) string {
	t, bound, cpu := d.Sample(key, mTput), d.Sample(key, mBound), d.Sample(key, mCPUms)
	if t == nil || bound == nil {
		return name + ": no runs"
	}
	s := fmt.Sprintf("%s %.0f req/s, %.0f%% of the CPU bound %.0f req/s (CPUs / exec_cost)", name, t.Mean(), 100*t.Mean()/bound.Mean(), bound.Mean())
	if cpu != nil {
		s += fmt.Sprintf(", the three nodes' CPU %.2f ms per request", cpu.Mean())
	}
	return s
}

// slotBreakdown is where a simulated cell's time per batch goes: the batch
// size, the execution's makespan, and the rest of the slot.
func slotBreakdown(d experiment.Data, key, name string) string {
	b, x, t := d.Sample(key, mBatch), d.Sample(key, mExecMs), d.Sample(key, mSlotMs)
	if b == nil || x == nil || t == nil {
		return name + ": no breakdown"
	}
	return fmt.Sprintf("%s: %.1f entries per batch, %.2f ms per batch = execution %.2f ms + the rest %.2f ms (verification round, persistence, waiting for requests)",
		name, b.Mean(), t.Mean(), x.Mean(), t.Mean()-x.Mean())
}
