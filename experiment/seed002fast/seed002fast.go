// Package seed002fast is the experiment "seed002-fast-vs-classic-model": seed
// 002 chapter V.B's probabilistic model of Classic vs Fast Paxos, computed by
// package model/fastpaxos (whose doc says how the seed's R(·) terms are
// computed, the numerical method and error bounds, and the seed's typos), with
// each of the seed's claims set beside our figure and a verdict. Model only:
// the simulator and live measurements of the same settings are separate work.
package seed002fast

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/model/fastpaxos"
	"github.com/synod-dev/synod/model/fastpaxos/plots"
	"github.com/synod-dev/synod/model/fastpaxos/traces"
)

func init() { experiment.Register(New()) }

// Model is the experiment.
type Model struct {
	// Points of each CDF grid and panels of the collision integral (0: the
	// defaults, smaller under --quick).
	Points, Panels int
}

// New returns the experiment with its defaults.
func New() *Model { return &Model{} }

// The seed's parameters (chapter V.B.1).
const (
	bW     = fastpaxos.SeedWANScale // ms, client (WAN) links
	alphaL = fastpaxos.SeedLANAlpha
	bL     = fastpaxos.SeedLANScale // ms, server (LAN) links
	// The collision figure's client links: α_w = 1.2, b = 100 ms (Fig V.5;
	// its caption's "b_l = 100" is a typo).
	collAlpha = 1.2
)

var (
	alphas  = []string{"1.2", "1.8"}
	tValues = []string{"1", "3"}
	clients = []string{"2", "4", "6", "8"}
)

// Metric names.
const (
	mCross     = "x_star_ms"
	mClassicAt = "classic_at_x_star"
	mFastAt    = "fast_at_x_star"
	mMedC      = "median_classic_ms"
	mMedF      = "median_fast_ms"
	mP10F      = "p10_fast_ms"
	mP90F      = "p90_fast_ms"
	mP99F      = "p99_fast_ms"
	mLeadC     = "max_classic_lead"
	mLeadF     = "max_fast_lead"
	mErr       = "bracket_err"
	mColl0     = "collision_delta0"
	mColl50    = "collision_delta50"
	mCrossD    = "t3_below_t1_from_ms"
	mCollT1At  = "collision_t1_at_200"
	mCollT3At  = "collision_t3_at_200"
)

func (m *Model) Name() string { return "seed002-fast-vs-classic-model" }

func (m *Model) Description() string {
	return "Seed 002 chapter V.B's probabilistic model of Classic vs Fast Paxos (model only): time-to-learn " +
		"distributions P{L_c ≤ x}, P{L_f ≤ x} for Pareto client links (α_w 1.2 and 1.8, b_w 100 ms) and server " +
		"links (α_l 2, b_l 3 ms), t = 1 and 3, the all-LAN Pareto case and our loopback trace (the seed's NWS traces " +
		"are not available); collision probability against the offset δ between two clients and against 2-8 " +
		"clients. Each seed claim beside ours, with a verdict; a plot of every CDF."
}

func (m *Model) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&m.Points, "points", 0, "grid points per CDF (default 32768; 4096 with --quick)")
	fs.IntVar(&m.Panels, "panels", 0, "panels of the collision integral, error ≤ 1/panels (default 32768; 2048 with --quick)")
}

func (m *Model) sizes(o experiment.Options) (points, panels int) {
	points, panels = 1<<15, fastpaxos.DefaultPanels
	if o.Quick {
		points, panels = 1<<12, 1<<11
	}
	if m.Points > 0 {
		points = m.Points
	}
	if m.Panels > 0 {
		panels = m.Panels
	}
	return
}

func (m *Model) Cells(o experiment.Options) ([]experiment.Cell, error) {
	if m.Points < 0 || (m.Points > 0 && m.Points < 64) || m.Panels < 0 {
		return nil, fmt.Errorf("--points %d / --panels %d: want at least 64 points and positive panels", m.Points, m.Panels)
	}
	var cells []experiment.Cell
	for _, a := range alphas {
		for _, t := range tValues {
			cells = append(cells, experiment.NewCell("case", "pareto-wan", "alpha_w", a, "t", t))
		}
	}
	for _, t := range tValues {
		cells = append(cells, experiment.NewCell("case", "pareto-lan", "t", t))
	}
	cells = append(cells, experiment.NewCell("case", "collision-delta"))
	for _, t := range tValues {
		for _, c := range clients {
			cells = append(cells, experiment.NewCell("case", "collision-clients", "t", t, "clients", c))
		}
	}
	for _, t := range tValues {
		cells = append(cells, experiment.NewCell("case", "trace-loopback", "t", t))
	}
	cells = append(cells, experiment.NewCell("case", "trace-wan"))
	return cells, nil
}

