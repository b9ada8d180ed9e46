package paxos

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
)

// deliverOnly delivers the messages in flight addressed to one node and
// drops the others; what these deliveries send stays in flight.
func (c *cluster) deliverOnly(to automaton.NodeID) {
	for n := c.Pending(); n > 0; n-- {
		if m, _ := c.Pop(); m.To == to {
			c.DeliverMessage(m)
		}
	}
}

// A write is chosen by n1 and n2 (n1 executes it and answers), n1 crashes
// before n2 learns it was chosen, and n2 leads. The real protocol finds the
// accepted value in phase 1 and chooses it again; the broken variant
// paxos-broken-skipphase1values fills instance 1 with a no-op, and the
// invariant "one value chosen per instance" fires in the step where n2
// marks it chosen, before any client could read the lost write.
func TestSkipPhase1ValuesTripsChosenInvariant(t *testing.T) {
	for _, p := range []protocol{{Capabilities: capabilities("paxos", "")}, {skipPhase1Values: true, Capabilities: capabilities("paxos-broken-skipphase1values", "")}} {
		c := newClusterOf(t, p.Protocol, 3, "kv", nil)
		c.keepViolation = true
		c.elect("n1")
		id := automaton.RequestID{Client: 1, Seq: 1}
		c.Step("n1", automaton.ClientRequest{Req: automaton.Request{ID: id, Op: set("x", "1")}})
		c.deliverOnly("n2") // the Accept reaches n2 only
		c.deliverOnly("n1") // n2's Accepted: chosen, executed, answered
		if r, ok := c.Response(id); !ok || r.IsErr() {
			t.Fatalf("%s: the write was not answered: %v %v", p.Protocol, r, ok)
		}
		c.Drop(nil) // n1's later messages are lost with it
		c.Crash("n1")
		c.elect("n2")
		c.tickAll()
		if p.skipPhase1Values {
			if c.violation == nil || !strings.Contains(c.violation.Error(), "instance 1 chosen") {
				t.Fatalf("%s: no violation of one value per instance: %v", p.Protocol, c.violation)
			}
			continue
		}
		if c.violation != nil {
			t.Fatalf("%s: %v", p.Protocol, c.violation)
		}
		if r, _ := c.do("n3", automaton.RequestID{Client: 2, Seq: 1}, get("x"), automaton.ReadLog); string(r.Bytes) != "1" {
			t.Fatalf("%s: x = %v after the fail-over", p.Protocol, r)
		}
	}
}

// A promise that a leader holds an answer for survives a restart; a
// replica that lost it (its record gone) trips "promises never decrease".
// So does a promise that goes down within one incarnation.
func TestPromiseInvariant(t *testing.T) {
	for _, lose := range []bool{false, true} {
		c := newCluster(t, 3, "kv", nil)
		c.keepViolation = true
		c.elect("n1")
		c.tickAll() // heartbeat acknowledgements
		c.Crash("n2")
		if lose {
			c.SetRecord("n2", recPromised, nil)
		}
		c.Boot("n2")
		if lose != (c.violation != nil) {
			t.Fatalf("promise record lost %v: violation %v", lose, c.violation)
		}
	}
	c := newCluster(t, 3, "kv", nil)
	c.elect("n1")
	c.keepViolation = true
	c.node("n3").promised = Ballot{}
	c.CheckInvariants("n3")
	if c.violation == nil || !strings.Contains(c.violation.Error(), "went down") {
		t.Fatalf("decreasing promise: %v", c.violation)
	}
}

// Two nodes leading one ballot, and replicas whose executed prefixes
// differ, are reported.
func TestLeaderAndPrefixInvariants(t *testing.T) {
	c := newCluster(t, 3, "kv", nil)
	c.elect("n1")
	c.do("n1", automaton.RequestID{Client: 1, Seq: 1}, set("x", "1"), 0)
	c.tickAll()
	c.keepViolation = true
	n2 := c.node("n2")
	role, ballot, ready := n2.role, n2.ballot, n2.ready
	n2.role, n2.ballot, n2.ready = leader, c.node("n1").ballot, true
	c.CheckInvariants("n2")
	if c.violation == nil || !strings.Contains(c.violation.Error(), "both lead") {
		t.Fatalf("two leaders of one ballot: %v", c.violation)
	}
	n2.role, n2.ballot, n2.ready = role, ballot, ready

	inv := newInvariantChecker()
	up := map[automaton.NodeID]automaton.Automaton{"n1": c.node("n1"), "n2": n2}
	if err := inv.Check("n1", up); err != nil {
		t.Fatal(err)
	}
	n2.log[n2.executed].val = noop
	if err := inv.checkExecuted("n2", n2, &replicaCheck{a: n2, chainOK: true}); err == nil || !strings.Contains(err.Error(), "executed prefix") {
		t.Fatalf("differing executed prefixes: %v", err)
	}
}
