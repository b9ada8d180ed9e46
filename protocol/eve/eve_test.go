package eve

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/service"
)

func isKind(k byte) func(harness.Message) bool {
	return func(m harness.Message) bool { return len(m.Msg) > 1 && m.Msg[1] == k }
}

// settle delivers messages and completes executions until nothing is left,
// dropping what drop matches.
func settle(c *harness.Cluster, drop func(harness.Message) bool) {
	for {
		if drop != nil {
			c.Drop(drop)
		}
		if c.DeliverOne() {
			continue
		}
		if c.CompleteEffects() == 0 {
			return
		}
	}
}

// A request is answered only after the verifiers' decision for its slot
// reached the replica that answers it; a lost Decide comes back when the
// idle replica reports its applied slot.
func TestAnswerOnlyAfterDecision(t *testing.T) {
	c := harness.New(t, harness.Options{Protocol: Name, Nodes: 3})
	settle(c, nil) // the first verifier's phase 1
	id := c.Request("n2", service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}, automaton.Options{})
	toN2 := isKind(kindDecide)
	settle(c, func(m harness.Message) bool { return toN2(m) && m.To == "n2" })
	if _, ok := c.Response(id); ok {
		t.Fatal("n2 answered before it learned the decision")
	}
	if a := c.Node("n2").(*Eve); a.ex.applied != 0 || a.ex.cur == nil || !a.ex.cur.done {
		t.Fatalf("n2 should hold a finished, undecided run: %s", a.Dump())
	}
	c.FireAll("n2") // its token again: the verifiers answer with the decision
	settle(c, nil)
	if res, ok := c.Response(id); !ok || res.Type != service.ResultOK {
		t.Fatalf("after the decision: %v %v", res, ok)
	}
	for _, n := range []automaton.NodeID{"n1", "n2", "n3"} {
		if a := c.Node(n).(*Eve); a.ex.applied != 1 {
			t.Errorf("%s applied %d slots, want 1", n, a.ex.applied)
		}
	}
}

// A replica that restarts after its token left recovers its speculative run
// from its records, so the committed claim can still be applied there.
func TestSpeculationSurvivesRestart(t *testing.T) {
	c := harness.New(t, harness.Options{Protocol: Name, Nodes: 3})
	settle(c, nil)
	id := c.Request("n3", service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}, automaton.Options{})
	settle(c, isKind(kindDecide)) // tokens out, every Decide lost
	c.Restart("n3")
	if a := c.Node("n3").(*Eve); a.ex.cur == nil || !a.ex.cur.done {
		t.Fatalf("n3 lost its run: %s", a.Dump())
	}
	c.FireAll("n3") // idle status: the decision comes back
	settle(c, nil)
	if a := c.Node("n3").(*Eve); a.ex.applied != 1 || a.stats.Transfers != 0 {
		t.Fatalf("n3 should apply its own recovered run: %s, %+v", a.Dump(), a.stats)
	}
	_ = id // n3's client lost its connection with the restart; the slot is applied
}