func (m *Model) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	points, panels := m.sizes(env.Options)
	t, _ := strconv.Atoi(c.Get("t"))
	lan := fastpaxos.Pareto{Alpha: alphaL, B: bL}
	switch c.Get("case") {
	case "pareto-wan":
		a, _ := strconv.ParseFloat(c.Get("alpha_w"), 64)
		s := fastpaxos.Setting{WAN: fastpaxos.Pareto{Alpha: a, B: bW}, LAN: lan, T: t}
		return learnCell(env, s, 25*bW, points, "cdf-pareto-wan-a"+c.Get("alpha_w")+"-t"+c.Get("t"),
			fmt.Sprintf("client links Pareto(%s, %g ms), server links Pareto(%g, %g ms), t = %d", c.Get("alpha_w"), bW, alphaL, bL, t))
	case "pareto-lan":
		s := fastpaxos.Setting{WAN: lan, LAN: lan, T: t}
		return learnCell(env, s, 25*bL, points, "cdf-pareto-lan-t"+c.Get("t"),
			fmt.Sprintf("all links Pareto(%g, %g ms), t = %d", alphaL, bL, t))
	case "trace-loopback":
		l, err := traces.Load("loopback-nws.txt")
		if err != nil {
			return experiment.Outcome{}, err
		}
		s := fastpaxos.Setting{WAN: l, LAN: l, T: t}
		return learnCell(env, s, 2*(3*l.Quantile(0.999)), points, "cdf-trace-loopback-t"+c.Get("t"),
			fmt.Sprintf("all links: our loopback NWS-probe trace (%d samples), t = %d", l.Len(), t))
	case "trace-wan":
		if _, err := traces.Load("wan-netem.txt"); err != nil {
			return experiment.Outcome{}, experiment.Unavailable("no WAN trace: the seed's NWS/GrADS traces are not available, and ours " +
				"could not be recorded here (the kernel has no sch_netem; see model/fastpaxos/traces/README.md)")
		}
		return experiment.Outcome{}, errors.New("a WAN trace is shipped but this experiment does not use it yet")
	case "collision-delta":
		return collisionDelta(env, panels)
	case "collision-clients":
		n, _ := strconv.Atoi(c.Get("clients"))
		w := fastpaxos.Pareto{Alpha: collAlpha, B: bW}
		p0, err := fastpaxos.Collision(w, t, fastpaxos.Staggered(n, 0), panels)
		if err != nil {
			return experiment.Outcome{}, err
		}
		p50, err := fastpaxos.Collision(w, t, fastpaxos.Staggered(n, 50), panels)
		if err != nil {
			return experiment.Outcome{}, err
		}
		return experiment.Outcome{Metrics: map[string]float64{mColl0: p0.Mid(), mColl50: p50.Mid(), mErr: max(p0.Err(), p50.Err())}}, nil
	}
	return experiment.Outcome{}, fmt.Errorf("unknown case %q", c.Get("case"))
}

func quantile(b fastpaxos.Bracket, g fastpaxos.Grid, u float64) float64 {
	x, _, _ := b.Quantile(g, u)
	return x // +Inf beyond the grid: dropped from the table ("-")
}

