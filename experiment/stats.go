package experiment

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
)

// Verdicts. Every claim of a seed that an experiment judges ends in one of
// these, decided by a stated test on repeated runs (see Judge and the
// functions that return a Judgement):
//
//   - Holds / DoesNotHold: the test's confidence interval lies wholly on one
//     side of the claim's threshold.
//   - Inconclusive: the interval straddles the threshold (the difference is
//     inside the noise), or there is one run and so no noise estimate.
//   - ByConstruction: the figure comes from a model calibrated from the seed's
//     own numbers; agreeing with the seed is what it was built to do.
//   - NotMeasured: the cell the claim needs did not run here (its reason
//     is the claim's cause).
type Verdict string

// The verdicts.
const (
	Holds          Verdict = "holds"
	DoesNotHold    Verdict = "does not hold"
	Inconclusive   Verdict = "inconclusive"
	ByConstruction Verdict = "consistent by construction"
	NotMeasured    Verdict = "not measured"
)

// Verdicts lists every verdict, in the report's order.
var Verdicts = []Verdict{Holds, DoesNotHold, Inconclusive, ByConstruction, NotMeasured}

// Confidence is the level of every interval a verdict is decided by.
const Confidence = 0.95

// Sample is one metric's values over repeated runs of a cell.
type Sample []float64

// N is the number of runs.
func (s Sample) N() int { return len(s) }

// Mean is the arithmetic mean (NaN when empty).
func (s Sample) Mean() float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	t := 0.0
	for _, v := range s {
		t += v
	}
	return t / float64(len(s))
}

// SD is the sample standard deviation (n-1; 0 for one value, NaN when empty).
func (s Sample) SD() float64 {
	switch len(s) {
	case 0:
		return math.NaN()
	case 1:
		return 0
	}
	m := s.Mean()
	t := 0.0
	for _, v := range s {
		t += (v - m) * (v - m)
	}
	return math.Sqrt(t / float64(len(s)-1))
}

// Constant says every value is the same (a deterministic figure).
func (s Sample) Constant() bool {
	for _, v := range s {
		if v != s[0] {
			return false
		}
	}
	return true
}

// MeanCI is the t-based two-sided interval of the mean at level (±Inf for
// fewer than two values).
func (s Sample) MeanCI(level float64) (lo, hi float64) {
	if len(s) < 2 {
		return math.Inf(-1), math.Inf(1)
	}
	m := s.Mean()
	if s.Constant() {
		return m, m
	}
	h := TQuantile(1-(1-level)/2, len(s)-1) * s.SD() / math.Sqrt(float64(len(s)))
	return m - h, m + h
}

// String is "mean ± sd (n=N)".
func (s Sample) String() string {
	return fmt.Sprintf("%s ± %s (n=%d)", fnum(s.Mean()), fnum(s.SD()), len(s))
}

// tTable holds the t distribution's 0.975 and 0.995 quantiles for 1..30
// degrees of freedom (standard tables).
var tTable = map[float64][]float64{
	0.975: {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042},
	0.995: {63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169,
		3.106, 3.055, 3.012, 2.977, 2.947, 2.921, 2.898, 2.878, 2.861, 2.845,
		2.831, 2.819, 2.807, 2.797, 2.787, 2.779, 2.771, 2.763, 2.756, 2.750},
}

// TQuantile is Student's t quantile p for df degrees of freedom, for p =
// 0.975 and 0.995 (tables to 30, then the Cornish-Fisher expansion around the
// normal quantile, within 0.1% of the exact value from 30 on).
func TQuantile(p float64, df int) float64 {
	tab, ok := tTable[p]
	if !ok {
		panic(fmt.Sprintf("experiment.TQuantile: p=%v not tabulated (0.975, 0.995)", p))
	}
	if df < 1 {
		return math.Inf(1)
	}
	if df <= len(tab) {
		return tab[df-1]
	}
	z := math.Sqrt2 * math.Erfinv(2*p-1)
	n := float64(df)
	return z + (z*z*z+z)/(4*n) + (5*math.Pow(z, 5)+16*z*z*z+3*z)/(96*n*n)
}

// Interval is a point estimate with its confidence interval.
type Interval struct {
	Est, Lo, Hi float64
}

func (iv Interval) String() string {
	return fmt.Sprintf("%s [%s, %s]", fnum(iv.Est), fnum(iv.Lo), fnum(iv.Hi))
}

// Relation is what a claim says of an estimate against its threshold.
type Relation int

// Relations.
const (
	Above Relation = iota // the estimate exceeds the threshold
	Below                 // the estimate is under the threshold
)

