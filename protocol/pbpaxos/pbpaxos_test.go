package pbpaxos

import (
	"strconv"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/service"
)

// cluster boots 3 nodes and elects n1 (its election timer fires first).
func cluster(t *testing.T, svc service.Service, params map[string]string) *harness.Cluster {
	t.Helper()
	c := harness.New(t, harness.Options{Protocol: Name, Nodes: 3, Service: svc, Params: params})
	elect(t, c, "n1")
	return c
}

func elect(t *testing.T, c *harness.Cluster, id automaton.NodeID) {
	t.Helper()
	if !c.FireTimer(id, tmElection) {
		t.Fatalf("%s has no election timer", id)
	}
	c.DeliverAll()
	if a := c.Node(id).(*PBPaxos); a.role != leader || !a.ready {
		t.Fatalf("%s did not become a ready leader: %s", id, a.Dump())
	}
}

// silence expires every node's memory of a live leader.
func silence(c *harness.Cluster) {
	for _, id := range c.IDs() {
		c.FireTimer(id, tmAlive)
	}
}

var seq uint64

// fanout sends req to every up node, as a client that fans out does, and
// returns the answers that are not silent.
func fanout(c *harness.Cluster, req automaton.Request) {
	req.Fanout = true
	for _, id := range c.IDs() {
		if c.Up(id) {
			c.Submit(id, req)
		}
	}
}

func newReq(op service.Op) automaton.Request {
	seq++
	return automaton.Request{ID: automaton.RequestID{Client: 7, Seq: seq}, Op: op}
}

// answers returns the non-silent answers to id, by node.
func answers(c *harness.Cluster, id automaton.RequestID) map[automaton.NodeID]service.Result {
	out := map[automaton.NodeID]service.Result{}
	for _, r := range c.AllResponses() {
		if r.Resp.ID == id && !r.Resp.Silent {
			out[r.Node] = r.Resp.Result
		}
	}
	return out
}

func set(k, v string) service.Op { return service.Op{Kind: "set", Key: k, Args: [][]byte{[]byte(v)}} }
func get(k string) service.Op    { return service.Op{Kind: "get", Key: k} }

// TestFanoutOnlyLeaderReplies: a fanned-out write is answered by the leader
// alone, after a majority accepted; the others answer Silent; every replica
// applies the leader's state.
func TestFanoutOnlyLeaderReplies(t *testing.T) {
	c := cluster(t, nil, nil)
	w := newReq(set("x", "1"))
	fanout(c, w)
	if got := answers(c, w.ID); len(got) != 0 {
		t.Fatalf("answered before the accept phase: %v", got)
	}
	c.DeliverAll()
	got := answers(c, w.ID)
	if len(got) != 1 || got["n1"].Type != service.ResultOK {
		t.Fatalf("answers %v, want OK from n1 only", got)
	}
	silent := 0
	for _, r := range c.AllResponses() {
		if r.Resp.ID == w.ID && r.Resp.Silent {
			silent++
		}
	}
	if silent != 2 {
		t.Fatalf("%d silent answers, want 2", silent)
	}
	c.FireAll("n1") // heartbeat: commit notice
	c.DeliverAll()
	for _, id := range c.IDs() {
		a := c.Node(id).(*PBPaxos)
		if r := a.sm.st.Apply(get("x")); string(r.Bytes) != "1" {
			t.Fatalf("%s holds x=%v", id, r)
		}
	}
}

// TestForwardFromOneNode: a request that reached a follower alone (a RESP
// client) is forwarded to the leader and answered by that follower; a read
// there is relayed to every replica and answered after the confirms.
func TestForwardFromOneNode(t *testing.T) {
	c := cluster(t, nil, nil)
	w := newReq(set("x", "2"))
	c.Submit("n3", w)
	c.DeliverAll()
	if got := answers(c, w.ID); len(got) != 1 || got["n3"].Type != service.ResultOK {
		t.Fatalf("write answers %v, want OK at n3", got)
	}
	r := newReq(get("x"))
	c.Submit("n2", r)
	c.DeliverAll()
	if got := answers(c, r.ID); len(got) != 1 || string(got["n2"].Bytes) != "2" {
		t.Fatalf("read answers %v, want \"2\" at n2", got)
	}
}

