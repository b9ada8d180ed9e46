package seed001

import (
	"fmt"
	"sort"

	"github.com/synod-dev/synod/experiment"
)

// Claims judges the seed's conclusion (section 5: "where the number of
// nodes grows, non-blocking ABD outperforms the blocking protocol") on the
// seed's own ABD, driven by its clients (abd-client), at the largest N run,
// per mix: ABD keeps a larger fraction of its N=1 throughput than blocking
// (degrades less), and its throughput is above blocking's (outperforms).
// Node-coordinated ABD is reported beside it, not judged.
func (t *Throughput) Claims(d experiment.Data) []experiment.Claim {
	ns := append([]int(nil), t.Nodes...)
	sort.Ints(ns)
	top := ns[len(ns)-1]
	var out []experiment.Claim
	for _, r := range t.Ratios {
		k := func(p string, n int) string { return cellKey(p, n, r, loadClosed) }
		for _, part := range []struct {
			what, metric, paper string
		}{
			{"degrades less: its throughput relative to N=1 above blocking's", mRelThroughput, "relative to N=1"},
			{"outperforms: its throughput above blocking's", mThroughput, "ops/s"},
		} {
			text := fmt.Sprintf("§5: \"where the number of nodes grows, non-blocking ABD outperforms the blocking protocol\" (client-driven ABD, GET %s, N=%d): %s", r, top, part.what)
			paper := "-"
			if a, ok := d.Seed.Get(k("abd", top), part.metric); ok {
				b, _ := d.Seed.Get(k("blocking", top), part.metric)
				paper = fmt.Sprintf("ABD %.2f vs blocking %.2f (%s)", a, b, part.paper)
			}
			if c, ok := d.NotRun(text, paper, k(abdClient, top), k("blocking", top), k(abdClient, 1), k("blocking", 1)); ok {
				out = append(out, c)
				continue
			}
			j := experiment.RatioAbove("abd-client/blocking "+part.metric, d.Sample(k(abdClient, top), part.metric), d.Sample(k("blocking", top), part.metric), 1)
			cl := experiment.Claim{Text: text, Paper: paper, Judgement: j, Cause: t.breakdown(d, r, top)}
			out = append(out, cl)
		}
	}
	return out
}

// breakdown says where the time goes, measured: each protocol's throughput
// and mean latency at N=1 and at top, and node-coordinated ABD beside the
// client-driven one.
func (t *Throughput) breakdown(d experiment.Data, r string, top int) string {
	clients := 25 // the seed's, bench preset seed001
	if t.Clients > 0 {
		clients = t.Clients
	}
	s := fmt.Sprintf("measured (closed loop, %d clients, durability %s): ", clients, t.Durability)
	for _, p := range []string{abdClient, "abd", "blocking"} {
		a, okA := d.Ours[cellKey(p, 1, r, loadClosed)]
		b, okB := d.Ours[cellKey(p, top, r, loadClosed)]
		if !okA || !okB {
			continue
		}
		s += fmt.Sprintf("%s: N=1 %s → N=%d %s; ", p, step(a), top, step(b))
	}
	return s + "(the mean is GET share × GET ms + SET share × SET ms; node and client CPU per operation against the machine's 2 cores: " +
		"CPU per op × ops/s near 2000 ms/s means the machine, not the protocol, sets the throughput)"
}

// step is one cell's breakdown: throughput, mean latency by operation kind,
// and CPU per operation in the nodes and in the clients.
func step(m map[string]float64) string {
	return fmt.Sprintf("%.0f ops/s, mean %.2f ms (GET %.2f, SET %.2f), CPU per op: nodes %.2f ms, clients %.2f ms (%.0f ms of CPU per s)",
		m[mThroughput], m[mMean], m[mGetMs], m[mSetMs], m[mNodeCPU], m[mClientCPU], (m[mNodeCPU]+m[mClientCPU])*m[mThroughput])
}

// Claims judges section 4.4 on the measured stalls: a crashed or stalled
// lock holder stops blocking's writers for longer than ABD's.
func (f *Faults) Claims(d experiment.Data) []experiment.Claim {
	var out []experiment.Claim
	for _, n := range f.Nodes {
		for _, sc := range f.Scenarios {
			k := func(p string) string {
				return experiment.NewCell("protocol", p, "N", fmt.Sprint(n), "scenario", sc).Key
			}
			text := fmt.Sprintf("§4.4: a %s lock holder hurts the blocking protocol's writers (\"deadlock\" until a lock timeout) and not ABD's (N=%d): the longest write stall after the fault shorter under ABD", map[string]string{scCrash: "crashed", scStall: "stalled"}[sc], n)
			paper := "qualitative (no figures)"
			if c, ok := d.NotRun(text, paper, k("abd"), k("blocking")); ok {
				out = append(out, c)
				continue
			}
			j := experiment.RatioBelow("abd/blocking longest write gap", d.Sample(k("abd"), mGap), d.Sample(k("blocking"), mGap), 1)
			cause := fmt.Sprintf("measured: ABD's longest gap %.0f ms, stall ended after %.0f ms; blocking's %.0f ms and %.0f ms (gaps before the fault %.0f / %.0f ms); %s",
				d.Ours[k("abd")][mGap], d.Ours[k("abd")][mRecovery], d.Ours[k("blocking")][mGap], d.Ours[k("blocking")][mRecovery],
				d.Ours[k("abd")][mBaseline], d.Ours[k("blocking")][mBaseline], f.settingsNote())
			out = append(out, experiment.Claim{Text: text, Paper: paper, Judgement: j, Cause: cause})
		}
	}
	return out
}