// Decide is the shared decision rule: the interval wholly on the claimed
// side of the threshold holds, wholly on the other side does not hold,
// across it is inconclusive.
func Decide(iv Interval, rel Relation, threshold float64) Verdict {
	if math.IsNaN(iv.Lo) || math.IsNaN(iv.Hi) {
		return Inconclusive
	}
	above, below := iv.Lo > threshold, iv.Hi < threshold
	switch {
	case above && rel == Above, below && rel == Below:
		return Holds
	case above && rel == Below, below && rel == Above:
		return DoesNotHold
	}
	return Inconclusive
}

// bootstraps is the number of resamples of RatioCI.
const bootstraps = 4000

// RatioCI is mean(a)/mean(b) with an interval at level: the union of the
// percentile bootstrap interval (a and b resampled independently, a fixed
// seed so the report is reproducible) and the delta-method t interval
// (relative standard errors added in quadrature, Welch-Satterthwaite
// degrees of freedom). The bootstrap alone is too narrow with the few runs
// of a live cell (3 runs under a shifting load decided opposite verdicts in
// two passes); the t interval is wide there, and the two agree for large
// samples. With fewer than two values on either side the interval is
// unbounded; when neither side varies it is the point itself.
func RatioCI(a, b Sample, level float64) Interval {
	est := a.Mean() / b.Mean()
	if len(a) < 2 || len(b) < 2 {
		return Interval{est, math.Inf(-1), math.Inf(1)}
	}
	if a.Constant() && b.Constant() {
		return Interval{est, est, est}
	}
	bs := bootstrap(a, b, level, func(x, y float64) float64 { return x / y }, est)
	ma, mb := a.Mean(), b.Mean()
	va := a.SD() * a.SD() / float64(len(a)) / (ma * ma)
	vb := b.SD() * b.SD() / float64(len(b)) / (mb * mb)
	if ma == 0 || mb == 0 || math.IsNaN(va+vb) || va+vb == 0 {
		return bs
	}
	df := (va + vb) * (va + vb) / (va*va/float64(len(a)-1) + vb*vb/float64(len(b)-1))
	h := TQuantile(1-(1-level)/2, max(1, int(df))) * math.Abs(est) * math.Sqrt(va+vb)
	return Interval{est, math.Min(bs.Lo, est-h), math.Max(bs.Hi, est+h)}
}

// DiffCI is mean(a)-mean(b) with Welch's t interval at level.
func DiffCI(a, b Sample, level float64) Interval {
	est := a.Mean() - b.Mean()
	if len(a) < 2 || len(b) < 2 {
		return Interval{est, math.Inf(-1), math.Inf(1)}
	}
	va, vb := a.SD()*a.SD()/float64(len(a)), b.SD()*b.SD()/float64(len(b))
	se := math.Sqrt(va + vb)
	if se == 0 {
		return Interval{est, est, est}
	}
	// Welch-Satterthwaite degrees of freedom, rounded down (conservative).
	df := (va + vb) * (va + vb) / (va*va/float64(len(a)-1) + vb*vb/float64(len(b)-1))
	h := TQuantile(1-(1-level)/2, max(1, int(df))) * se
	return Interval{est, est - h, est + h}
}

