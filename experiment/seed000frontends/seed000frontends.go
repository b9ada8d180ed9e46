// Package seed000frontends is the experiment "seed000-frontends" (issue 21
// item 1): ESDS front ends (protocol/esds, the ESDS thesis §4.2.4, Fig. 4.1) that
// send each operation to 1, 2 or all replicas, on the replicas' own nodes
// and on nodes without a replica (parameter replicas), and what happens
// when the replica a front end uses dies.
//
// Settings: 3 replicas; front ends on the replicas' nodes (colocated: each
// reaches its own replica without a hop) or on 2 front-end-only nodes
// (separate); the Counter service, non-strict adds submitted open loop at
// --rate, spread evenly over the front ends; gossip every 20 ms. The model
// (run.go) is a small deterministic discrete-event simulation driving the
// protocol's automata: 0.5-1.5 ms links, one processor per node with 300 us
// per peer message and 1 ms per client request. It is its own driver, not
// package sim, because it counts per replica and crashes a chosen replica
// at a chosen time.
//
// Metrics: mean and p99 latency; messages per operation (every message,
// gossip included, until the end of the drain); per replica, messages
// received and operations handled (receive_{f,r}("request"), duplicates
// included): the mean and the maximum over replicas. Crash cells kill n1
// at the middle of the run; front end n4's ring starts at n1 (its
// firstReplica): its operations submitted after the crash are counted, and
// their mean and maximum latency are reported (-1: some never answered).
package seed000frontends

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/experiment"
)

func init() { experiment.Register(New()) }

// Metric names.
const (
	mLat       = "latency_ms"
	mP99       = "p99_ms"
	mMsgs      = "msgs_per_op"
	mRecvMean  = "replica_msgs_mean"
	mRecvMax   = "replica_msgs_max"
	mOpsMean   = "replica_ops_mean"
	mOpsMax    = "replica_ops_max"
	mUnans     = "unanswered"
	mVictim    = "victim_ops"
	mVictimAns = "victim_answered"
	mVictimLat = "victim_latency_ms"
	mVictimMax = "victim_max_ms"
)

// Experiment is "seed000-frontends".
type Experiment struct {
	Ops   int
	Rate  float64
	First int64 // simulation seed
}

// New returns the experiment with its default settings.
func New() *Experiment { return &Experiment{Ops: 600, Rate: 200, First: 1} }

func (e *Experiment) Name() string { return "seed000-frontends" }

func (e *Experiment) Description() string {
	return "ESDS front ends (seed 000 §4.2.4): send=1, 2, all replicas per operation, front ends on replica nodes and on " +
		"front-end-only nodes: latency, replica load and messages per operation; and the replica a front end uses " +
		"dying mid-run (send=1, send=1 with resend, send=2, send=all): how long its front end's operations wait."
}

func (e *Experiment) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&e.Ops, "ops", e.Ops, "operations per run")
	fs.Float64Var(&e.Rate, "rate", e.Rate, "submission rate, operations/s (open loop)")
	fs.Int64Var(&e.First, "seed", e.First, "simulation seed")
}

func (e *Experiment) Cells(o experiment.Options) ([]experiment.Cell, error) {
	if e.Ops < 10 || e.Rate <= 0 {
		return nil, fmt.Errorf("--ops must be at least 10 and --rate positive")
	}
	var cells []experiment.Cell
	for _, fe := range []string{"colocated", "separate"} {
		for _, p := range []string{"1", "2", "all"} {
			cells = append(cells, experiment.NewCell("run", "steady", "fe", fe, "policy", p))
		}
	}
	for _, p := range []string{"1", "1+resend", "2", "all"} {
		cells = append(cells, experiment.NewCell("run", "crash", "fe", "separate", "policy", p))
	}
	return cells, nil
}

// resendAfter is the resend interval of the policy "1+resend".
const resendAfter = 60 * time.Millisecond

