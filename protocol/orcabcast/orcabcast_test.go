package orcabcast_test

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/service"
)

func objects() *orca.Service { return &orca.Service{Types: orca.Builtin, CheckReads: true} }

// do sends op to node, delivers everything, and returns the answer.
func do(t *testing.T, c *harness.Cluster, node automaton.NodeID, op service.Op) service.Result {
	t.Helper()
	id := c.Request(node, op, automaton.Options{})
	c.DeliverAll()
	return must(t, c, id)
}

func must(t *testing.T, c *harness.Cluster, id automaton.RequestID) service.Result {
	t.Helper()
	r, ok := c.Response(id)
	if !ok {
		t.Fatalf("no answer to %v", id)
	}
	if r.IsErr() {
		t.Fatalf("%v: %v", id, r)
	}
	return r
}

// A guarded get on an empty queue is held inside the automata and answered
// when a later write (another node's add) makes its guard true.
func TestGuardedGetWaitsForAdd(t *testing.T) {
	c := harness.New(t, harness.Options{Protocol: "orca-bcast", Nodes: 3, Service: objects()})
	do(t, c, "n2", orca.New("queue", "jobs"))
	get := c.Request("n3", orca.Call("queue", "jobs", "get"), automaton.Options{})
	c.DeliverAll()
	if _, ok := c.Response(get); ok {
		t.Fatal("get on an empty queue answered")
	}
	do(t, c, "n1", orca.Call("queue", "jobs", "add", []byte("job-1")))
	c.DeliverAll()
	if r := must(t, c, get); string(r.Bytes) != "job-1" {
		t.Fatalf("get = %v, want job-1", r)
	}
	// Every replica applied the add and the get: the queue is empty everywhere.
	for _, n := range []automaton.NodeID{"n1", "n2", "n3"} {
		r := do(t, c, n, orca.Call("queue", "jobs", "len"))
		if r.Int != 0 {
			t.Fatalf("%s: len = %d, want 0", n, r.Int)
		}
	}
}

// A write's client is answered only after its update is applied at its own
// node; a read there then sees it (read-your-writes), whichever method
// carried it.
func TestWriterBlocksUntilAppliedLocally(t *testing.T) {
	for _, large := range []string{"1024", "0"} {
		c := harness.New(t, harness.Options{Protocol: "orca-bcast", Nodes: 3, Service: objects(),
			Params: map[string]string{"large_bytes": large}})
		c.DeliverAll()
		do(t, c, "n3", orca.New("int", "x"))
		c.DeliverAll()
		id := c.Request("n3", orca.Call("int", "x", "inc", orca.Int(5)), automaton.Options{})
		// Deliver everything except what reaches n3: no answer yet.
		c.Deliver(func(m harness.Message) bool { return m.To != "n3" }, 0)
		if _, ok := c.Response(id); ok {
			t.Fatalf("large_bytes=%s: answered before the update reached the writer's node", large)
		}
		c.DeliverAll()
		must(t, c, id)
		if r := do(t, c, "n3", orca.Call("int", "x", "value")); r.Int != 5 {
			t.Fatalf("large_bytes=%s: read after own write = %d", large, r.Int)
		}
	}
}

// A lost ordered update leaves a gap that the receiver fetches from the
// sequencer's history.
func TestGapFetchedFromHistory(t *testing.T) {
	c := harness.New(t, harness.Options{Protocol: "orca-bcast", Nodes: 3, Service: objects()})
	do(t, c, "n1", orca.New("int", "x"))
	c.DeliverAll()
	c.Request("n1", orca.Call("int", "x", "assign", orca.Int(1)), automaton.Options{})
	if n := c.Drop(func(m harness.Message) bool { return m.To == "n2" }); n == 0 {
		t.Fatal("nothing to drop")
	}
	c.Request("n1", orca.Call("int", "x", "assign", orca.Int(2)), automaton.Options{})
	c.DeliverAll() // n2 sees update 3 after 1: gap, fetch, answer
	if r := do(t, c, "n2", orca.Call("int", "x", "value")); r.Int != 2 {
		t.Fatalf("n2 reads %d after the gap was filled, want 2", r.Int)
	}
}

// The broken FIFO variant lets two replicas apply concurrent writes in
// different orders; the invariant global-write-order sees it.
func TestBrokenFIFOCaught(t *testing.T) {
	var caught string
	c := harness.New(t, harness.Options{Protocol: "orca-bcast-broken-fifo", Nodes: 2, Service: objects(),
		OnViolation: func(_ int, _ automaton.NodeID, err error) {
			if caught == "" {
				caught = err.Error()
			}
		}})
	c.DeliverAll()
	c.Request("n1", orca.New("int", "x"), automaton.Options{})
	c.Request("n2", orca.New("int", "y"), automaton.Options{})
	c.DeliverAll()
	if caught == "" {
		t.Fatal("the FIFO variant's different orders went unnoticed")
	}
}
