package seed000

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/experiment"
)

// Strict is "seed000-strict-share": Test Series 3 (§5.6, Figs. 5.12-5.14).
type Strict struct {
	common
	Nodes    []int
	Services []string
	Rate     float64
	Step     int
}

// NewStrict returns the experiment with the seed's parameters.
func NewStrict() *Strict {
	c := defaults()
	return &Strict{common: c, Nodes: []int{2, 4, 6}, Services: []string{"counter", "string"}, Rate: 33, Step: 10}
}

func (s *Strict) Name() string { return "seed000-strict-share" }

func (s *Strict) Description() string {
	return "ESDS latency and degree of inconsistency vs the share of strict operations, 0-100% in steps of 10, " +
		"N = 2, 4, 6, Counter adds and String appends (seed 000, Test Series 3, §5.6, Figs. 5.12-5.14): 300 " +
		"operations per run. Inconsistency: responses whose value differs from the operation's value in the " +
		"eventual total order (Defs. 3, 4). Live, the String's final order is read back from the converged " +
		"string; the Counter's is not observable, so live Counter cells report latency only."
}

func (s *Strict) Flags(fs *pflag.FlagSet) {
	s.common.flags(fs, []int{2, 4, 6})
	fs.IntSliceVar(&s.Nodes, "nodes", s.Nodes, "replica counts N (sim; live uses --live-nodes)")
	fs.StringSliceVar(&s.Services, "services", s.Services, "counter, string")
	fs.Float64Var(&s.Rate, "rate", s.Rate, "submission rate, operations/s (the seed does not state it)")
	fs.IntVar(&s.Step, "step", s.Step, "strict share step, percent")
}

func (s *Strict) Cells(o experiment.Options) ([]experiment.Cell, error) {
	if err := s.check(o); err != nil {
		return nil, err
	}
	if s.Rate <= 0 || s.Step < 1 || s.Step > 100 {
		return nil, fmt.Errorf("--rate must be positive and --step within 1..100")
	}
	for _, v := range s.Services {
		if v != "counter" && v != "string" {
			return nil, fmt.Errorf("--services: %q (want counter or string)", v)
		}
	}
	step := s.Step
	if o.Quick && step == 10 {
		step = 50
	}
	var cells []experiment.Cell
	for _, m := range s.modes() {
		ns := s.Nodes
		if m == modeLive {
			ns = s.LiveNodes
		}
		if o.Quick {
			ns = []int{2}
		}
		for _, svc := range s.Services {
			for _, n := range ns {
				for p := 0; p <= 100; p += step {
					cells = append(cells, experiment.NewCell("mode", m, "service", svc, "N", strconv.Itoa(n), "strict", strconv.Itoa(p)))
				}
			}
		}
	}
	return cells, nil
}

func (s *Strict) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	n, _ := strconv.Atoi(c.Get("N"))
	p, _ := strconv.Atoi(c.Get("strict"))
	l := load{Service: c.Get("service"), N: n, Rate: s.Rate, Strict: float64(p) / 100, Gossip: true}
	var res result
	var err error
	if c.Get("mode") == modeSim {
		res, err = s.runSim(ctx, env, l, s.opsFor(env.Options), s.runsFor(env.Options))
	} else {
		res, err = s.runLive(ctx, env, l, s.opsFor(env.Options), c.Key)
	}
	return res.outcome(), err
}

func (s *Strict) Seed() experiment.SeedFigures { return experiment.SeedFigures{Source: seedSource} }

func (s *Strict) Report() experiment.ReportSpec {
	var plots []experiment.PlotSpec
	for _, svc := range s.Services {
		for _, mode := range s.modes() {
			plots = append(plots,
				experiment.PlotSpec{File: fmt.Sprintf("latency-%s-%s", svc, mode), Title: fmt.Sprintf("Figs. 5.12-5.14: mean latency, %s, %s", svc, mode),
					Kind: experiment.Lines, Metric: mATfe, YLabel: "ms", X: "strict", XLabel: "strict operations, %",
					Series: []string{"N"}, Filter: map[string]string{"service": svc, "mode": mode}},
				experiment.PlotSpec{File: fmt.Sprintf("inconsistency-%s-%s", svc, mode), Title: fmt.Sprintf("Figs. 5.12-5.14: inconsistent responses, %s, %s", svc, mode),
					Kind: experiment.Lines, Metric: mIncons, YLabel: "% of responses", X: "strict", XLabel: "strict operations, %",
					Series: []string{"N"}, Filter: map[string]string{"service": svc, "mode": mode}})
		}
	}
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mATfe, Header: "avg ms", Format: "%.1f"},
			{Metric: mStrict, Header: "strict ms", Format: "%.1f"},
			{Metric: mNonStrict, Header: "non-strict ms", Format: "%.1f"},
			{Metric: mIncons, Header: "Def. 4 incons %", Format: "%.1f"},
			{Metric: mInconsNS, Header: "of non-strict %", Format: "%.1f"},
		},
		Labels: []string{"durability"},
		Plots:  plots,
		Notes: append([]string{
			"Def. 4 incons % = the seed's degree of inconsistency: inconsistent responses (Def. 3) among all responses; \"of non-strict\" = among",
			"non-strict responses (strict ones are consistent by construction). Latency = submission to answer.",
		}, modelNotes...),
	}
}

