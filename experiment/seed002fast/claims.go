package seed002fast

import (
	"fmt"
	"math"

	"github.com/synod-dev/synod/experiment"
)

// Tolerances of the verdicts (the seed states no precision).
const (
	// "around 300ms": within ±20 %.
	crossTol = 0.20
	// "approximately 0.38 / 0.65": within ±0.01.
	collTol = 0.01
)

// verdict words a threshold rule on the model's figures (the verdicts are
// the claims': see Claims).
func verdict(ok bool) string {
	if ok {
		return "as the seed"
	}
	return "unlike the seed"
}

// Claims: the model is numerical and deterministic, so each threshold rule
// is exact (experiment.Exact checks every run gave the same figures).
func (m *Model) Claims(d experiment.Data) []experiment.Claim {
	var all []experiment.Sample
	for _, ms := range d.Samples {
		for _, s := range ms {
			all = append(all, s)
		}
	}
	var out []experiment.Claim
	for _, c := range claims(d.Ours) {
		cl := experiment.Claim{Text: "Chapter V.B (model): " + c.seed, Paper: "see the claim"}
		if c.missing {
			cl.Judgement = experiment.Judgement{Verdict: experiment.NotMeasured, Ours: "-", Stats: "not computed"}
			cl.Cause = "the cell was not computed in this run"
		} else {
			cl.Judgement = experiment.Exact(c.ok, c.ours, fmt.Sprintf("the model's figure against the seed's (\"around 300 ms\" = within ±%.0f%%, \"approximately\" = ±%.2f)", crossTol*100, collTol), all...)
			if cl.Verdict == experiment.DoesNotHold {
				cl.Cause = "the model, computed numerically from the distributions the seed states (client links Pareto(α_w, 100 ms), server links Pareto(2, 3 ms)), gives " + c.ours +
					"; the claims printed as a typo in the seed (the all-LAN inequality) are kept as printed and fail by the model's own figures"
			}
		}
		out = append(out, cl)
	}
	return out
}

func wanKey(a, t string) string {
	return experiment.NewCell("case", "pareto-wan", "alpha_w", a, "t", t).Key
}

// claim is one line of the claim table.
type claim struct {
	seed, ours string
	ok         bool
	missing    bool
}

// Summary prints the claim table: each seed claim, our figure, a verdict.
func (m *Model) Summary(ours, _ experiment.Figures) []string {
	cs := claims(ours)
	out := []string{"Claims of seed 002 chapter V.B beside the model (verdicts: " + fmt.Sprintf("\"around 300 ms\" = within ±%.0f%%, \"approximately\" = ±%.2f)", crossTol*100, collTol)}
	for i, c := range cs {
		v := verdict(c.ok)
		if c.missing {
			v = "NOT COMPUTED"
		}
		out = append(out, fmt.Sprintf("%2d. seed: %s", i+1, c.seed), fmt.Sprintf("    ours: %s  => %s", c.ours, v))
	}
	return out
}