func learnCell(env *experiment.Env, s fastpaxos.Setting, xmax float64, points int, file, title string) (experiment.Outcome, error) {
	g, err := fastpaxos.NewGrid(xmax, points)
	if err != nil {
		return experiment.Outcome{}, err
	}
	cur, err := fastpaxos.TimeToLearn(s, g)
	if err != nil {
		return experiment.Outcome{}, err
	}
	cmp := fastpaxos.Compare(cur)
	met := map[string]float64{
		mMedC: quantile(cur.Classic, g, 0.5), mMedF: quantile(cur.Fast, g, 0.5),
		mP10F: quantile(cur.Fast, g, 0.1), mP90F: quantile(cur.Fast, g, 0.9), mP99F: quantile(cur.Fast, g, 0.99),
		mLeadC: cmp.MaxClassicLead, mLeadF: cmp.MaxFastLead,
		mErr: max(cur.Classic.MaxErr(), cur.Fast.MaxErr()),
	}
	if cmp.TwoRegions {
		met[mCross], met[mClassicAt], met[mFastAt] = cmp.Crossover, cmp.ClassicAt, cmp.FastAt
	}
	// The Fast curve at a "small time value", 1.5 times the client links'
	// minimum, for the t = 3 steepness claim.
	met["fast_at_small"] = cur.Fast.At(g, 1.5*quantileDist(s.WAN, 0))
	files, err := plots.CDF(env.Out, file, title, cur)
	if err != nil {
		return experiment.Outcome{}, err
	}
	shape := "crossing"
	switch {
	case cmp.TwoRegions:
	case cmp.FastAhead && !cmp.ClassicAhead:
		shape = "Fast ≥ Classic"
	case cmp.ClassicAhead && !cmp.FastAhead:
		shape = "Classic ≥ Fast"
	default:
		shape = "several crossings"
	}
	return experiment.Outcome{Metrics: met, Labels: map[string]string{"curves": shape}, Detail: map[string]any{"plots": files, "grid_step_ms": g.H}}, nil
}

func quantileDist(d fastpaxos.Dist, u float64) float64 { return d.Quantile(u) }

// collisionDelta computes the two-client curves against δ for t = 1 and 3
// (Fig V.5), draws them, and reports where t = 3 falls below t = 1.
func collisionDelta(env *experiment.Env, panels int) (experiment.Outcome, error) {
	w := fastpaxos.Pareto{Alpha: collAlpha, B: bW}
	step := 5.0
	if env.Quick {
		step = 25
	}
	var ds []float64
	for d := 0.0; d <= 600+1e-9; d += step {
		ds = append(ds, d)
	}
	var curves [2][]fastpaxos.CollisionPoint
	var lines []plots.Line
	for i, t := range []int{1, 3} {
		pts, err := fastpaxos.CollisionCurve(w, t, 2, ds, panels)
		if err != nil {
			return experiment.Outcome{}, err
		}
		curves[i] = pts
		var ys []float64
		for _, p := range pts {
			ys = append(ys, p.P.Mid())
		}
		lines = append(lines, plots.Line{Name: fmt.Sprintf("t = %d", t), X: ds, Y: ys})
	}
	files, err := plots.Draw(env.Out, "collision-delta", "Collision probability, two clients δ apart, client links Pareto(1.2, 100 ms)",
		"δ (ms)", "P{collision}", lines)
	if err != nil {
		return experiment.Outcome{}, err
	}
	// From where on (on the δ grid) t = 3 stays below t = 1.
	from := math.NaN()
	for i := len(ds) - 1; i >= 0; i-- {
		if curves[1][i].P.Hi >= curves[0][i].P.Lo {
			if i+1 < len(ds) {
				from = ds[i+1]
			}
			break
		}
	}
	at := func(k int, d float64) float64 {
		for _, p := range curves[k] {
			if p.Delta == d {
				return p.P.Mid()
			}
		}
		return math.NaN()
	}
	errMax := 0.0
	for _, c := range curves {
		for _, p := range c {
			errMax = max(errMax, p.P.Err())
		}
	}
	return experiment.Outcome{Metrics: map[string]float64{
		"collision_t1_delta0": at(0, 0), "collision_t3_delta0": at(1, 0),
		mCrossD: from, mCollT1At: at(0, 200), mCollT3At: at(1, 200), mErr: errMax,
	}, Detail: map[string]any{"plots": files, "deltas_ms": ds}}, nil
}