// Summary checks §5.6's statements on each mode's figures.
func (s *Strict) Summary(ours, _ experiment.Figures) []string {
	out := []string{
		`Seed, §5.6 (Figs. 5.12-5.14, Counter adds): "the percentage of inconsistent responses goes down linearly as the percentage of strict operations climbs"; "linear increases of average latency with percentage of strict operations"; "The coefficient of the linear increase is higher for a larger number of replicas"; String appends: "We did not observe substantial differences".`,
	}
	var pcts []int
	for p := 0; p <= 100; p += s.Step {
		pcts = append(pcts, p)
	}
	for _, mode := range s.modes() {
		ns := s.Nodes
		if mode == modeLive {
			ns = s.LiveNodes
		}
		meanIncons := map[string]float64{}
		for _, svc := range s.Services {
			measured := 0
			var slopes []float64
			for _, n := range ns {
				key := func(p int) string { return fmt.Sprintf("mode=%s,service=%s,N=%d,strict=%d", mode, svc, n, p) }
				x, lat := seriesOf(ours, mATfe, pcts, key)
				if len(x) < 2 {
					continue
				}
				sl, r2 := fit(x, lat)
				slopes = append(slopes, sl)
				line := fmt.Sprintf("  %s %s N=%d: latency by strict %% %s — slope %.2f ms/%%, R² %.2f: rises linearly %s",
					mode, svc, n, fmtSeries(x, lat, "%.0f"), sl, r2, verdict(sl > 0 && r2 > 0.8))
				xi, inc := seriesOf(ours, mIncons, pcts, key)
				if len(xi) >= 2 {
					si, ri := fit(xi, inc)
					zero := xi[len(xi)-1] == 100 && inc[len(inc)-1] == 0
					var sum float64
					for _, v := range inc {
						sum += v
					}
					meanIncons[svc] += sum / float64(len(inc))
					measured++
					line += fmt.Sprintf("; inconsistency %% %s — slope %.2f, R² %.2f, 0 at 100%%: %v: falls linearly %s",
						fmtSeries(xi, inc, "%.1f"), si, ri, zero, verdict(si < 0 && ri > 0.7 && (xi[len(xi)-1] != 100 || zero)))
				} else {
					line += "; inconsistency not measured here"
				}
				out = append(out, line)
			}
			if measured > 0 {
				meanIncons[svc] /= float64(measured)
			} else {
				delete(meanIncons, svc)
			}
			if len(slopes) >= 2 {
				inc := true
				for i := 1; i < len(slopes); i++ {
					inc = inc && slopes[i] > 1.05*slopes[i-1]
				}
				out = append(out, fmt.Sprintf("  %s %s: latency slope grows with N (%v; each > 1.05x the previous): %s", mode, svc, fmtFloats(slopes), verdict(inc)))
			}
		}
		if c, ok1 := meanIncons["counter"]; ok1 {
			if st, ok2 := meanIncons["string"]; ok2 && st > 0 {
				out = append(out, fmt.Sprintf("  %s: mean inconsistency counter %.1f%% vs string %.1f%%: no substantial difference (within a factor 1.5): %s",
					mode, c, st, verdict(c/st < 1.5 && st/max(c, 1e-9) < 1.5)))
			}
		}
	}
	return out
}

func fmtFloats(v []float64) string {
	s := ""
	for i, x := range v {
		if i > 0 {
			s += ", "
		}
		s += strconv.FormatFloat(x, 'f', 2, 64)
	}
	return s
}