func bootstrap(a, b Sample, level float64, f func(x, y float64) float64, est float64) Interval {
	r := rand.New(rand.NewPCG(uint64(len(a))*7919+uint64(len(b)), 0x5eed))
	vals := make([]float64, 0, bootstraps)
	mean := func(s Sample) float64 {
		t := 0.0
		for range s {
			t += s[r.IntN(len(s))]
		}
		return t / float64(len(s))
	}
	for range bootstraps {
		v := f(mean(a), mean(b))
		if !math.IsNaN(v) {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return Interval{est, math.NaN(), math.NaN()}
	}
	sort.Float64s(vals)
	q := func(p float64) float64 { return vals[min(len(vals)-1, max(0, int(p*float64(len(vals)))))] }
	return Interval{est, q((1 - level) / 2), q(1 - (1-level)/2)}
}

// SlopeCI is the least-squares slope of y against x over every run's point,
// with its t interval at level (n-2 degrees of freedom).
func SlopeCI(xs []float64, ys []Sample, level float64) Interval {
	var x, y []float64
	for i, s := range ys {
		for _, v := range s {
			x = append(x, xs[i])
			y = append(y, v)
		}
	}
	n := len(x)
	if n < 3 {
		return Interval{math.NaN(), math.Inf(-1), math.Inf(1)}
	}
	mx, my := Sample(x).Mean(), Sample(y).Mean()
	sxx, sxy := 0.0, 0.0
	for i := range x {
		sxx += (x[i] - mx) * (x[i] - mx)
		sxy += (x[i] - mx) * (y[i] - my)
	}
	if sxx == 0 {
		return Interval{math.NaN(), math.Inf(-1), math.Inf(1)}
	}
	b := sxy / sxx
	rss := 0.0
	for i := range x {
		e := y[i] - my - b*(x[i]-mx)
		rss += e * e
	}
	se := math.Sqrt(rss / float64(n-2) / sxx)
	h := TQuantile(1-(1-level)/2, n-2) * se
	return Interval{b, b - h, b + h}
}

// Judgement is a verdict with the statistics that decided it.
type Judgement struct {
	Verdict Verdict
	// Ours is our figure (e.g. "bcast/update speedup 1.00").
	Ours string
	// Stats names the test, the interval and the sample sizes.
	Stats string
}

// RatioAbove judges "mean(a)/mean(b) > threshold" (RatioBelow the other
// way) by RatioCI. what names the ratio ("bcast/update speedup").
func RatioAbove(what string, a, b Sample, threshold float64) Judgement {
	return ratio(what, a, b, Above, threshold)
}

// RatioBelow judges "mean(a)/mean(b) < threshold".
func RatioBelow(what string, a, b Sample, threshold float64) Judgement {
	return ratio(what, a, b, Below, threshold)
}

func ratio(what string, a, b Sample, rel Relation, threshold float64) Judgement {
	if len(a) == 0 || len(b) == 0 {
		return Judgement{NotMeasured, what + ": -", "no runs"}
	}
	iv := RatioCI(a, b, Confidence)
	return judged(what, iv, rel, threshold, fmt.Sprintf("ratio %s, %.0f%% CI (bootstrap and delta-method t, the wider), n=%d/%d%s",
		iv, 100*Confidence, len(a), len(b), determinism(a, b)))
}

// judged is the Judgement of one interval against a threshold: the
// verdict Decide gives, the estimate, and the statistics (how: the test,
// the interval and the sample sizes) after the claim's own words.
func judged(what string, iv Interval, rel Relation, threshold float64, how string) Judgement {
	return Judgement{
		Verdict: Decide(iv, rel, threshold),
		Ours:    fmt.Sprintf("%s %s", what, fnum(iv.Est)),
		Stats:   fmt.Sprintf("%s %s %s; %s", what, relSym(rel), fnum(threshold), how),
	}
}

// MeanAbove judges "mean(s) > threshold" (MeanBelow the other way) by the
// t interval of the mean.
func MeanAbove(what string, s Sample, threshold float64) Judgement {
	return mean(what, s, Above, threshold)
}

// MeanBelow judges "mean(s) < threshold".
func MeanBelow(what string, s Sample, threshold float64) Judgement {
	return mean(what, s, Below, threshold)
}

func mean(what string, s Sample, rel Relation, threshold float64) Judgement {
	if len(s) == 0 {
		return Judgement{NotMeasured, what + ": -", "no runs"}
	}
	lo, hi := s.MeanCI(Confidence)
	iv := Interval{s.Mean(), lo, hi}
	return judged(what, iv, rel, threshold, fmt.Sprintf("mean %s, %.0f%% t CI, sd %s, n=%d%s",
		iv, 100*Confidence, fnum(s.SD()), len(s), determinism(s)))
}

// DiffAbove judges "mean(a) - mean(b) > threshold" by Welch's interval.
func DiffAbove(what string, a, b Sample, threshold float64) Judgement {
	return diff(what, a, b, Above, threshold)
}

// DiffBelow judges "mean(a) - mean(b) < threshold".
func DiffBelow(what string, a, b Sample, threshold float64) Judgement {
	return diff(what, a, b, Below, threshold)
}

func diff(what string, a, b Sample, rel Relation, threshold float64) Judgement {
	if len(a) == 0 || len(b) == 0 {
		return Judgement{NotMeasured, what + ": -", "no runs"}
	}
	iv := DiffCI(a, b, Confidence)
	return judged(what, iv, rel, threshold, fmt.Sprintf("difference %s, %.0f%% Welch t CI, n=%d/%d%s",
		iv, 100*Confidence, len(a), len(b), determinism(a, b)))
}

// SlopeAbove judges "y grows with x" (slope > threshold; SlopeBelow for
// "falls") by SlopeCI over every run's point.
func SlopeAbove(what string, xs []float64, ys []Sample, threshold float64) Judgement {
	return slope(what, xs, ys, Above, threshold)
}

// SlopeBelow judges "slope of y against x < threshold".
func SlopeBelow(what string, xs []float64, ys []Sample, threshold float64) Judgement {
	return slope(what, xs, ys, Below, threshold)
}

func slope(what string, xs []float64, ys []Sample, rel Relation, threshold float64) Judgement {
	iv := SlopeCI(xs, ys, Confidence)
	n := 0
	for _, s := range ys {
		n += len(s)
	}
	if n == 0 {
		return Judgement{NotMeasured, what + ": -", "no runs"}
	}
	return judged(what, iv, rel, threshold, fmt.Sprintf("least-squares slope %s, %.0f%% t CI, %d points over %d x values",
		iv, 100*Confidence, n, len(xs)))
}

// AllOf combines judgements that must all hold (a claim with several parts):
// it holds when every part holds, does not hold when any part does not,
// and is otherwise the weakest verdict among them.
func AllOf(js ...Judgement) Judgement {
	if len(js) == 0 {
		return Judgement{NotMeasured, "-", "no parts"}
	}
	var ours, stats []string
	have := map[Verdict]bool{}
	for _, j := range js {
		have[j.Verdict] = true
		ours = append(ours, j.Ours)
		stats = append(stats, j.Stats)
	}
	v := Holds
	switch {
	case have[DoesNotHold]:
		v = DoesNotHold
	case have[NotMeasured]:
		v = NotMeasured
	case have[Inconclusive]:
		v = Inconclusive
	case have[ByConstruction]:
		v = ByConstruction
	}
	return Judgement{v, strings.Join(ours, "; "), strings.Join(stats, " AND ")}
}

// Constructed is the judgement of a figure that a model calibrated from the
// seed's own numbers gives: agreement is consistent by construction. how
// names the calibration.
func Constructed(ours, how string) Judgement {
	return Judgement{ByConstruction, ours, "model calibrated from the seed's figures: " + how}
}

// SweepPoint is one value of a swept parameter and the claim's judgement
// there.
type SweepPoint struct {
	Value string
	Judgement
}

// Sweep judges a claim over a parameter the seed does not state: it holds
// where its judgement holds; the verdict is Holds when it holds at some
// value (the Range names where), DoesNotHold when it holds nowhere and does
// not hold at some value, else Inconclusive.
func Sweep(param string, pts []SweepPoint) (Judgement, string) {
	var holds, not, inc []string
	var stats, ours []string
	for _, p := range pts {
		switch p.Verdict {
		case Holds:
			holds = append(holds, p.Value)
		case DoesNotHold:
			not = append(not, p.Value)
		default:
			inc = append(inc, p.Value)
		}
		ours = append(ours, param+"="+p.Value+": "+p.Ours)
		stats = append(stats, param+"="+p.Value+": "+string(p.Verdict)+" ("+p.Stats+")")
	}
	rng := fmt.Sprintf("holds at %s = {%s}; does not hold at {%s}; inconclusive at {%s}",
		param, strings.Join(holds, ", "), strings.Join(not, ", "), strings.Join(inc, ", "))
	v := Inconclusive
	switch {
	case len(holds) > 0:
		v = Holds
	case len(not) > 0:
		v = DoesNotHold
	case len(pts) == 0:
		v = NotMeasured
	}
	return Judgement{v, strings.Join(ours, "; "), strings.Join(stats, "; ")}, rng
}

func relSym(r Relation) string {
	if r == Above {
		return ">"
	}
	return "<"
}

func determinism(ss ...Sample) string {
	for _, s := range ss {
		if len(s) < 2 || !s.Constant() {
			if len(s) < 2 {
				return " (one run: no noise estimate)"
			}
			return ""
		}
	}
	return " (identical in every run: deterministic)"
}

// fnum formats a figure with 3 significant digits.
func fnum(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+inf"
	case math.IsInf(v, -1):
		return "-inf"
	case math.IsNaN(v):
		return "-"
	}
	return fmt.Sprintf("%.3g", v)
}

// Exact judges a claim computed exactly from deterministic figures (a
// virtual-time simulation whose runs are identical): ok decides it, but only
// when every sample it rests on has at least two runs and no spread; a
// figure that varies by run needs a statistical test, so it is
// Inconclusive here.
func Exact(ok bool, ours, how string, samples ...Sample) Judgement {
	for _, s := range samples {
		if len(s) == 0 {
			return Judgement{NotMeasured, ours, "no runs"}
		}
		if len(s) < 2 || !s.Constant() {
			return Judgement{Inconclusive, ours, fmt.Sprintf("%s; its inputs vary by run (%s) or ran once: an exact rule does not apply", how, s)}
		}
	}
	v := DoesNotHold
	if ok {
		v = Holds
	}
	return Judgement{v, ours, fmt.Sprintf("%s; exact: every input identical over %d runs (deterministic virtual time)", how, len(samples[0]))}
}
