package seed000

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/synod-dev/synod/experiment"
)

// series is one metric over N: every N's sample (each simulated seed, or
// each live run).
type series struct {
	x []float64
	y []experiment.Sample
}

func (s series) pooled() experiment.Sample {
	var all experiment.Sample
	for _, v := range s.y {
		all = append(all, v...)
	}
	return all
}

func (s series) at(n float64) experiment.Sample {
	for i, x := range s.x {
		if x == n {
			return s.y[i]
		}
	}
	return nil
}

func (s series) first() experiment.Sample { return s.y[0] }
func (s series) last() experiment.Sample  { return s.y[len(s.y)-1] }

// peak is the sample of the highest mean.
func (s series) peak() (float64, experiment.Sample) {
	best := 0
	for i := range s.y {
		if s.y[i].Mean() > s.y[best].Mean() {
			best = i
		}
	}
	return s.x[best], s.y[best]
}

// statClaim is one of Test Series 2's figures as a statistical test on our
// series (get(metric, gossip, rate) returns it; gossip is an interval or
// "off").
type statClaim struct {
	claim
	judge func(get func(metric, gossip, rate string) series, on string) experiment.Judgement
}

var statClaims = []statClaim{
	{claims[0], func(get func(string, string, string) series, on string) experiment.Judgement {
		s := get(mTput, on, "33")
		return experiment.AllOf(experiment.MeanAbove("throughput over every N", s.pooled(), 0.85*33),
			experiment.SlopeBelow("throughput per replica", s.x, s.y, 0))
	}},
	{claims[1], func(get func(string, string, string) series, on string) experiment.Judgement {
		s := get(mTput, on, "33N")
		limit := 33 * s.x[len(s.x)-1]
		return experiment.AllOf(experiment.SlopeAbove("throughput per replica", s.x, s.y, 0),
			experiment.MeanBelow(fmt.Sprintf("throughput at N=%g", s.x[len(s.x)-1]), s.last(), 0.95*limit))
	}},
	{claims[2], func(get func(string, string, string) series, on string) experiment.Judgement {
		s := get(mTput, on, "330")
		return experiment.RatioAbove(fmt.Sprintf("throughput N=%g / N=%g", s.x[len(s.x)-1], s.x[0]), s.last(), s.first(), 1)
	}},
	{claims[3], risesThenLevelsStat(mATr, "33")},
	{claims[4], risesThenLevelsStat(mATr, "33N")},
	{claims[5], func(get func(string, string, string) series, _ string) experiment.Judgement {
		s := get(mATr, "off", "33N")
		px, p := s.peak()
		return experiment.AllOf(experiment.RatioAbove(fmt.Sprintf("AT_r peak (N=%g) / N=%g", px, s.x[0]), p, s.first(), 1),
			experiment.RatioBelow(fmt.Sprintf("AT_r N=%g / peak", s.x[len(s.x)-1]), s.last(), p, 1))
	}},
	{claims[6], func(get func(string, string, string) series, on string) experiment.Judgement {
		s := get(mATfe, on, "33")
		return experiment.SlopeAbove("AT_fe per replica", s.x, s.y, 0)
	}},
	{claims[7], func(get func(string, string, string) series, on string) experiment.Judgement {
		return experiment.RatioAbove("AT_fe 33·N / 33 ops/s, pooled over N", get(mATfe, on, "33N").pooled(), get(mATfe, on, "33").pooled(), 1)
	}},
	{claims[8], func(get func(string, string, string) series, on string) experiment.Judgement {
		return experiment.RatioBelow("AT_fe gossip off / on, pooled over N", get(mATfe, "off", "33N").pooled(), get(mATfe, on, "33N").pooled(), 0.7)
	}},
	{claims[9], func(get func(string, string, string) series, on string) experiment.Judgement {
		s := get(mATfe, on, "330")
		return experiment.RatioAbove(fmt.Sprintf("AT_fe N=%g / N=%g", s.x[0], s.x[len(s.x)-1]), s.first(), s.last(), 3)
	}},
}

