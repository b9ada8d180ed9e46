package fastpaxos

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/service"
)

// TestQuorums: the derived sizes (the seed's 2t+1 of 3t+1, a majority and
// all three with n = 3) and the validation of configured ones.
func TestQuorums(t *testing.T) {
	for _, c := range []struct{ n, classic, fast int }{{1, 1, 1}, {3, 2, 3}, {4, 3, 3}, {5, 3, 4}, {7, 5, 5}, {10, 7, 7}} {
		q := defaultQuorums(c.n)
		if q.classic != c.classic || q.fast != c.fast {
			t.Errorf("n=%d: classic %d fast %d, want %d %d", c.n, q.classic, q.fast, c.classic, c.fast)
		}
		if err := q.validate(); err != nil {
			t.Errorf("n=%d: %v", c.n, err)
		}
	}
	nodes := []automaton.NodeID{"n1", "n2", "n3", "n4"}
	for _, c := range []struct {
		params map[string]string
		err    string
	}{
		{map[string]string{"fast_quorum": "2"}, "need not intersect"},
		{map[string]string{"classic_quorum": "2"}, "two classic quorums"},
		{map[string]string{"classic_quorum": "2", "fast_quorum": "4"}, "two classic quorums"},
		{map[string]string{"fast_quorum": "5"}, "out of [1, 4]"},
		{map[string]string{"classic_quorum": "4", "fast_quorum": "3"}, ""},
		{map[string]string{"fast_quorum": "4"}, ""}, // classic derived: 3
		{map[string]string{"quorum": "3"}, "unknown"},
	} {
		_, err := protocol{Capabilities: capabilities(Name, "")}.New(automaton.Config{Self: "n1", Nodes: nodes, Service: service.KV{}, Params: c.params, Rand: newRand()})
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%v: %v", c.params, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%v: error %v, want one containing %q", c.params, err, c.err)
		}
	}
}

// TestPickSeedExample: the Grid Services thesis V.C's worked example, the leader hearing
// replicas 2, 3, 4 of four: v_a, v_b, v_c for the first three requests, and
// the fourth instance some value voted there (never v_d).
func TestPickSeedExample(t *testing.T) {
	q := defaultQuorums(4)
	val := func(s string) []byte {
		return encodeValue(automaton.Request{ID: automaton.RequestID{Client: 1, Seq: uint64(s[0])}, Op: service.Op{Kind: "set", Key: s}})
	}
	fast := Ballot{Round: 1, Node: 2}
	orders := map[int]string{1: "abdc", 2: "adcb", 3: "dbca"} // replicas 2, 3, 4 (indices 1..3)
	want := "abc"
	for i := 0; i < 4; i++ {
		var rs []report
		for acc := 1; acc <= 3; acc++ {
			rs = append(rs, report{acc: acc, bal: fast, val: val(orders[acc][i : i+1])})
		}
		got := q.pick(rs, false)
		if i < 3 && !bytes.Equal(got, val(want[i:i+1])) {
			t.Errorf("instance %d: picked %s, want v_%c", i+1, describeValue(got), want[i])
		}
		if bytes.Equal(got, val("d")) {
			t.Errorf("instance %d: picked v_d", i+1)
		}
	}
	// A classic round's value wins over older fast votes; no vote: the no-op.
	rec := Ballot{Round: 1, Node: 3}
	if got := q.pick([]report{{0, fast, val("a")}, {1, rec, val("b")}, {2, Ballot{}, nil}}, false); !bytes.Equal(got, val("b")) {
		t.Errorf("classic round: picked %s", describeValue(got))
	}
	if got := q.pick([]report{{0, Ballot{}, nil}, {1, Ballot{}, nil}, {2, Ballot{}, nil}}, false); !bytes.Equal(got, noop) {
		t.Errorf("no votes: picked %s", describeValue(got))
	}
	// The broken rule takes the highest reporter's vote even against a
	// value that may have been chosen.
	if got := q.pick([]report{{1, fast, val("a")}, {2, fast, val("a")}, {3, fast, val("d")}}, true); !bytes.Equal(got, val("d")) {
		t.Errorf("broken pick: %s", describeValue(got))
	}
}

