package seed002fastsim

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/protocol/fastpaxos"
	"github.com/synod-dev/synod/protocol/paxos"
	"github.com/synod-dev/synod/sim"
)

// run is one simulated run of a protocol under a setting, one client at a
// time, and the client round trips it measured (ms) of the operations that
// count (see measure).
type run struct {
	rtts   []float64
	learns []float64 // time to learn: paxos at the leader, fastpaxos at one learner (see measure)
	// fallbacks: operations whose learner caught up (no quorum event), so
	// the next learner's time was taken.
	fallbacks int
	ops       int // operations completed
	leader    string
}

// simConfig is the simulator configuration of one run: n nodes, the seed's
// latencies, one closed-loop client writing (writes go through the log in
// both protocols), a think time far above a round trip so that requests do
// not overlap, no faults, no fsync cost (the model has none), timeouts far
// above the Pareto cap so that nothing is retried.
func simConfig(protocol string, n int, s setting, ops int, seed int64, tr *traceScan, observe string) sim.Config {
	params := map[string]string{"heartbeat": "500ms", "election_timeout": "2s", "op_timeout": "1000s"}
	if observe != "" {
		params["observe"] = observe
	}
	return sim.Config{
		Protocol: protocol, Nodes: n, Clients: 1, Ops: ops + warmOps, Seed: seed,
		Latency: s.lan, ClientLatency: s.wan,
		Fsync: "constant:0s", Think: "constant:" + think.String(), Mix: "set:1",
		RequestTimeout: 1000 * time.Second, MaxAttempts: 1,
		MaxTime: time.Duration(ops+warmOps+1) * (think + 1000*time.Second), DrainTime: 1000 * time.Second,
		Params: params, NoCheck: true, Trace: tr,
	}
}

const (
	// think separates one client's requests: P{W > 3 s} = 30^-1.2 ≈ 1.7 % for
	// a single Pareto(1.2, 100 ms) link, so a straggling copy of a fanned-out
	// request rarely reaches an acceptor after the next request.
	think = 3 * time.Second
	// warmOps: the first operations run during the first election and are
	// not measured.
	warmOps = 3
)

