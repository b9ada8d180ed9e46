package esds

import (
	"reflect"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// feCluster: 5 nodes, replicas on n1..n3, front ends only on n4 and n5.
func feCluster(t *testing.T, extra map[string]string) *cluster {
	params := map[string]string{"replicas": "n1,n2,n3"}
	for k, v := range extra {
		params[k] = v
	}
	return newCluster(t, "esds", 5, service.Counter{}, params)
}

// inFlight lists the destinations of the queued messages from one node.
func inFlight(c *cluster, from automaton.NodeID) []automaton.NodeID {
	var to []automaton.NodeID
	for _, m := range c.Queue() {
		if m.From == from {
			to = append(to, m.To)
		}
	}
	return to
}

// replicaOrders checks that the replicas agree and returns their order.
func replicaOrders(t *testing.T, c *cluster) []string {
	t.Helper()
	first := c.esds("n1").FinalOrder()
	for _, id := range []automaton.NodeID{"n2", "n3"} {
		if o := c.esds(id).FinalOrder(); !reflect.DeepEqual(o, first) {
			t.Fatalf("%s order %v, n1 %v", id, o, first)
		}
	}
	return first
}

func TestFrontEndOnlyNode(t *testing.T) {
	c := feCluster(t, nil)
	for _, id := range []automaton.NodeID{"n4", "n5"} {
		if c.esds(id).IsReplica() {
			t.Fatalf("%s is a replica", id)
		}
	}
	// send=1: one request, to the replica at position self mod 3 (n4 -> n1, n5 -> n2).
	r4 := c.request("n4", opts("a", false), "add", "5")
	r5 := c.request("n5", opts("b", true), "add", "7")
	if got := inFlight(c, "n4"); !reflect.DeepEqual(got, []automaton.NodeID{"n1"}) {
		t.Fatalf("n4 sent to %v, want [n1]", got)
	}
	if got := inFlight(c, "n5"); !reflect.DeepEqual(got, []automaton.NodeID{"n2"}) {
		t.Fatalf("n5 sent to %v, want [n2]", got)
	}
	c.DeliverAll()
	if res := c.mustAnswer(r4); res.Type != service.ResultInt || res.Int != 5 {
		t.Fatalf("a answered %v", res)
	}
	if _, ok := c.answer(r5); ok {
		t.Fatal("strict b answered before gossip")
	}
	// Stability is over the replicas only: the strict operation is answered
	// once n1..n3 have it, although n4 and n5 never will.
	c.settle(6)
	c.mustAnswer(r5)
	if o := replicaOrders(t, c); len(o) != 2 {
		t.Fatalf("order %v", o)
	}
	for _, id := range []automaton.NodeID{"n4", "n5"} {
		e := c.esds(id)
		if d := c.Disk(id); len(d) != 0 {
			t.Errorf("%s persisted %v", id, d)
		}
		if e.ops != nil || len(e.FinalOrder()) != 0 || len(e.wait) != 0 {
			t.Errorf("%s holds replica state or waits: ops=%v wait=%v", id, e.ops, e.wait)
		}
	}
	// Gossip never goes to a front-end-only node.
	c.tick()
	for _, m := range c.Queue() {
		if m.To == "n4" || m.To == "n5" {
			t.Fatalf("%s sent %s a message with nothing waiting", m.From, m.To)
		}
	}
}

func TestFrontEndOnlySendAll(t *testing.T) {
	c := feCluster(t, map[string]string{"send": "all"})
	r := c.request("n5", opts("x", false), "add", "2")
	if got := inFlight(c, "n5"); len(got) != 3 {
		t.Fatalf("send=all from n5 went to %v", got)
	}
	if n := c.esds("n5").FrontEndSends(); n != 3 {
		t.Fatalf("%d sends", n)
	}
	c.DeliverAll()
	if rs := c.Responses(r); len(rs) != 1 {
		t.Fatalf("%d answers to one request", len(rs))
	}
	c.settle(6)
	if o := replicaOrders(t, c); !reflect.DeepEqual(o, []string{"x"}) {
		t.Fatalf("order %v: one operation, however many replicas it reached", o)
	}
}

// The replica a front end uses dies: with resend the operation goes to the
// next replica in the ring and is answered; without it, it waits.
func TestFrontEndOnlyResendWhenReplicaDies(t *testing.T) {
	for _, resend := range []string{"off", "20ms"} {
		c := feCluster(t, map[string]string{"resend": resend, "gossip": "20ms", "maxsends": "1"})
		c.Crash("n1")
		r := c.request("n4", opts("y", false), "add", "3")
		c.DeliverAll() // to the dead n1: lost
		c.settle(3)
		_, ok := c.answer(r)
		if ok != (resend != "off") {
			t.Fatalf("resend=%s: answered %v", resend, ok)
		}
		if resend == "off" {
			continue
		}
		counts := c.esds("n4").SendCounts()
		if len(counts) != 0 {
			t.Fatalf("still waiting: %v", counts)
		}
	}
}

func TestReplicasParamRefusesStrangers(t *testing.T) {
	p, _ := automaton.Lookup("esds")
	nodes := []automaton.NodeID{"n1", "n2", "n3"}
	for _, params := range []map[string]string{
		{"replicas": "n1,n9"},
		{"replicas": "n1,n2", "removed": "n3"},
	} {
		if _, err := p.New(automaton.Config{Self: "n1", Nodes: nodes, Service: service.Counter{}, Params: params}); err == nil {
			t.Errorf("%v accepted", params)
		}
	}
}