// risesThenLevelsStat: AT_r at N=4 (or the middle N) above N=1, and the last
// N within 1.5x of it.
func risesThenLevelsStat(metric, rate string) func(get func(string, string, string) series, on string) experiment.Judgement {
	return func(get func(string, string, string) series, on string) experiment.Judgement {
		s := get(metric, on, rate)
		mid := s.x[len(s.x)/2]
		if s.at(4) != nil {
			mid = 4
		}
		return experiment.AllOf(experiment.RatioAbove(fmt.Sprintf("AT_r N=%g / N=%g", mid, s.x[0]), s.at(mid), s.first(), 1.1),
			experiment.RatioBelow(fmt.Sprintf("AT_r N=%g / N=%g", s.x[len(s.x)-1], mid), s.last(), s.at(mid), 1.5))
	}
}

// Claims judges Test Series 2's ten figures per mode. Claims about gossip-on
// runs are judged at every swept interval (simulation) and the verdict
// names where each holds; live cells gossip every --gossip.
func (r *Response) Claims(d experiment.Data) []experiment.Claim {
	var out []experiment.Claim
	for _, mode := range r.modes() {
		get := func(metric, gossip, rate string) series {
			var s series
			for n := 1; n <= 20; n++ {
				key := experiment.NewCell("mode", mode, "gossip", gossip, "N", strconv.Itoa(n), "rate", rate).Key
				if v := d.Sample(key, metric); v != nil {
					s.x = append(s.x, float64(n))
					s.y = append(s.y, v)
				}
			}
			return s
		}
		var intervals []string
		for _, g := range r.gossipValues(mode, d.Quick) {
			if g != "off" {
				intervals = append(intervals, g)
			}
		}
		for _, c := range statClaims {
			text := fmt.Sprintf("%s (%s) %s", c.fig, mode, c.quote)
			if mode == modeLive && c.metric == mATr {
				continue // a live node does not report AT_r
			}
			var pts []experiment.SweepPoint
			for _, on := range intervals {
				ok := len(get(c.metric, on, c.rate).x) >= 2 && len(get(c.metric, "off", "33N").x) >= 2
				if !ok {
					continue
				}
				if c.gossip == "off" && len(pts) > 0 {
					break // a gossip-off claim does not depend on the interval
				}
				pts = append(pts, experiment.SweepPoint{Value: on, Judgement: c.judge(get, on)})
			}
			if len(pts) == 0 {
				out = append(out, experiment.Claim{Text: text, Paper: "trend (the plots did not survive in the text)",
					Judgement: experiment.Judgement{Verdict: experiment.NotMeasured, Ours: "-", Stats: "fewer than two N ran"}, Cause: "no series"})
				continue
			}
			cl := experiment.Claim{Text: text, Paper: "trend (the plots did not survive in the text)"}
			if c.gossip == "off" {
				cl.Judgement = pts[0].Judgement
			} else {
				cl.Judgement, cl.Range = experiment.Sweep("gossip", pts)
			}
			if cl.Verdict != experiment.Holds {
				cl.Cause = r.cause(c.claim, mode)
				if b := measuredBreakdown(get, c.claim, intervals); b != "" {
					cl.Cause = b + ". " + cl.Cause
				}
			}
			out = append(out, cl)
		}
	}
	return out
}

// measuredBreakdown is where a front end's response time goes at the
// smallest and the largest N of the claim's series, per gossip setting it
// was judged at: AT_fe (submission to answer) = AT_r (the replica's own
// step: from taking the request off its processor's queue to the answer)
// + the rest (waiting in the processor's queue behind other requests and
// gossip, and the two network hops), with the throughput beside it.
func measuredBreakdown(get func(metric, gossip, rate string) series, c claim, intervals []string) string {
	gossips := intervals
	if c.gossip == "off" {
		gossips = append([]string{"off"}, intervals...) // judged against gossip on
	}
	var parts []string
	for _, g := range gossips {
		fe, tr, tp := get(mATfe, g, c.rate), get(mATr, g, c.rate), get(mTput, g, c.rate)
		if len(fe.x) < 2 {
			continue
		}
		var pts []string
		for _, n := range []float64{fe.x[0], fe.x[len(fe.x)-1]} {
			f, r, t := fe.at(n), tr.at(n), tp.at(n)
			if f == nil {
				continue
			}
			p := fmt.Sprintf("N=%g: AT_fe %.1f ms", n, f.Mean())
			if r != nil {
				p += fmt.Sprintf(" = AT_r %.1f ms (replica step) + %.1f ms (queueing and network)", r.Mean(), f.Mean()-r.Mean())
			}
			if t != nil {
				p += fmt.Sprintf(", %.1f ops/s", t.Mean())
			}
			pts = append(pts, p)
		}
		parts = append(parts, fmt.Sprintf("gossip %s, %s ops/s: %s", g, c.rate, strings.Join(pts, " → ")))
	}
	if len(parts) == 0 {
		return ""
	}
	return "measured (means over the runs): " + strings.Join(parts, "; ")
}