func claims(f experiment.Figures) []claim {
	get := func(key, metric string) (float64, bool) { return f.Get(key, metric) }
	var out []claim

	// 1-2. Two regions, crossover around 300 ms, both CDFs over 0.7 (t = 1).
	for _, a := range alphas {
		k := wanKey(a, "1")
		x, ok := get(k, mCross)
		pc, _ := get(k, mClassicAt)
		pf, _ := get(k, mFastAt)
		if _, any := f[k]; !any {
			out = append(out, claim{seed: "α_w = " + a + ", t = 1: two regions, division around 300 ms, both CDFs over 0.7 there", missing: true})
			continue
		}
		if !ok {
			out = append(out, claim{seed: "α_w = " + a + ", t = 1: two regions (Classic ahead for short deadlines, Fast for long)",
				ours: "no single crossing (see the plot)"})
			continue
		}
		out = append(out,
			claim{seed: "α_w = " + a + ", t = 1: two regions (Classic ahead for short deadlines, Fast for long)",
				ours: fmt.Sprintf("Classic ahead below %.0f ms, Fast above", x), ok: true},
			claim{seed: "α_w = " + a + ", t = 1: the division is \"around 300ms\"",
				ours: fmt.Sprintf("x* = %.0f ms", x), ok: math.Abs(x-300) <= crossTol*300},
			claim{seed: "α_w = " + a + ", t = 1: both CDFs \"over 0.7\" at the division",
				ours: fmt.Sprintf("P{L_c ≤ x*} = %.3f, P{L_f ≤ x*} = %.3f", pc, pf), ok: pc > 0.7 && pf > 0.7})
		if med, ok := get(k, mMedC); ok {
			out = append(out, claim{seed: "α_w = " + a + ", t = 1: the median time to consensus is \"closer to 200ms\" (than to 300)",
				ours: fmt.Sprintf("median L_c = %.0f ms, L_f = %.0f ms", med, f[k][mMedF]), ok: med < 250})
		}
	}

	// 3. Steeper Fast curve at t = 3: shorter tail, lower probabilities at small x.
	for _, a := range alphas {
		k1, k3 := wanKey(a, "1"), wanKey(a, "3")
		s1, ok1 := get(k1, "fast_at_small")
		s3, ok3 := get(k3, "fast_at_small")
		p991, ok4 := get(k1, mP99F)
		p993, ok5 := get(k3, mP99F)
		w1 := f[k1][mP90F] - f[k1][mP10F]
		w3 := f[k3][mP90F] - f[k3][mP10F]
		c := claim{seed: "α_w = " + a + ": the Fast curve is steeper at t = 3 than at t = 1 (shorter tail, lower probabilities for small x)"}
		if !(ok1 && ok3 && ok4 && ok5) {
			c.missing = true
		} else {
			c.ours = fmt.Sprintf("p90−p10 of L_f %.0f → %.0f ms, p99 %.0f → %.0f ms, P{L_f ≤ 150 ms} %.3f → %.3f", w1, w3, p991, p993, s1, s3)
			c.ok = w3 < w1 && p993 < p991 && s3 < s1
		}
		out = append(out, c)
	}

	// 4. All-LAN Pareto: Fast better everywhere (and the text's reversed inequality).
	for _, t := range tValues {
		k := experiment.NewCell("case", "pareto-lan", "t", t).Key
		lc, ok1 := get(k, mLeadC)
		lf, ok2 := get(k, mLeadF)
		e := f[k][mErr]
		if !(ok1 && ok2) {
			out = append(out, claim{seed: "all-LAN, t = " + t + ": Fast better at every x", missing: true})
			continue
		}
		out = append(out,
			claim{seed: "all-LAN Pareto(2, 3 ms), t = " + t + ": Fast better, P{L_f ≤ x} ≥ P{L_c ≤ x} at every x (the intended inequality)",
				ours: fmt.Sprintf("max P_c − P_f = %.4f (bracket ± %.0e), max P_f − P_c = %.3f; median L_c %.1f ms, L_f %.1f ms", lc, e, lf, f[k][mMedC], f[k][mMedF]),
				ok:   lc <= 2*e+1e-3 && lf > 0.05},
			claim{seed: "all-LAN, t = " + t + ", as printed: \"for any time value x, P{L_c ≤ x} ≥ P{L_f ≤ x}\" (a typo)",
				ours: fmt.Sprintf("P_f exceeds P_c by up to %.3f", lf), ok: lf <= 2*e+1e-3})
	}

	// 5. Collisions at δ = 0.
	for _, c := range []struct {
		t    string
		seed float64
	}{{"1", 0.38}, {"3", 0.65}} {
		k := experiment.NewCell("case", "collision-clients", "t", c.t, "clients", "2").Key
		v, ok := get(k, mColl0)
		cl := claim{seed: fmt.Sprintf("two simultaneous requests collide with probability ≈ %.2f at t = %s", c.seed, c.t)}
		if !ok {
			cl.missing = true
		} else {
			cl.ours = fmt.Sprintf("%.4f", v)
			cl.ok = math.Abs(v-c.seed) <= collTol
		}
		out = append(out, cl)
	}

	// 6. Falling faster with δ for larger t.
	kd := experiment.NewCell("case", "collision-delta").Key
	if from, ok := get(kd, mCrossD); ok {
		p1, p3 := f[kd][mCollT1At], f[kd][mCollT3At]
		out = append(out, claim{seed: "larger t: higher collision probability for small δ, but it falls faster with δ (Fig V.5)",
			ours: fmt.Sprintf("t = 3 above t = 1 at δ = 0 (%.3f vs %.3f), below from δ = %.0f ms on (δ = 200 ms: %.3f vs %.3f)",
				f[kd]["collision_t3_delta0"], f[kd]["collision_t1_delta0"], from, p3, p1),
			ok: f[kd]["collision_t3_delta0"] > f[kd]["collision_t1_delta0"] && p3 < p1})
	} else {
		out = append(out, claim{seed: "larger t: collision probability falls faster with δ", ours: "t = 3 never falls below t = 1 on the δ grid", missing: !has(f, kd)})
	}

	// 7. Growing with the number of clients.
	for _, t := range tValues {
		var vals []float64
		inc := true
		for i, c := range clients {
			v, ok := get(experiment.NewCell("case", "collision-clients", "t", t, "clients", c).Key, mColl0)
			if !ok {
				inc = false
				break
			}
			if i > 0 && v <= vals[i-1] {
				inc = false
			}
			vals = append(vals, v)
		}
		var v50 []float64
		for _, c := range clients {
			v, _ := get(experiment.NewCell("case", "collision-clients", "t", t, "clients", c).Key, mColl50)
			v50 = append(v50, v)
		}
		out = append(out, claim{seed: "t = " + t + ": the collision probability grows with the number of clients (2, 4, 6, 8)",
			ours: fmt.Sprintf("simultaneous %s; 50 ms apart %s", fmtList(vals), fmtList(v50)), ok: inc, missing: len(vals) < len(clients)})
	}

	// 8. Our loopback trace (the seed's LAN traces are not available).
	for _, t := range tValues {
		k := experiment.NewCell("case", "trace-loopback", "t", t).Key
		lc, ok1 := get(k, mLeadC)
		lf, ok2 := get(k, mLeadF)
		if !(ok1 && ok2) {
			continue
		}
		e := f[k][mErr]
		out = append(out, claim{seed: "LAN trace, moderately skewed (V.9(a)): Fast outperforms Classic (ours: loopback NWS-probe trace, t = " + t + ")",
			ours: fmt.Sprintf("max P_c − P_f = %.4f (± %.0e), max P_f − P_c = %.3f; median L_c %.3f ms, L_f %.3f ms", lc, e, lf, f[k][mMedC], f[k][mMedF]),
			ok:   lc <= 2*e+1e-3 && lf > 0.05})
	}
	return out
}

func has(f experiment.Figures, k string) bool { _, ok := f[k]; return ok }

func fmtList(v []float64) string {
	s := ""
	for i, x := range v {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%.3f", x)
	}
	return s
}