// measure runs protocol on n nodes and keeps the round trips of operations
// after the warm-up; for a leader protocol (paxos) only those the client sent
// to the leader (a request to a follower is forwarded: two more LAN hops the
// model does not have). The client picks the node at random, independently
// of latencies, so the kept ones are an unbiased sample; paxos runs n times
// as many operations so that about as many are kept.
//
// The time to learn too: each protocol's Recorder (parameter observe)
// reports each instance a replica learns, stamped with the virtual time of
// the step in progress (the trace's last line: the simulator writes an
// input's line just before it steps the node with it), from the client's
// send (the trace's "invokes" line). paxos: the leader's learning from a
// majority of acceptances (paxos.ByQuorum), the model's L_c at the leader.
// fastpaxos: the time to learn of the i-th operation is taken at learner
// n(i mod n + 1), a choice independent of the latencies. A fastpaxos learner
// that got the value by catch-up (from the leader, after a heartbeat: a
// straggling vote) reports no quorum event; the next learner's time is
// taken then, and counted (Outcome detail learn_fallbacks; rare: a LAN vote
// slower than a tick).
func measure(protocol string, n int, s setting, ops int, seed int64, leaderOnly bool) (run, error) {
	tr := &traceScan{sent: map[string]int{}, invoked: map[string]time.Duration{}, learned: map[string]map[string]time.Duration{}}
	note := func(id, node string) {
		if tr.learned[id] == nil {
			tr.learned[id] = map[string]time.Duration{}
		}
		if _, ok := tr.learned[id][node]; !ok {
			tr.learned[id][node] = tr.now
		}
	}
	observe := "seed002fastsim-learn-" + strconv.FormatInt(recorderSeq.Add(1), 10)
	switch protocol {
	case "fastpaxos":
		rec := fastpaxos.NewRecorder(observe)
		defer fastpaxos.DropRecorder(observe)
		rec.OnEvent = func(e fastpaxos.Event) {
			if e.Kind == fastpaxos.Learned && !e.NoOp {
				note(e.Req.String(), string(e.Node))
			}
		}
	case "paxos":
		rec := paxos.NewRecorder(observe)
		defer paxos.DropRecorder(observe)
		rec.OnEvent = func(e paxos.Event) {
			if e.How == paxos.ByQuorum {
				for _, id := range e.Reqs {
					note(id.String(), string(e.Node))
				}
			}
		}
		ops *= n
	default:
		return run{}, fmt.Errorf("measure: protocol %s has no observation hook here", protocol)
	}
	res, err := sim.Run(simConfig(protocol, n, s, ops, seed, tr, observe))
	if err != nil {
		return run{}, err
	}
	if res.Stats.Retries != 0 || res.Unknown != 0 {
		return run{}, fmt.Errorf("%s: %d retries, %d unknown outcomes: the run is not the model's failure-free one", protocol, res.Stats.Retries, res.Unknown)
	}
	var done []history.Op
	for _, op := range res.History.Ops {
		if op.Outcome == history.OK {
			done = append(done, op)
		}
	}
	out := run{ops: len(done), leader: tr.leader()}
	if leaderOnly && len(tr.reqAt) != len(res.History.Ops) {
		return run{}, fmt.Errorf("%s: %d request arrivals traced for %d operations", protocol, len(tr.reqAt), len(res.History.Ops))
	}
	for i, op := range res.History.Ops {
		if i < warmOps || op.Outcome != history.OK {
			continue
		}
		if leaderOnly && tr.reqAt[i] != out.leader {
			continue
		}
		out.rtts = append(out.rtts, float64(op.Return-op.Call)/1e6)
		if i >= len(tr.invokes) {
			return run{}, fmt.Errorf("%s: %d invocations traced for %d operations", protocol, len(tr.invokes), len(res.History.Ops))
		}
		id := tr.invokes[i]
		if leaderOnly {
			at, ok := tr.learned[id][out.leader]
			if !ok {
				return run{}, fmt.Errorf("%s: %s completed but the leader %s did not learn it from a quorum", protocol, id, out.leader)
			}
			out.learns = append(out.learns, float64(at-tr.invoked[id])/1e6)
			continue
		}
		at, ok := tr.learned[id]["n"+strconv.Itoa(i%n+1)]
		for k := 1; !ok && k < n; k++ {
			// That learner caught up instead (CaughtUp: no quorum
			// event): the next one that learned it from a quorum.
			at, ok = tr.learned[id]["n"+strconv.Itoa((i+k)%n+1)]
			out.fallbacks++
		}
		if !ok {
			return run{}, fmt.Errorf("%s: %s completed but no learner learned it from a quorum", protocol, id)
		}
		out.learns = append(out.learns, float64(at-tr.invoked[id])/1e6)
	}
	sort.Float64s(out.rtts)
	sort.Float64s(out.learns)
	return out, nil
}

// traceScan reads the simulator's trace (sim.Config.Trace, one line per
// event): which node each client request reached, in order, and how many
// peer messages each node sent, the virtual time of the last line (now),
// and each request's invocation time. The leader of a stable-leader protocol is
// the node that sends the most (its heartbeats and phase 2a go to every
// other node, a follower answers the leader only).
type traceScan struct {
	reqAt   []string
	sent    map[string]int
	now     time.Duration
	invokes []string                 // request ids in invocation order
	invoked map[string]time.Duration // request id -> time
	learned map[string]map[string]time.Duration
}

func (t *traceScan) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(p, []byte{'\n'}) {
		f := strings.Fields(string(line))
		if len(f) > 0 {
			if d, err := time.ParseDuration(f[0]); err == nil {
				t.now = d
			}
		}
		if len(f) > 5 && f[1] == "client" && f[3] == "invokes" && f[len(f)-2] == "as" {
			id := f[len(f)-1]
			t.invokes = append(t.invokes, id)
			if t.invoked != nil {
				t.invoked[id] = t.now
			}
		}
		if len(f) < 5 || f[2] != "<-" {
			continue
		}
		switch {
		case f[3] == "client" && len(f) > 5 && f[5] == "request":
			t.reqAt = append(t.reqAt, f[1])
		case f[4] == "msg":
			t.sent[f[3]]++
		}
	}
	return len(p), nil
}

func (t *traceScan) leader() string {
	best, bn := "", -1
	for k, v := range t.sent {
		if v > bn || (v == bn && k < best) {
			best, bn = k, v
		}
	}
	return best
}

// setting is one latency case in the simulator's syntax.
type setting struct {
	wan, lan string
}

func paretoSpec(bMs, alpha float64) string {
	return "pareto:" + strconv.FormatFloat(bMs, 'g', -1, 64) + "ms:" + strconv.FormatFloat(alpha, 'g', -1, 64)
}