// cause says what sets the figure in our setting, from the cost model.
func (r *Response) cause(c claim, mode string) string {
	if mode == modeLive {
		return "live replicas take microseconds per operation (no artificial cost), so at these rates no replica queues and N changes little; the seed's replicas took ~30 ms per request"
	}
	switch c.metric {
	case mTput:
		return fmt.Sprintf("throughput = completed/τ with a replica busy %s per request and %s per gossip message received: at 33 ops/s no replica saturates, so N only adds gossip work", r.OpCost, r.MsgCost)
	case mATr:
		return fmt.Sprintf("AT_r counts a replica's queueing behind its own requests and the gossip it receives (%s per message, %s per re-Apply): with frequent gossip the gossip load grows with N and dominates; with rare gossip few operations are pending", r.MsgCost, r.ApplyCost)
	}
	return fmt.Sprintf("AT_fe is submission to answer; with one request per ~%s per replica the queue at each replica sets it, and gossip adds CPU per message (%s) at every interval", r.OpCost, r.MsgCost)
}

// CellReps: a simulated cell runs once (its seeds are its sample: --runs,
// the seed's 10), a live cell experiment.DefaultReps times.
func (c *common) CellReps(cell experiment.Cell, _ experiment.Options) int {
	if cell.Get("mode") == modeSim {
		return 1
	}
	return experiment.DefaultReps
}

// seriesOver is metric over the values xs of the cells key(x) gives.
func seriesOver(d experiment.Data, metric string, xs []int, key func(int) string) series {
	var s series
	for _, x := range xs {
		if v := d.Sample(key(x), metric); v != nil {
			s.x = append(s.x, float64(x))
			s.y = append(s.y, v)
		}
	}
	return s
}

// Claims judges Fig. 5.1: throughput rises with N (and, in simulation
// with fewer processors than replicas, drops past them).
func (t *Throughput) Claims(d experiment.Data) []experiment.Claim {
	var out []experiment.Claim
	for _, m := range t.modes() {
		s := seriesOver(d, mTput, nodesRange(1, 20), func(n int) string { return experiment.NewCell("mode", m, "N", strconv.Itoa(n)).Key })
		text := fmt.Sprintf("Fig. 5.1 (%s): \"the system's throughput rises as the number of replicas ... increases\" (330 ops/s; peak above N=1)", m)
		paper := "rises, then drops at N = 10 (out of processors)"
		if len(s.x) < 2 {
			out = append(out, experiment.Claim{Text: text, Paper: paper, Judgement: experiment.Judgement{Verdict: experiment.NotMeasured, Ours: "-", Stats: "fewer than two N ran"}, Cause: "no series"})
			continue
		}
		px, p := s.peak()
		cl := experiment.Claim{Text: text, Paper: paper, Judgement: experiment.RatioAbove(fmt.Sprintf("throughput at the peak N=%g / N=%g", px, s.x[0]), p, s.first(), 1.2)}
		if cl.Verdict != experiment.Holds {
			if m == modeLive {
				cl.Cause = "live replicas have no artificial cost: each handles 330 ops/s alone, so throughput is the submission rate at every N"
			} else {
				cl.Cause = fmt.Sprintf("sim: a replica takes %s per request; %d processors shared by the replicas", t.OpCost, t.effCPUs)
			}
		}
		out = append(out, cl)
		if m == modeSim && t.effCPUs > 0 && s.x[len(s.x)-1] > float64(t.effCPUs) {
			out = append(out, experiment.Claim{Text: fmt.Sprintf("Fig. 5.1 (sim): \"the throughput drops off again at the point where the system runs out of physical processes\" (%d processors)", t.effCPUs),
				Paper: "drops at N = 10", Judgement: experiment.RatioBelow(fmt.Sprintf("throughput N=%g / peak N=%g", s.x[len(s.x)-1], px), s.last(), p, 0.95)})
		}
	}
	return out
}