// TestInteractions runs the golden scripts under testdata, with one
// command beside the harness's: "fanout client=C seq=S to=(n1,...) op=..."
// delivers a Fanout request to the listed nodes in that order, as a
// fanning-out client's messages might arrive.
func TestInteractions(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		env := &harness.Env{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "fanout" {
				return env.Handle(t, d)
			}
			before := len(env.C.Trace())
			var client, seq int
			d.ScanArgs(t, "client", &client)
			d.ScanArgs(t, "seq", &seq)
			var to []string
			d.ScanArgs(t, "to", &to)
			var words []string
			seen := false
			for _, a := range d.CmdArgs {
				switch {
				case a.Key == "op":
					seen = true
					words = append(words, a.Vals...)
				case seen && len(a.Vals) == 0:
					words = append(words, a.Key)
				}
			}
			op := service.Op{Kind: words[0]}
			if len(words) > 1 {
				op.Key = words[1]
			}
			for _, w := range words[min(2, len(words)):] {
				op.Args = append(op.Args, []byte(w))
			}
			req := automaton.Request{ID: automaton.RequestID{Client: uint64(client), Seq: uint64(seq)}, Op: op, Fanout: true}
			for _, n := range to {
				env.C.Submit(automaton.NodeID(n), req)
			}
			lines := env.C.Trace()[before:]
			if len(lines) == 0 {
				return "ok\n"
			}
			return strings.Join(lines, "\n") + "\n"
		})
	})
}

// cluster boots n nodes and makes lead the leader.
func cluster(t *testing.T, proto string, n int, lead automaton.NodeID) *harness.Cluster {
	c := harness.New(t, harness.Options{Protocol: proto, Nodes: n})
	c.FireTimer(lead, tmElection)
	c.DeliverAll()
	if l := node(c, lead); l.role != leader {
		t.Fatalf("%s is not leader: %s", lead, l.Dump())
	}
	return c
}

func node(c *harness.Cluster, id automaton.NodeID) *FastPaxos { return c.Node(id).(*FastPaxos) }

var nextSeq uint64

// fanout sends a Fanout request to the nodes in order.
func fanout(c *harness.Cluster, client uint64, key, val string, to ...automaton.NodeID) automaton.RequestID {
	nextSeq++
	req := automaton.Request{ID: automaton.RequestID{Client: client, Seq: nextSeq}, Fanout: true,
		Op: service.Op{Kind: "set", Key: key, Args: [][]byte{[]byte(val)}}}
	for _, n := range to {
		c.Submit(n, req)
	}
	return req.ID
}

var all4 = []automaton.NodeID{"n1", "n2", "n3", "n4"}

// TestFastPath: with no contention a request is learned by every learner
// from a fast quorum of votes, without the leader's help, and every node
// that received it answers.
func TestFastPath(t *testing.T) {
	c := cluster(t, Name, 4, "n1")
	id := fanout(c, 7, "k", "v", all4...)
	c.DeliverAll()
	if got := len(c.Responses(id)); got != 4 {
		t.Fatalf("%d answers, want one per node", got)
	}
	for _, n := range all4 {
		st := node(c, n).Stats()
		if st.FastLearned != 1 || st.ClassicLearned != 0 {
			t.Errorf("%s: %+v, want one fast learn", n, st)
		}
	}
	if st := node(c, "n1").Stats(); st.Collisions != 0 || st.Recovered != 0 {
		t.Errorf("leader: %+v", st)
	}
}

// TestCollision: two requests reach the acceptors in different orders;
// the leader sees a classic quorum of disagreeing votes, recovers the
// instances in its recovery round, and both requests execute once on every
// replica.
func TestCollision(t *testing.T) {
	c := cluster(t, Name, 4, "n1")
	a := fanout(c, 1, "x", "a", "n1", "n2")
	b := fanout(c, 2, "x", "b", "n3", "n4", "n1", "n2")
	for _, n := range []automaton.NodeID{"n3", "n4"} {
		c.Submit(n, automaton.Request{ID: a, Fanout: true, Op: service.Op{Kind: "set", Key: "x", Args: [][]byte{[]byte("a")}}})
	}
	c.DeliverAll()
	for i := 0; i < 20 && (len(c.Responses(a)) == 0 || len(c.Responses(b)) == 0); i++ {
		c.FireAllNodes()
		c.DeliverAll()
	}
	if len(c.Responses(a)) == 0 || len(c.Responses(b)) == 0 {
		t.Fatalf("not answered: a %v b %v", c.Responses(a), c.Responses(b))
	}
	l := node(c, "n1").Stats()
	if l.Collisions == 0 || l.Recovered == 0 {
		t.Errorf("leader stats %+v: want a collision and a recovery", l)
	}
	exec := node(c, "n1").executed
	for _, n := range all4 {
		p := node(c, n)
		if p.executed != exec {
			t.Errorf("%s executed %d, leader %d", n, p.executed, exec)
		}
		if got := p.sm.st.Apply(service.Op{Kind: "get", Key: "x"}); got.String() != node(c, "n1").sm.st.Apply(service.Op{Kind: "get", Key: "x"}).String() {
			t.Errorf("%s: x = %v", n, got)
		}
	}
}