// TestXPaxosReadWaitsForConfirms: the leader executes a read at once but
// answers only when a follower's confirm makes a majority; without
// confirms it never answers. The broken variant answers at once and trips
// reads-confirmed.
func TestXPaxosReadWaitsForConfirms(t *testing.T) {
	c := cluster(t, nil, nil)
	r := newReq(get("x"))
	fanout(c, r)
	c.Drop(func(m harness.Message) bool { return true }) // every confirm lost
	if got := answers(c, r.ID); len(got) != 0 {
		t.Fatalf("answered without confirms: %v", got)
	}
	r2 := newReq(get("x"))
	fanout(c, r2)
	c.DeliverAll()
	if got := answers(c, r2.ID); len(got) != 1 || got["n1"].Type != service.ResultNil {
		t.Fatalf("answers %v, want nil from n1", got)
	}

	var violated string
	b := harness.New(t, harness.Options{Protocol: BrokenNoConfirm, Nodes: 3,
		OnViolation: func(_ int, _ automaton.NodeID, err error) { violated = err.Error() }})
	elect(t, b, "n1")
	r3 := newReq(get("x"))
	fanout(b, r3)
	if got := answers(b, r3.ID); len(got) != 1 {
		t.Fatalf("broken variant answers %v", got)
	}
	if violated == "" {
		t.Fatal("reads-confirmed did not catch the broken variant")
	}
}

// TestTakeoverKeepsWritesAndDedups: after the leader crashes, the new
// leader recovers the write through its takeover, answers a retry of it
// from the duplicate table, and serves new requests only once its batch is
// chosen.
func TestTakeoverKeepsWritesAndDedups(t *testing.T) {
	c := cluster(t, nil, nil)
	w := newReq(set("x", "1"))
	fanout(c, w)
	c.DeliverAll()
	c.Crash("n1")
	a := c.Node("n2").(*PBPaxos)
	silence(c) // n1 silent for an election timeout
	c.FireTimer("n2", tmElection)
	if a.role != candidate {
		t.Fatalf("n2 is %s", a.Dump())
	}
	w2 := newReq(set("y", "2"))
	w2.ID.Client = 8                        // another client: client 7 may still retry w
	c.Submit("n2", w2)                      // waits: phase 1 is not complete
	c.Drop(harness.Match("", "n2"))         // old traffic
	c.Deliver(harness.Match("n2", "n3"), 1) // the Prepare
	c.Deliver(harness.Match("n3", "n2"), 1) // n3's promise; the Accept follows
	if a.role != leader || a.ready {
		t.Fatalf("n2 after phase 1: %s", a.Dump())
	}
	if got := answers(c, w2.ID); len(got) != 0 {
		t.Fatalf("served before the accept phase: %v", got)
	}
	c.DeliverAll()
	if !a.ready {
		t.Fatalf("n2 not ready: %s", a.Dump())
	}
	if got := answers(c, w2.ID); got["n2"].Type != service.ResultOK {
		t.Fatalf("new write answers %v", got)
	}
	fanout(c, w) // the client retries the first write
	c.DeliverAll()
	if got := answers(c, w.ID); got["n2"].Type != service.ResultOK {
		t.Fatalf("retry answers %v", got)
	}
	if n := a.applied; n != 3 {
		t.Fatalf("applied %d instances, want 3 (write, takeover no-op, write): the retry executed again?", n)
	}
	if r := a.sm.st.Apply(get("x")); string(r.Bytes) != "1" {
		t.Fatalf("x=%v after takeover", r)
	}
}