func (m *Model) Seed() experiment.SeedFigures {
	v := experiment.Figures{}
	for _, a := range alphas {
		k := experiment.NewCell("case", "pareto-wan", "alpha_w", a, "t", "1").Key
		v.Set(k, mCross, 300)
	}
	v.Set(experiment.NewCell("case", "collision-clients", "t", "1", "clients", "2").Key, mColl0, 0.38)
	v.Set(experiment.NewCell("case", "collision-clients", "t", "3", "clients", "2").Key, mColl0, 0.65)
	v.Set(experiment.NewCell("case", "collision-delta").Key, "collision_t1_delta0", 0.38)
	v.Set(experiment.NewCell("case", "collision-delta").Key, "collision_t3_delta0", 0.65)
	notes := map[string]string{}
	for _, a := range alphas {
		notes[experiment.NewCell("case", "pareto-wan", "alpha_w", a, "t", "1").Key] = "two regions, division \"around 300ms\", both CDFs \"over 0.7\" there; median \"closer to 200ms\" (Fig V.3)"
		notes[experiment.NewCell("case", "pareto-wan", "alpha_w", a, "t", "3").Key] = "Fast curve steeper than at t = 1: shorter tail, lower probabilities at small x (Fig V.4)"
	}
	for _, t := range tValues {
		notes[experiment.NewCell("case", "pareto-lan", "t", t).Key] = "Fast \"clearly performs better\" (Fig V.6; the text's inequality is reversed)"
		notes[experiment.NewCell("case", "trace-loopback", "t", t).Key] = "NWS LAN traces: moderately skewed, Fast better (Fig V.9(a)); highly skewed, Classic better up to 14 ms (V.9(b))"
	}
	notes[experiment.NewCell("case", "collision-delta").Key] = "higher for small δ with larger t, but falls faster with δ (Fig V.5)"
	notes[experiment.NewCell("case", "trace-wan").Key] = "NWS WAN traces, sets 1 and 2 (Figs V.7, V.8, V.10)"
	return experiment.SeedFigures{
		Source: "seed 002, chapter V.B (Figs V.3-V.6 Pareto, V.7-V.10 NWS traces); numbers from the text, the figures are not in the extracted text",
		Values: v, Notes: notes,
	}
}

func (m *Model) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mCross, Header: "x* ms", Format: "%.0f"},
			{Metric: mClassicAt, Header: "Pc(x*)", Format: "%.3f"},
			{Metric: mMedC, Header: "med Lc", Format: "%.4g"},
			{Metric: mMedF, Header: "med Lf", Format: "%.4g"},
			{Metric: mP99F, Header: "p99 Lf", Format: "%.4g"},
			{Metric: mLeadC, Header: "max Pc-Pf", Format: "%.3f"},
			{Metric: mLeadF, Header: "max Pf-Pc", Format: "%.3f"},
			{Metric: mColl0, Header: "P coll δ=0", Format: "%.4f"},
			{Metric: mColl50, Header: "δ=50", Format: "%.4f"},
			{Metric: mErr, Header: "±", Format: "%.0e"},
		},
		Labels: []string{"curves"},
		Plots: []experiment.PlotSpec{{
			File: "collision-clients", Title: "Collision probability against the number of clients (Pareto(1.2, 100 ms) client links)",
			Kind: experiment.Lines, Metric: mColl0, YLabel: "P{collision}, simultaneous requests", X: "clients", XLabel: "clients",
			Series: []string{"t"}, Filter: map[string]string{"case": "collision-clients"},
		}, {
			File: "collision-clients-delta50", Title: "Collision probability against the number of clients, 50 ms apart",
			Kind: experiment.Lines, Metric: mColl50, YLabel: "P{collision}", X: "clients", XLabel: "clients",
			Series: []string{"t"}, Filter: map[string]string{"case": "collision-clients"},
		}},
		Notes: []string{
			"x* = the crossover (Classic ahead below it, Fast above); Pc(x*) = P{L_c ≤ x*} = P{L_f ≤ x*}; med/p99 in ms (\"-\": beyond the grid);",
			"max Pc-Pf, max Pf-Pc = the largest lead of each curve; ± = the numerical bracket's half-width (see model/fastpaxos doc).",
			"Collision cells: clients δ apart (0, δ, 2δ, ...), client links Pareto(1.2, 100 ms). Trace cells use our loopback NWS-style",
			"probe trace (model/fastpaxos/traces); the seed's NWS traces are not available. CDF plots: cdf-*.png/svg in the output directory.",
		},
	}
}