func (e *Experiment) setup(c experiment.Cell, quick bool, rep int) setup {
	s := setup{replicas: 3, send: c.Get("policy"), resend: "off", ops: e.Ops, rate: e.Rate, seed: e.First + int64(rep)}
	if quick {
		s.ops = min(s.ops, 120)
	}
	if c.Get("fe") == "separate" {
		s.feOnly = 2
	}
	if s.send == "1+resend" {
		s.send, s.resend = "1", resendAfter.String()
	}
	if c.Get("run") == "crash" {
		s.crashAt = time.Duration(float64(s.ops) / 2 / s.rate * float64(time.Second))
	}
	return s
}

func (e *Experiment) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	if err := ctx.Err(); err != nil {
		return experiment.Outcome{}, err
	}
	s := e.setup(c, env.Options.Quick, env.Rep)
	r, err := run(s)
	if err != nil {
		return experiment.Outcome{}, err
	}
	m := metrics(r, s.ops)
	env.Logf("%s: %.2f ms mean, %.1f msgs/op, %v unanswered", c.Key, m[mLat], m[mMsgs], m[mUnans])
	return experiment.Outcome{Metrics: m, Labels: map[string]string{"ops": strconv.Itoa(s.ops)}}, nil
}

func metrics(r *result, ops int) map[string]float64 {
	m := map[string]float64{mUnans: float64(r.unanswered), mMsgs: float64(r.msgs) / float64(ops)}
	if n := len(r.lats); n > 0 {
		var sum time.Duration
		for _, d := range r.lats {
			sum += d
		}
		m[mLat] = float64(sum) / float64(n) / 1e6
		m[mP99] = float64(r.lats[min(n-1, int(0.99*float64(n)))]) / 1e6
	}
	for i := range r.recv {
		m[mRecvMean] += float64(r.recv[i]) / float64(len(r.recv))
		m[mOpsMean] += float64(r.handled[i]) / float64(len(r.recv))
		m[mRecvMax] = max(m[mRecvMax], float64(r.recv[i]))
		m[mOpsMax] = max(m[mOpsMax], float64(r.handled[i]))
	}
	if r.victimOps > 0 {
		m[mVictim], m[mVictimAns] = float64(r.victimOps), float64(r.victimAnswered)
		m[mVictimMax] = -1 // never: some of its operations were not answered
		var sum time.Duration
		for _, d := range r.victimLats {
			sum += d
			if r.victimAnswered == r.victimOps {
				m[mVictimMax] = max(m[mVictimMax], float64(d)/1e6)
			}
		}
		if len(r.victimLats) > 0 {
			m[mVictimLat] = float64(sum) / float64(len(r.victimLats)) / 1e6
		}
	}
	return m
}

// seedText is the ESDS thesis §4.2.4, "Front End bookkeeping": the trade-off the
// seed discusses and leaves open.
const seedText = "Seed 000 §4.2.4: \"it may be sufficient for a front end to submit each operation only once\" under light load with fast replicas; " +
	"\"under heavier loads, or if some replicas are slow to respond, the frontend can benefit by submitting the operation to several replicas in hope of a faster response\"; " +
	"in a reliable network one submission per replica suffices, an unreliable one may need more. It measured none of this (its chapter-5 front end sent each operation to one replica)."

func (e *Experiment) Seed() experiment.SeedFigures {
	return experiment.SeedFigures{Source: "seed 000 (Cheiner 1997) §4.2.4: no figures; the submission policy is discussed and left open"}
}