// TestAcceptorCrashRecovery: an acceptor that crashes after voting comes
// back with its promise and votes, never votes twice in one round at one
// instance, re-executes what it had learned, and joins the fast path again
// on the leader's next any.
func TestAcceptorCrashRecovery(t *testing.T) {
	c := cluster(t, Name, 4, "n1")
	first := fanout(c, 1, "k", "1", all4...)
	c.DeliverAll()
	before := node(c, "n4")
	c.Restart("n4")
	after := node(c, "n4")
	if after.promised != before.promised || after.executed != 1 || after.insts[1] == nil || !bytes.Equal(after.insts[1].vval, before.insts[1].vval) {
		t.Fatalf("restored %s, before %s", after.Dump(), before.Dump())
	}
	if v := after.sm.st.Apply(service.Op{Kind: "get", Key: "k"}); v.String() != service.Bytes([]byte("1")).String() {
		t.Fatalf("re-executed state: k = %v", v)
	}
	// Before the leader's any the acceptor has no fast round: no vote.
	second := fanout(c, 1, "k", "2", "n4")
	if len(after.insts) != 1 {
		t.Fatalf("voted without a fast round: %s", after.Dump())
	}
	c.FireTimer("n1", tmTick) // the leader's any/heartbeat
	c.DeliverAll()
	fanout2 := automaton.Request{ID: second, Fanout: true, Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("2")}}}
	for _, n := range all4[:3] {
		c.Submit(n, fanout2)
	}
	c.DeliverAll()
	if s := after.insts[2]; s == nil || after.insts[1].vrnd != before.insts[1].vrnd {
		t.Fatalf("after restart: %s", after.Dump())
	}
	for _, n := range all4 {
		if p := node(c, n); p.executed != 2 || p.Stats().ClassicLearned != 0 {
			t.Errorf("%s: %s", n, p.Dump())
		}
	}
	if len(c.Responses(first)) == 0 || len(c.Responses(second)) == 0 {
		t.Errorf("unanswered")
	}
}

// TestProposerForOneNodeClient: a request that is not fanned out makes the
// contacted node the proposer, and only it answers.
func TestProposerForOneNodeClient(t *testing.T) {
	c := cluster(t, Name, 4, "n1")
	id := c.Request("n3", service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}, automaton.Options{})
	c.DeliverAll()
	if got := c.AllResponses(); len(got) != 1 || got[0].Node != "n3" || got[0].Resp.ID != id || got[0].Resp.Result.IsErr() {
		t.Fatalf("responses %v", got)
	}
	if st := node(c, "n2").Stats(); st.FastLearned != 1 {
		t.Errorf("n2 %+v", st)
	}
}

// TestBrokenClassicLearnTripsInvariant: the broken learner learns on two
// of three votes in a fast round, which the invariant reports.
func TestBrokenClassicLearnTripsInvariant(t *testing.T) {
	var violation error
	c := harness.New(t, harness.Options{Protocol: BrokenClassicLearn, Nodes: 3,
		OnViolation: func(_ int, _ automaton.NodeID, err error) {
			if violation == nil {
				violation = err
			}
		}})
	c.FireTimer("n1", tmElection)
	c.DeliverAll()
	fanout(c, 1, "k", "v", "n1", "n2")
	c.DeliverAll()
	if violation == nil || !strings.Contains(violation.Error(), "which no quorum chose") {
		t.Fatalf("violation %v", violation)
	}
}

func newRand() *rand.Rand { return rand.New(rand.NewSource(1)) }
