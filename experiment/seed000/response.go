package seed000

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/experiment"
)

// Response is "seed000-response-vs-n": Test Series 2 (§5.5, Figs. 5.2-5.11).
type Response struct {
	common
	Nodes   []int
	Rates   []string
	Gossips []string
	// Sweep are the gossip intervals the simulated gossip-on cells run at:
	// the seed never states its rate, so each claim is judged at each and
	// its verdict names where it holds. Live cells gossip every --gossip.
	Sweep []string
}

// NewResponse returns the experiment with the seed's parameters.
func NewResponse() *Response {
	return &Response{common: defaults(), Nodes: nodesRange(1, 10), Rates: []string{"33", "33N", "330"}, Gossips: []string{"on", "off"},
		Sweep: []string{"20ms", "100ms", "1s"}}
}

func (r *Response) Name() string { return "seed000-response-vs-n" }

func (r *Response) Description() string {
	return "ESDS throughput, replica response time AT_r and front-end response time AT_fe vs N = 1..10 at " +
		"33, 33·N and 330 ops/s, gossip on and off (seed 000, Test Series 2, §5.5, Figs. 5.2-5.11): 300 non-strict " +
		"Counter adds per run. AT_r is measured in simulation only (a live node does not report it)."
}

func (r *Response) Flags(fs *pflag.FlagSet) {
	r.common.flags(fs, []int{1, 3, 5})
	fs.IntSliceVar(&r.Nodes, "nodes", r.Nodes, "sim: replica counts N")
	fs.StringSliceVar(&r.Rates, "rates", r.Rates, "submission rates: ops/s, or KN for K·N ops/s")
	fs.StringSliceVar(&r.Gossips, "gossip-modes", r.Gossips, "on, off, or both")
	fs.StringSliceVar(&r.Sweep, "gossip-sweep", r.Sweep, "sim: gossip intervals of the gossip-on cells (the seed does not state its rate; --quick: the first and the last)")
}

// rateOf parses "33", "33N" for N replicas.
func rateOf(s string, n int) (float64, error) {
	k, perN := s, false
	if len(s) > 1 && s[len(s)-1] == 'N' {
		k, perN = s[:len(s)-1], true
	}
	v, err := strconv.ParseFloat(k, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("rate %q: want a positive number of ops/s, or KN for K·N", s)
	}
	if perN {
		v *= float64(n)
	}
	return v, nil
}

func (r *Response) Cells(o experiment.Options) ([]experiment.Cell, error) {
	if err := r.check(o); err != nil {
		return nil, err
	}
	for _, s := range r.Rates {
		if _, err := rateOf(s, 1); err != nil {
			return nil, err
		}
	}
	for _, g := range r.Gossips {
		if g != "on" && g != "off" {
			return nil, fmt.Errorf("--gossip-modes: %q (want on or off)", g)
		}
	}
	var cells []experiment.Cell
	for _, m := range r.modes() {
		ns := r.Nodes
		if m == modeLive {
			ns = r.LiveNodes
		}
		if o.Quick {
			ns = []int{1, 2, 3}
		}
		// Gossip and N outermost: consecutive live cells share a cluster.
		for _, g := range r.gossipValues(m, o.Quick) {
			for _, n := range ns {
				for _, rate := range r.Rates {
					cells = append(cells, experiment.NewCell("mode", m, "gossip", g, "N", strconv.Itoa(n), "rate", rate))
				}
			}
		}
	}
	return cells, nil
}

// gossipValues are the cell's gossip parameter values in mode m: "off",
// and the intervals gossip is on at.
func (r *Response) gossipValues(m string, quick bool) []string {
	var out []string
	for _, g := range r.Gossips {
		switch {
		case g == "off":
			out = append(out, "off")
		case m == modeLive || len(r.Sweep) == 0:
			out = append(out, r.Gossip)
		case quick && len(r.Sweep) > 2:
			out = append(out, r.Sweep[0], r.Sweep[len(r.Sweep)-1])
		default:
			out = append(out, r.Sweep...)
		}
	}
	return out
}

func (r *Response) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	n, _ := strconv.Atoi(c.Get("N"))
	rate, _ := rateOf(c.Get("rate"), n)
	l := load{Service: "counter", N: n, Rate: rate, Gossip: c.Get("gossip") != "off", Every: c.Get("gossip")}
	if !l.Gossip {
		l.Every = ""
	}
	var res result
	var err error
	if c.Get("mode") == modeSim {
		res, err = r.runSim(ctx, env, l, r.opsFor(env.Options), r.runsFor(env.Options))
	} else {
		res, err = r.runLive(ctx, env, l, r.opsFor(env.Options), c.Key)
	}
	return res.outcome(), err
}

func (r *Response) Seed() experiment.SeedFigures { return experiment.SeedFigures{Source: seedSource} }

