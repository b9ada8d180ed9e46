package paxos

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/service"
)

func transferReq(seq uint64, to string) automaton.Request {
	return automaton.Request{ID: automaton.RequestID{Client: 99, Seq: seq}, Op: automaton.LeaderTransfer(automaton.NodeID(to))}
}

// A transfer submitted at a follower reaches the leader, which steps down
// and hands off: the target leads, the old leader follows, writes go on,
// and nothing the old leader acknowledged is lost.
func TestTransferLeadership(t *testing.T) {
	c := newCluster(t, 3, "kv", map[string]string{"read": "lease"})
	c.elect("n1")
	if r, ok := c.do("n1", automaton.RequestID{Client: 1, Seq: 1}, set("a", "1"), 0); !ok || r.IsErr() {
		t.Fatalf("set: %v %v", r, ok)
	}
	c.tickAll() // heartbeats acknowledged: n2 is a live target
	r, ok := c.doReq("n3", transferReq(1, "n2"))
	if !ok || r.Result.IsErr() {
		t.Fatalf("transfer: %+v %v", r, ok)
	}
	if st := c.node("n2").Status(); st.Role != "leader" {
		t.Fatalf("n2 after the transfer: %+v", st)
	}
	if st := c.node("n1").Status(); st.Role != "follower" || st.LeaseValid {
		t.Fatalf("n1 after the transfer: %+v (want a follower without a lease)", st)
	}
	if got := c.node("n2").Status().Ballot; !c.node("n1").Status().Promised.Less(got) && c.node("n1").Status().Promised != got {
		t.Fatalf("n1 promised %v, n2 leads %v", c.node("n1").Status().Promised, got)
	}
	// The old leader forwards to the new one; the acknowledged write reads back.
	if r, ok := c.do("n1", automaton.RequestID{Client: 1, Seq: 2}, set("a", "2"), 0); !ok || r.IsErr() {
		t.Fatalf("set at the old leader: %v %v", r, ok)
	}
	if r, _ := c.do("n2", automaton.RequestID{Client: 2, Seq: 1}, get("a"), automaton.ReadLease); string(r.Bytes) != "2" {
		t.Fatalf("a = %v at the new leader, want 2", r)
	}
	// To itself: nothing to do.
	if r, ok := c.doReq("n2", transferReq(2, "n2")); !ok || r.Result.IsErr() || c.node("n2").Status().Role != "leader" {
		t.Fatalf("transfer to the leader itself: %+v %v", r, ok)
	}
	// Not a member, and a malformed request: refused, the leader stays.
	if r, ok := c.doReq("n1", transferReq(3, "n9")); !ok || !r.Result.IsErr() || !strings.Contains(r.Result.Err, "not a member") {
		t.Fatalf("transfer to a non-member: %+v %v", r, ok)
	}
	bad := automaton.Request{ID: automaton.RequestID{Client: 99, Seq: 4}, Op: service.Op{Kind: automaton.MemberOpKind, Key: "transfer"}}
	if r, ok := c.doReq("n3", bad); !ok || !r.Result.IsErr() {
		t.Fatalf("malformed transfer: %+v %v", r, ok)
	}
	if c.node("n2").Status().Role != "leader" {
		t.Fatal("a refused transfer deposed the leader")
	}
	// A target that acknowledged no recent heartbeat (crashed) is refused
	// with TryAgain: the leader stays.
	c.Crash("n3")
	for i := 0; i < 3; i++ {
		c.tickAll()
	}
	if r, ok := c.doReq("n2", transferReq(5, "n3")); !ok || !r.Result.IsErr() || !strings.Contains(r.Result.Err, "try again") {
		t.Fatalf("transfer to a crashed node: %+v %v", r, ok)
	}
	if c.node("n2").Status().Role != "leader" {
		t.Fatal("a transfer to a dead node deposed the leader")
	}
}

// A TimeoutNow of a ballot older than the one promised is stale: it
// neither starts phase 1 at its target nor releases the live leader.
func TestTimeoutNowStaleIgnored(t *testing.T) {
	c := newCluster(t, 3, "kv", nil)
	c.elect("n1")
	old := c.node("n1").Status().Ballot
	c.tickAll()
	c.elect("n2")
	c.tickAll()
	stale := (&message{Kind: kindTimeoutNow, Ballot: old, Commit: 0, OK: true}).marshal()
	c.Step("n3", automaton.PeerMessage{From: "n1", Msg: stale})
	c.DeliverAll()
	if st := c.node("n3").Status(); st.Role != "follower" {
		t.Fatalf("n3 ran on a stale TimeoutNow: %+v", st)
	}
	if c.node("n2").Status().Role != "leader" {
		t.Fatal("a stale TimeoutNow deposed n2")
	}
}

// The old leader gives up its lease before it hands off: with every
// message to it held back (a slow link), the target leads and commits a
// newer write, and a lease read at the old leader is not answered from
// its stale state but forwarded to the new leader. (Stepping down is what
// makes the members' early promise to the target safe: transfer.go.)
func TestTransferOldLeaderServesNoStaleRead(t *testing.T) {
	notN1 := func(m harness.Message) bool { return m.To != "n1" }
	c := newCluster(t, 3, "kv", map[string]string{"read": "lease"})
	c.elect("n1")
	c.do("n1", automaton.RequestID{Client: 1, Seq: 1}, set("a", "1"), 0)
	c.tickAll()
	c.Submit("n1", transferReq(1, "n2"))
	c.Deliver(notN1, 0)
	if c.node("n2").Status().Role != "leader" {
		t.Fatal("n2 does not lead after the transfer")
	}
	c.Submit("n2", automaton.Request{ID: automaton.RequestID{Client: 1, Seq: 2}, Op: set("a", "2")})
	c.Deliver(notN1, 0)
	if r, ok := c.LastResponse(automaton.RequestID{Client: 1, Seq: 2}); !ok || r.Result.IsErr() {
		t.Fatalf("write at the new leader: %+v %v", r, ok)
	}
	read := automaton.RequestID{Client: 3, Seq: 1}
	c.Submit("n1", automaton.Request{ID: read, Op: get("a"), Opts: automaton.Options{Read: automaton.ReadLease}})
	if _, ok := c.LastResponse(read); ok {
		t.Fatal("the old leader answered a lease read itself after handing off")
	}
	c.DeliverAll()
	if r, ok := c.LastResponse(read); !ok || string(r.Result.Bytes) != "2" {
		t.Fatalf("read at the old leader after the transfer: %+v %v, want 2", r, ok)
	}
}
