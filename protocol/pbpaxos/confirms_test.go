package pbpaxos

import (
	"testing"

	"github.com/synod-dev/synod/service"
)

// TestLateConfirmsDoNotPile: one client reading at the leader (a RESP
// client: no fan-out). Each read is answered on the first follower's
// confirm; the second follower's confirm arrives after the answer. Before
// the fix it made a new confirm set that lived op_timeout (5 s), so the
// leader's map grew by one per read, and past maxConfirms (16,384 sets:
// one client at bench-latency13's 3,000+ gets/s) every confirm was dropped
// and the next read was never answered. Now a late confirm closes its
// read's set: after n reads none is left, and the read after maxConfirms
// of them is answered.
func TestLateConfirmsDoNotPile(t *testing.T) {
	c := cluster(t, nil, nil)
	leader := c.Node("n1").(*PBPaxos)
	reads := maxConfirms + 1
	if testing.Short() {
		reads = 200
	}
	for i := 0; i < reads; i++ {
		r := newReq(get("x"))
		c.Submit("n1", r)
		c.DeliverAll()
		if got := answers(c, r.ID); len(got) != 1 || got["n1"].Type != service.ResultNil {
			t.Fatalf("read %d: answers %v, want nil from n1 (%d confirm sets at the leader)", i, got, len(leader.confirms))
		}
		if n := len(leader.confirms); n != 0 {
			t.Fatalf("after read %d: %d confirm sets left at the leader, want 0 (every confirm arrived)", i, n)
		}
	}
}

// TestAnsweredConfirmsAgeOut: with a follower down its confirm never
// comes; an answered read's set waits answeredTicks ticks for it, then
// goes (not op_timeout's 100 ticks).
func TestAnsweredConfirmsAgeOut(t *testing.T) {
	c := cluster(t, nil, nil)
	c.Crash("n3")
	leader := c.Node("n1").(*PBPaxos)
	for i := 0; i < 20; i++ {
		r := newReq(get("x"))
		c.Submit("n1", r)
		c.DeliverAll()
		if got := answers(c, r.ID); len(got) != 1 {
			t.Fatalf("read %d: answers %v, want one from n1", i, got)
		}
	}
	if n := len(leader.confirms); n != 20 {
		t.Fatalf("%d answered sets waiting for n3's confirms, want 20", n)
	}
	for i := 0; i <= answeredTicks; i++ {
		c.FireTimer("n1", tmTick)
		c.DeliverAll()
	}
	if n := len(leader.confirms); n != 0 {
		t.Fatalf("%d confirm sets after %d ticks, want 0", n, answeredTicks+1)
	}
}