func (r *Response) Report() experiment.ReportSpec {
	var plots []experiment.PlotSpec
	for _, g := range r.plotGossips() {
		for _, m := range []struct{ metric, name, title string }{
			{mTput, "throughput", "throughput (Figs. 5.2-5.4)"},
			{mATr, "at-r", "replica response time AT_r (Figs. 5.5-5.7)"},
			{mATfe, "at-fe", "front-end response time AT_fe (Figs. 5.8-5.11)"},
		} {
			for _, mode := range r.modes() {
				if m.metric == mATr && mode == modeLive {
					continue
				}
				if g != "off" && g != r.Gossip && mode == modeLive {
					continue
				}
				plots = append(plots, experiment.PlotSpec{
					File: fmt.Sprintf("%s-%s-gossip-%s", m.name, mode, g), Title: fmt.Sprintf("%s, %s, gossip %s", m.title, mode, g),
					Kind: experiment.Lines, Metric: m.metric, YLabel: map[bool]string{true: "operations/s", false: "ms"}[m.metric == mTput],
					X: "N", XLabel: "replicas", Series: []string{"rate"}, Filter: map[string]string{"gossip": g, "mode": mode},
				})
			}
		}
	}
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mTput, Header: "ops/s", Format: "%.1f"},
			{Metric: mATr, Header: "AT_r ms", Format: "%.2f"},
			{Metric: mATfe, Header: "AT_fe ms", Format: "%.1f"},
			{Metric: mP99, Header: "p99 ms", Format: "%.1f"},
		},
		Labels: []string{"durability"},
		Plots:  plots,
		Notes: append([]string{
			"rate 33N = 33·N ops/s. AT_r: from a replica taking the request off its queue to its response (sim only);",
			"AT_fe: from submission to the answer at the client, queueing included. Throughput = completed/τ.",
		}, modelNotes...),
	}
}

// plotGossips are the gossip values plotted: off and every interval.
func (r *Response) plotGossips() []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []string{modeSim, modeLive} {
		for _, g := range r.gossipValues(m, false) {
			if !seen[g] {
				seen[g] = true
				out = append(out, g)
			}
		}
	}
	return out
}

// Summary compares each figure's shape with the seed's prose.
func (r *Response) Summary(ours, _ experiment.Figures) []string {
	var out []string
	for _, mode := range r.modes() {
		ns := r.Nodes
		if mode == modeLive {
			ns = r.LiveNodes
		}
		get := func(metric, gossip, rate string) ([]float64, []float64) {
			if gossip == "on" {
				gossip = r.Gossip
			}
			return seriesOf(ours, metric, ns, func(n int) string {
				return fmt.Sprintf("mode=%s,gossip=%s,N=%d,rate=%s", mode, gossip, n, rate)
			})
		}
		out = append(out, fmt.Sprintf("%s (gossip on = every %s):", mode, r.Gossip))
		for _, c := range claims {
			x, y := get(c.metric, c.gossip, c.rate)
			if len(x) < 2 {
				continue
			}
			var x2, y2 []float64
			if c.other != "" {
				x2, y2 = get(c.metric, c.otherGossip, c.other)
			}
			ok, how := c.test(x, y, x2, y2)
			out = append(out, fmt.Sprintf("  %s %s — ours (%s by N): %s; %s: %s", c.fig, c.quote, c.unit, fmtSeries(x, y, "%.1f"), how, verdict(ok)))
		}
	}
	return out
}

// claim is one figure's stated trend and its test on our series.
type claim struct {
	fig, quote         string
	metric, unit       string
	gossip, rate       string
	other, otherGossip string // a second series the test compares with
	test               func(x, y, x2, y2 []float64) (bool, string)
}

