package seed002fastsim

import (
	"fmt"
	"math"

	"github.com/synod-dev/synod/experiment"
)

func (e *Sim) Seed() experiment.SeedFigures {
	v := experiment.Figures{}
	notes := map[string]string{}
	for _, a := range alphas {
		k := wanKey(a, "1")
		v.Set(k, mSimX, 300)
		notes[k] = "two regions, division \"around 300ms\" (of the time to learn), both CDFs \"over 0.7\" there (Fig V.3)"
		notes[wanKey(a, "3")] = "Fast curve steeper than at t = 1 (Fig V.4)"
	}
	for _, t := range tValues {
		notes[experiment.NewCell("case", "pareto-lan", "t", t).Key] = "Fast \"clearly performs better\" (Fig V.6)"
	}
	return experiment.SeedFigures{Source: "seed 002, chapter V.B (Figs V.3, V.4, V.6: time to learn; ours are round trips)", Values: v, Notes: notes}
}

func (e *Sim) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mN, Header: "n", Format: "%.0f"},
			{Metric: mSimX, Header: "x* sim", Format: "%.0f"},
			{Metric: mModX, Header: "x* model", Format: "%.0f"},
			{Metric: mSimMedC, Header: "med C sim", Format: "%.4g"},
			{Metric: mTopoMedC, Header: "C topo", Format: "%.4g"},
			{Metric: mModMedC, Header: "C model", Format: "%.4g"},
			{Metric: mSimMedF, Header: "med F sim", Format: "%.4g"},
			{Metric: mTopoMedF, Header: "F topo", Format: "%.4g"},
			{Metric: mModMedF, Header: "F model", Format: "%.4g"},
			{Metric: mKSC, Header: "KS C", Format: "%.3f"},
			{Metric: mKSF, Header: "KS F", Format: "%.3f"},
			{Metric: mDKWF, Header: "DKW", Format: "%.3f"},
		},
		Labels: []string{"paxos_leader"},
		Notes: []string{
			"Client round trips in ms (the simulator cannot see a learner learn; see the package doc): sim = the real protocols in the",
			"simulator; model = the seed's model plus the reply to the client; topo = the same with self-messages free, as in the simulator.",
			"x* = the last crossing of the CDFs (Classic ahead below); KS = Kolmogorov distance of sim to topo; DKW = its 99.9 % bound for n.",
			"Plots: rtt-*.png/svg (solid: simulated; dashed: model). Collisions from the simulator and live runs: not measured (package doc).",
		},
	}
}

func wanKey(a, t string) string {
	return experiment.NewCell("case", "pareto-wan", "alpha_w", a, "t", t).Key
}

func verdict(ok bool) string {
	if ok {
		return "HOLDS"
	}
	return "DOES NOT HOLD"
}

// Summary prints each seed claim with the simulator's figure beside the
// model's, and whether the simulated runs agree with the model.
func (e *Sim) Summary(ours, _ experiment.Figures) []string {
	out := []string{"Claims of seed 002 chapter V.B: the simulated protocols (client round trips) beside the model (+ the reply)"}
	n := 0
	add := func(seed, ours string, ok bool) {
		n++
		out = append(out, fmt.Sprintf("%2d. seed: %s", n, seed), fmt.Sprintf("    ours: %s  => %s", ours, verdict(ok)))
	}
	for _, a := range alphas {
		k := wanKey(a, "1")
		f, ok := ours[k]
		if !ok {
			continue
		}
		x, has := f[mSimX]
		mx := f[mModX]
		if !has {
			add("α_w = "+a+", t = 1: two regions (Classic ahead for short deadlines, Fast for long), division around 300 ms",
				fmt.Sprintf("simulated: no single crossing (max Pc−Pf %.3f, max Pf−Pc %.3f); model x* = %.0f ms", f[mSimLeadC], f[mSimLeadF], mx), false)
			continue
		}
		holds := f[mSimPc] > 0.7 && f[mSimPf] > 0.7
		why := ""
		if !holds {
			why = fmt.Sprintf(", not over 0.7: Classic leads only below (max lead %.3f); the client's first of 3t+1 replies gives Fast the rest", f[mSimLeadC])
		}
		add("α_w = "+a+", t = 1: two regions, division \"around 300ms\", both CDFs over 0.7 there (time to learn; a round trip adds one client link)",
			fmt.Sprintf("simulated x* = %.0f ms (model + reply %.0f ms); there P{RTT_c ≤ x*} = %.3f, P{RTT_f ≤ x*} = %.3f%s", x, mx, f[mSimPc], f[mSimPf], why), holds)
	}
	for _, a := range alphas {
		f1, ok1 := ours[wanKey(a, "1")]
		f3, ok3 := ours[wanKey(a, "3")]
		if !(ok1 && ok3) {
			continue
		}
		add("α_w = "+a+": the Fast curve is steeper at t = 3 (shorter tail)",
			fmt.Sprintf("simulated p99 RTT_f %.0f → %.0f ms (model medians %.0f → %.0f)", f1[mSimP99F], f3[mSimP99F], f1[mModMedF], f3[mModMedF]), f3[mSimP99F] < f1[mSimP99F])
	}
	for _, t := range tValues {
		k := experiment.NewCell("case", "pareto-lan", "t", t).Key
		f, ok := ours[k]
		if !ok {
			continue
		}
		add("all-LAN Pareto(2, 3 ms), t = "+t+": Fast better at every x",
			fmt.Sprintf("simulated median RTT_c %.2f ms, RTT_f %.2f ms; max Pc−Pf %.3f, max Pf−Pc %.3f (model medians %.2f, %.2f)",
				f[mSimMedC], f[mSimMedF], f[mSimLeadC], f[mSimLeadF], f[mModMedC], f[mModMedF]), f[mSimLeadC] <= f[mDKWC] && f[mSimLeadF] > 0)
	}
	// The simulator against the model with self-messages free: same chains?
	for _, c := range cellsOrder() {
		f, ok := ours[c]
		if !ok {
			continue
		}
		add("(ours) "+c+": the simulated protocols follow the model's message chains",
			fmt.Sprintf("KS distance to the model with self-messages free: Classic %.3f (bound %.3f), Fast %.3f (bound %.3f), n = %.0f",
				f[mKSC], f[mDKWC], f[mKSF], f[mDKWF], f[mN]), f[mKSC] <= f[mDKWC] && f[mKSF] <= f[mDKWF] && !math.IsNaN(f[mDKWF]))
	}
	out = append(out, "Collision probability at δ = 0 from the simulator: not measured (package doc); model: seed002-fast-vs-classic-model.")
	return out
}

func cellsOrder() []string {
	var ks []string
	for _, a := range alphas {
		for _, t := range tValues {
			ks = append(ks, wanKey(a, t))
		}
	}
	for _, t := range tValues {
		ks = append(ks, experiment.NewCell("case", "pareto-lan", "t", t).Key)
	}
	return ks
}
