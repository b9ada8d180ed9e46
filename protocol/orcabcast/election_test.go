package orcabcast_test

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/orca"
)

// settle fires every timer and delivers every message, rounds times (the
// suspicion timeout is elect_after intervals plus a random part).
func settle(c *harness.Cluster, rounds int) {
	for i := 0; i < rounds; i++ {
		c.FireAllNodes()
		c.DeliverAll()
	}
}

// writeHeldByTwo crashes the sequencer n1 after an update that n1 and n2
// hold (so it was delivered at n1) but n3 never saw; n3 then waits for a
// write of its own and stands for election.
func writeHeldByTwo(t *testing.T, protocol string) (*harness.Cluster, *string) {
	var caught string
	c := harness.New(t, harness.Options{Protocol: protocol, Nodes: 3, Service: objects(),
		OnViolation: func(_ int, _ automaton.NodeID, err error) {
			if caught == "" {
				caught = err.Error()
			}
		}})
	do(t, c, "n2", orca.New("int", "x"))
	c.DeliverAll()
	c.SetLoss(func(m harness.Message) bool { return m.To == "n3" })
	c.Request("n1", orca.Call("int", "x", "inc", orca.Int(5)), automaton.Options{})
	c.DeliverAll()
	c.SetLoss(nil)
	c.Crash("n1")
	return c, &caught
}

// A new sequencer is elected when the old one is down, recovers the
// update a majority held (n3 never saw it, n2's promise carries it), and
// numbering continues after it; the old sequencer comes back as a member.
func TestElectionRecoversDeliveredUpdate(t *testing.T) {
	c, caught := writeHeldByTwo(t, "orca-bcast")
	id := c.Request("n3", orca.Call("int", "x", "inc", orca.Int(7)), automaton.Options{})
	settle(c, 40)
	must(t, c, id)
	for _, n := range []automaton.NodeID{"n2", "n3"} {
		if r := do(t, c, n, orca.Call("int", "x", "value")); r.Int != 12 {
			t.Fatalf("%s reads %d after the election, want 12 (5 from the old sequencer, 7 after)", n, r.Int)
		}
	}
	c.Restart("n1")
	settle(c, 40)
	id = c.Request("n1", orca.Call("int", "x", "inc", orca.Int(1)), automaton.Options{})
	settle(c, 40)
	must(t, c, id)
	for _, n := range []automaton.NodeID{"n1", "n2", "n3"} {
		if r := do(t, c, n, orca.Call("int", "x", "value")); r.Int != 13 {
			t.Fatalf("%s reads %d after the old sequencer's write as a member, want 13", n, r.Int)
		}
	}
	if *caught != "" {
		t.Fatal(*caught)
	}
}

// Without the recovery step the new sequencer gives the delivered update's
// number to another one; the invariants see it.
func TestBrokenNoRecoveryCaught(t *testing.T) {
	c, caught := writeHeldByTwo(t, "orca-bcast-broken-norecovery")
	c.Request("n3", orca.Call("int", "x", "inc", orca.Int(7)), automaton.Options{})
	settle(c, 40)
	c.Restart("n1")
	settle(c, 40)
	if *caught == "" {
		t.Fatal("the new sequencer renumbered a delivered update unnoticed")
	}
	t.Log(*caught)
}