// slopeGreater judges "the slope of b is greater than a's" by the
// conservative rule of non-overlapping 95% intervals of the two slopes.
func slopeGreater(what string, a, b series) experiment.Judgement {
	ia := experiment.SlopeCI(a.x, a.y, experiment.Confidence)
	ib := experiment.SlopeCI(b.x, b.y, experiment.Confidence)
	v := experiment.Inconclusive
	switch {
	case ib.Lo > ia.Hi:
		v = experiment.Holds
	case ib.Hi < ia.Lo:
		v = experiment.DoesNotHold
	}
	return experiment.Judgement{Verdict: v, Ours: fmt.Sprintf("%s %s vs %s", what, fmtF(ib.Est), fmtF(ia.Est)),
		Stats: fmt.Sprintf("least-squares slopes with 95%% t CI: %s vs %s; decided only by non-overlapping intervals", ib, ia)}
}

func fmtF(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) }

// Claims judges §5.6 (Figs. 5.12-5.14) per mode and service.
func (s *Strict) Claims(d experiment.Data) []experiment.Claim {
	var pcts []int
	for p := 0; p <= 100; p++ {
		pcts = append(pcts, p)
	}
	var out []experiment.Claim
	for _, mode := range s.modes() {
		ns := s.Nodes
		if mode == modeLive {
			ns = s.LiveNodes
		}
		for _, svc := range s.Services {
			var lat []series
			var latN []int
			for _, n := range ns {
				key := func(p int) string {
					return experiment.NewCell("mode", mode, "service", svc, "N", strconv.Itoa(n), "strict", strconv.Itoa(p)).Key
				}
				l := seriesOver(d, mATfe, pcts, key)
				if len(l.x) < 2 {
					continue
				}
				lat, latN = append(lat, l), append(latN, n)
				out = append(out, experiment.Claim{Text: fmt.Sprintf("§5.6 (%s, %s, N=%d): \"linear increases of average latency with percentage of strict operations\"", mode, svc, n),
					Paper: "rises linearly", Judgement: experiment.SlopeAbove("latency ms per strict %", l.x, l.y, 0)})
				inc := seriesOver(d, mIncons, pcts, key)
				if len(inc.x) >= 2 {
					out = append(out, experiment.Claim{Text: fmt.Sprintf("§5.6 (%s, %s, N=%d): \"the percentage of inconsistent responses goes down linearly as the percentage of strict operations climbs\"", mode, svc, n),
						Paper: "falls linearly", Judgement: experiment.SlopeBelow("inconsistency % per strict %", inc.x, inc.y, 0)})
				}
			}
			if len(lat) >= 2 {
				// Every step of N, not only the first against the last, so
				// that a plateau between two larger N shows.
				var steps []experiment.Judgement
				var ns []string
				for i := 0; i+1 < len(lat); i++ {
					j := slopeGreater(fmt.Sprintf("latency slope N=%d vs N=%d", latN[i+1], latN[i]), lat[i], lat[i+1])
					steps = append(steps, j)
				}
				for _, n := range latN {
					ns = append(ns, strconv.Itoa(n))
				}
				cl := experiment.Claim{Text: fmt.Sprintf("§5.6 (%s, %s): \"the coefficient of the linear increase is higher for a larger number of replicas\" (each step of N = %s)", mode, svc, strings.Join(ns, ", ")),
					Paper: "higher slope for larger N", Judgement: experiment.AllOf(steps...)}
				if cl.Verdict != experiment.Holds {
					var per []string
					for i, l := range lat {
						per = append(per, fmt.Sprintf("N=%d %s", latN[i], experiment.SlopeCI(l.x, l.y, experiment.Confidence)))
					}
					cl.Cause = fmt.Sprintf("measured latency slopes (ms per strict %%): %s; a strict operation waits for every replica's gossip to make it stable; with gossip every %s the wait is bounded by the gossip round, so the slope stops growing once the round, not N, sets it", strings.Join(per, ", "), s.Gossip)
				}
				out = append(out, cl)
			}
		}
	}
	return out
}