// TestRestartRecovers: a crashed follower rebuilds its state from its
// records.
func TestRestartRecovers(t *testing.T) {
	for _, mode := range []string{"delta", "full", "replay"} {
		t.Run(mode, func(t *testing.T) {
			c := cluster(t, nil, map[string]string{"state": mode, "snapshot_every": "2"})
			for i := 0; i < 5; i++ {
				fanout(c, newReq(set("k"+strconv.Itoa(i), "v")))
				c.DeliverAll()
			}
			c.FireAll("n1")
			c.DeliverAll()
			before := c.Node("n2").(*PBPaxos).applied
			c.Restart("n2")
			a := c.Node("n2").(*PBPaxos)
			if a.applied != before {
				t.Fatalf("restart applied %d, before %d", a.applied, before)
			}
			if r := a.sm.st.Apply(get("k4")); string(r.Bytes) != "v" {
				t.Fatalf("k4=%v after restart", r)
			}
		})
	}
}

// TestPipelineChains: with pipeline=3 the leader has several proposals
// outstanding; an acceptor refuses a chained delta whose predecessor it
// lacks; once retransmitted in order everything is applied.
func TestPipelineChains(t *testing.T) {
	c := cluster(t, nil, map[string]string{"pipeline": "3"})
	for i := 0; i < 3; i++ {
		fanout(c, newReq(set("k", strconv.Itoa(i))))
	}
	a := c.Node("n1").(*PBPaxos)
	if len(a.inflight) != 3 {
		t.Fatalf("%d proposals outstanding, want 3", len(a.inflight))
	}
	// Lose the first Accept to n2: it must not accept the next ones.
	c.Drop(harness.Match("n1", "n3"))
	first := true
	c.Drop(func(m harness.Message) bool {
		if m.From == "n1" && m.To == "n2" && first {
			first = false
			return true
		}
		return false
	})
	c.DeliverAll()
	if len(a.inflight) != 3 {
		t.Fatalf("chosen without a chain: %d in flight", len(a.inflight))
	}
	c.FireAll("n1") // retransmit
	c.DeliverAll()
	if a.applied != 4 || len(a.inflight) != 0 {
		t.Fatalf("leader %s", a.Dump())
	}
}

// TestSeedWorkedExampleGaps: the worked example of VI.A.2 in full-state
// mode. A replica that learns instance 3's whole state chosen without
// having instance 2 installs it and records a gap; when it takes over, its
// Prepare names the gap and everything after its instance, and the reply
// carries the request of the gap.
func TestSeedWorkedExampleGaps(t *testing.T) {
	c := cluster(t, nil, map[string]string{"state": "full"})
	c.SetLoss(func(m harness.Message) bool { // no catch-up: n3 must jump
		d, _ := unmarshal(m.Msg)
		return d != nil && d.Kind == kindCatchupReq
	})
	fanout(c, newReq(set("a", "1")))
	c.DeliverAll()
	fanout(c, newReq(set("b", "2")))
	c.Drop(harness.Match("n1", "n3")) // n3 misses instance 3
	c.DeliverAll()
	fanout(c, newReq(set("c", "3")))
	c.DeliverAll()
	c.FireAll("n1") // heartbeat commit notice
	c.DeliverAll()
	b := c.Node("n3").(*PBPaxos)
	if b.applied != 4 {
		t.Fatalf("n3 %s", b.Dump())
	}
	if g := b.gapList(); len(g) != 1 || g[0] != 3 {
		t.Fatalf("n3 gaps %v, want [3]", g)
	}
	c.Crash("n1")
	silence(c)
	c.FireTimer("n3", tmElection)
	var prep *message
	for _, m := range c.Queue() {
		if m.From == "n3" {
			prep, _ = unmarshal(m.Msg)
		}
	}
	if prep == nil || prep.Kind != kindPrepare || prep.After != 4 || len(prep.Gaps) != 1 || prep.Gaps[0] != 3 {
		t.Fatalf("prepare %+v", prep)
	}
	c.DeliverAll()
	if b.role != leader || !b.ready || b.gaps[3] {
		t.Fatalf("n3 after takeover %s", b.Dump())
	}
}