func (e *Experiment) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mLat, Header: "mean ms", Format: "%.2f"},
			{Metric: mP99, Header: "p99 ms", Format: "%.2f"},
			{Metric: mMsgs, Header: "msgs/op", Format: "%.1f"},
			{Metric: mRecvMean, Header: "msgs/replica", Format: "%.0f"},
			{Metric: mRecvMax, Header: "max msgs/replica", Format: "%.0f"},
			{Metric: mOpsMean, Header: "ops/replica", Format: "%.0f"},
			{Metric: mOpsMax, Header: "max ops/replica", Format: "%.0f"},
			{Metric: mUnans, Header: "unanswered", Format: "%.0f"},
			{Metric: mVictimAns, Header: "n4 answered after crash", Format: "%.0f"},
			{Metric: mVictim, Header: "n4 ops after crash", Format: "%.0f"},
			{Metric: mVictimLat, Header: "n4 mean ms after crash", Format: "%.1f"},
			{Metric: mVictimMax, Header: "n4 max ms after crash (-1 never)", Format: "%.1f"},
		},
		Labels: []string{"ops"},
		Notes: []string{
			"model: 3 replicas, 0.5-1.5 ms links, 300 us per peer message and 1 ms per client request on each node's processor, 20 ms gossip, non-strict adds, open loop.",
			"fe=colocated: a front end on each replica's node (its own replica without a hop); fe=separate: 2 front-end-only nodes (parameter replicas=n1,n2,n3).",
			"crash: n1 dies at half time; n4's ring starts at n1; n4's operations submitted after the crash: answered, mean and max latency (-1: some never answered; clients here do not retry).",
			"1+resend: send=1, resend=60ms, maxsends=2.",
		},
	}
}

// Claims judges §4.2.4's discussion: sending to more replicas costs more
// messages, and a front end that sends to one replica waits on its crash.
func (e *Experiment) Claims(d experiment.Data) []experiment.Claim {
	var out []experiment.Claim
	k1, kAll := "run=steady,fe=separate,policy=1", "run=steady,fe=separate,policy=all"
	text := "§4.2.4: sending each operation to every replica costs more messages than sending it to one"
	if c, ok := d.NotRun(text, "discussed, no figure", k1, kAll); ok {
		out = append(out, c)
	} else {
		out = append(out, experiment.Claim{Text: text, Paper: "discussed, no figure",
			Judgement: experiment.RatioAbove("send=all / send=1 messages per op", d.Sample(kAll, mMsgs), d.Sample(k1, mMsgs), 1)})
	}
	c1, cAll := "run=crash,fe=separate,policy=1", "run=crash,fe=separate,policy=all"
	text = "§4.2.4: a front end sending to one replica depends on it: after that replica dies its operations wait longer than with send=all"
	if c, ok := d.NotRun(text, "discussed, no figure", c1, cAll); ok {
		out = append(out, c)
	} else {
		a, b := d.Sample(c1, mVictimMax), d.Sample(cAll, mVictimMax)
		if a.Mean() < 0 {
			// -1: some operation was never answered (no retry): the
			// longest possible wait.
			out = append(out, experiment.Claim{Text: text, Paper: "discussed, no figure",
				Judgement: experiment.Exact(a.Constant() && a[0] < 0, "send=1: some operation never answered", "the victim's operations after the crash", a)})
		} else {
			out = append(out, experiment.Claim{Text: text, Paper: "discussed, no figure",
				Judgement: experiment.RatioAbove("send=1 / send=all max wait", a, b, 1)})
		}
	}
	return out
}

// Summary puts the seed's discussion beside ours.
func (e *Experiment) Summary(ours, _ experiment.Figures) []string {
	out := []string{seedText, "Ours:"}
	for _, fe := range []string{"colocated", "separate"} {
		line := "  steady, fe=" + fe + ":"
		for _, p := range []string{"1", "2", "all"} {
			k := "run=steady,fe=" + fe + ",policy=" + p
			l, ok := ours.Get(k, mLat)
			if !ok {
				continue
			}
			ms, _ := ours.Get(k, mMsgs)
			om, _ := ours.Get(k, mOpsMax)
			line += fmt.Sprintf(" send=%s %.2f ms, %.1f msgs/op, max %.0f ops/replica;", p, l, ms, om)
		}
		out = append(out, line)
	}
	line := "  n1 dies, front end n4:"
	for _, p := range []string{"1", "1+resend", "2", "all"} {
		k := "run=crash,fe=separate,policy=" + p
		o, ok := ours.Get(k, mVictimMax)
		if !ok {
			continue
		}
		if o < 0 {
			line += fmt.Sprintf(" send=%s: never answered;", p)
		} else {
			l, _ := ours.Get(k, mVictimLat)
			line += fmt.Sprintf(" send=%s: answered, mean %.1f ms, max %.1f ms;", p, l, o)
		}
	}
	return append(out, line)
}