var claims = []claim{
	{fig: "Fig. 5.2", quote: `(33 ops/s) "close to its theoretical limit of 33 operations per second, and it actually declines slightly as the number of replicas is increased"`,
		metric: mTput, unit: "ops/s", gossip: "on", rate: "33", test: func(x, y, _, _ []float64) (bool, string) {
			lo, hi := y[0], y[0]
			for _, v := range y {
				lo, hi = min(lo, v), max(hi, v)
			}
			s, _ := fit(x, y)
			return lo > 0.85*33 && hi < 1.1*33 && s < 0, fmt.Sprintf("within 85-110%% of 33 and slope %.3f/replica (want < 0)", s)
		}},
	{fig: "Fig. 5.3", quote: `(33·N) "rises nearly linearly ... although it does not come close to reaching its theoretical limit"`,
		metric: mTput, unit: "ops/s", gossip: "on", rate: "33N", test: func(x, y, _, _ []float64) (bool, string) {
			s, r2 := fit(x, y)
			limit := 33 * x[len(x)-1]
			return s > 0 && r2 > 0.9 && y[len(y)-1] < 0.95*limit, fmt.Sprintf("slope %.1f, R² %.2f, last %.0f of limit %.0f", s, r2, y[len(y)-1], limit)
		}},
	{fig: "Fig. 5.4", quote: `(330 ops/s) "we expect an increase in throughput as more replicas join ... The empirical results ... confirm the expectation"`,
		metric: mTput, unit: "ops/s", gossip: "on", rate: "330", test: func(x, y, _, _ []float64) (bool, string) {
			return y[len(y)-1] > 1.5*y[0], fmt.Sprintf("N=%g/N=%g = %.1fx", x[len(x)-1], x[0], y[len(y)-1]/y[0])
		}},
	{fig: "Fig. 5.5", quote: `(33 ops/s) AT_r "small when only one replica is running ... The response time levels off at N = 4"`,
		metric: mATr, unit: "ms", gossip: "on", rate: "33", test: risesThenLevels},
	{fig: "Fig. 5.6", quote: `(33·N) AT_r: "the trend for this test was expected to remain the same as it was for the first test ... confirm that this is so"`,
		metric: mATr, unit: "ms", gossip: "on", rate: "33N", test: risesThenLevels},
	{fig: "Fig. 5.7", quote: `(33·N, gossip off) AT_r: "go up at first ... but then drop as the number of operations that individual replicas know about ... goes down"`,
		metric: mATr, unit: "ms", gossip: "off", rate: "33N", test: func(x, y, _, _ []float64) (bool, string) {
			p := argmax(y)
			return p > 0 && p < len(y)-1 && y[len(y)-1] < 0.8*y[p], fmt.Sprintf("peak at N=%g, last %.0f%% of peak", x[p], 100*y[len(y)-1]/y[p])
		}},
	{fig: "Fig. 5.8", quote: `(33 ops/s) AT_fe "should grow with the number of replicas ... The results ... confirm these expectations"`,
		metric: mATfe, unit: "ms", gossip: "on", rate: "33", test: func(x, y, _, _ []float64) (bool, string) {
			s, _ := fit(x, y)
			return s > 0 && y[len(y)-1] > 1.1*y[0], fmt.Sprintf("slope %.2f ms/replica, N=%g/N=%g = %.2fx", s, x[len(x)-1], x[0], y[len(y)-1]/y[0])
		}},
	{fig: "Fig. 5.9", quote: `(33·N) AT_fe: "even longer response times" than at 33 ops/s, "does not exhibit the expected steady upward trend"`,
		metric: mATfe, unit: "ms", gossip: "on", rate: "33N", other: "33", otherGossip: "on", test: func(x, y, _, y2 []float64) (bool, string) {
			longer := 0
			for i := range y {
				if i < len(y2) && y[i] >= y2[i] {
					longer++
				}
			}
			return longer >= len(y)*2/3, fmt.Sprintf("at or above the 33 ops/s series at %d of %d N", longer, len(y))
		}},
	{fig: "Fig. 5.10", quote: `(33·N, gossip off) "without gossip T_fe is much smaller than it was when gossip was enabled"`,
		metric: mATfe, unit: "ms", gossip: "off", rate: "33N", other: "33N", otherGossip: "on", test: func(x, y, _, y2 []float64) (bool, string) {
			var a, b float64
			for i := range y {
				if i < len(y2) {
					a += y[i]
					b += y2[i]
				}
			}
			return a < 0.7*b, fmt.Sprintf("mean over N %.1f ms vs %.1f ms with gossip", a/float64(len(y)), b/float64(len(y)))
		}},
	{fig: "Fig. 5.11", quote: `(330 ops/s) AT_fe "very high when the number of replicas is low, but it drops down as more replicas join"`,
		metric: mATfe, unit: "ms", gossip: "on", rate: "330", test: func(x, y, _, _ []float64) (bool, string) {
			return y[0] > 3*y[len(y)-1], fmt.Sprintf("N=%g/N=%g = %.1fx", x[0], x[len(x)-1], y[0]/y[len(y)-1])
		}},
}

// risesThenLevels: above N=1 from N=2 on, and the last value within 50% of
// the value at N=4 (or the middle N).
func risesThenLevels(x, y, _, _ []float64) (bool, string) {
	mid := len(y) / 2
	for i, v := range x {
		if v == 4 {
			mid = i
		}
	}
	rises := y[len(y)-1] > 1.2*y[0] && y[mid] > 1.1*y[0]
	levels := y[len(y)-1] < 1.5*y[mid]
	return rises && levels, fmt.Sprintf("N=%g is %.2fx N=%g; last is %.2fx N=%g", x[mid], y[mid]/y[0], x[0], y[len(y)-1]/y[mid], x[mid])
}
