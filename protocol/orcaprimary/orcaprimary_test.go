package orcaprimary_test

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/protocol/orcaprimary"
	"github.com/synod-dev/synod/service"
)

func do(t *testing.T, c *harness.Cluster, node automaton.NodeID, op service.Op) service.Result {
	t.Helper()
	id := c.Request(node, op, automaton.Options{})
	c.DeliverAll()
	r, ok := c.Response(id)
	if !ok || r.IsErr() {
		t.Fatalf("%s %v: %v (answered %v)", node, op, r, ok)
	}
	return r
}

// kinds counts the messages of the given kind names a run sends.
func sendsDuring(c *harness.Cluster, f func()) int {
	n := 0
	c.Observe(func(_ automaton.NodeID, o automaton.Output) {
		if _, ok := o.(automaton.Send); ok {
			n++
		}
	})
	f()
	c.Observe(nil)
	return n
}

// Under two-phase update a write reaches every secondary (3 messages per
// copy: lock-and-update, ack, unlock) and copies stay; under invalidation the
// copies are thrown away and the next read fetches again.
func TestUpdateKeepsCopiesInvalidateDropsThem(t *testing.T) {
	for _, mode := range []string{"", "*"} {
		c := harness.New(t, harness.Options{Protocol: "orca-primary", Nodes: 3,
			Service: &orca.Service{Types: orca.Builtin, CheckReads: true},
			Params:  map[string]string{"invalidate": mode, "replicate_after": "1"}})
		do(t, c, "n1", orca.New("int", "x"))
		for _, n := range []automaton.NodeID{"n1", "n2", "n3"} {
			do(t, c, n, orca.Call("int", "x", "value")) // every non-primary fetches a copy
		}
		sends := sendsDuring(c, func() { do(t, c, "n1", orca.Call("int", "x", "assign", orca.Int(7))) })
		for _, n := range []automaton.NodeID{"n1", "n2", "n3"} {
			if r := do(t, c, n, orca.Call("int", "x", "value")); r.Int != 7 {
				t.Fatalf("mode %q: %s reads %d after the write, want 7", mode, n, r.Int)
			}
		}
		// x's primary is n1 (the write is local): §3's costs, 3 reliable
		// messages per secondary for update, 2 for invalidation.
		if want := map[string]int{"": 6, "*": 4}[mode]; sends != want {
			t.Fatalf("mode %q: a write to 2 secondaries sent %d messages, want %d", mode, sends, want)
		}
	}
}

// The early-unlock variant lets a secondary serve the new version while
// another still serves the old one; readable-copies-agree sees it.
func TestBrokenEarlyUnlockCaught(t *testing.T) {
	var caught string
	c := harness.New(t, harness.Options{Protocol: "orca-primary-broken-earlyunlock", Nodes: 3,
		Service: &orca.Service{Types: orca.Builtin},
		Params:  map[string]string{"replicate_after": "1"},
		OnViolation: func(_ int, _ automaton.NodeID, err error) {
			if caught == "" {
				caught = err.Error()
			}
		}})
	do(t, c, "n1", orca.New("int", "x"))
	for _, n := range []automaton.NodeID{"n1", "n2", "n3"} {
		do(t, c, n, orca.Call("int", "x", "value"))
	}
	do(t, c, "n1", orca.Call("int", "x", "assign", orca.Int(1)))
	if caught == "" {
		t.Fatal("early unlock went unnoticed")
	}
}

// An operation naming two keys (two objects, each with its own primary) is
// refused, on every node: it used to run at the first key's primary alone,
// answer success and leave the second key unchanged (COPY answered 1, the
// copy read back empty). Single-key operations still run.
func TestMultiKeyOperationRefused(t *testing.T) {
	c := harness.New(t, harness.Options{Protocol: "orca-primary", Nodes: 3})
	do(t, c, "n1", service.Op{Kind: "set", Key: "a", Args: [][]byte{[]byte("v")}})
	for _, n := range []automaton.NodeID{"n1", "n2", "n3"} {
		for _, op := range []service.Op{
			{Kind: "copy", Key: "a", Args: [][]byte{[]byte("b")}},
			{Kind: "rename", Key: "a", Args: [][]byte{[]byte("c")}},
		} {
			id := c.Request(n, op, automaton.Options{})
			c.DeliverAll()
			if r, ok := c.Response(id); !ok || !r.IsErr() {
				t.Fatalf("%s %v: %v (answered %v), want a refusal", n, op, r, ok)
			}
		}
	}
	if r := do(t, c, "n2", service.Op{Kind: "get", Key: "a"}); string(r.Bytes) != "v" {
		t.Fatalf("get a = %v after refused operations, want v", r)
	}
}

// A client's older write that waited at the primary (its guard false: the
// object did not exist yet) while the client gave up and sent a later one
// must not run after the later one: it put the deduplication entry back to
// the older write, and a retry of the later write ran it twice (a job
// taken twice; found by the generic sequential-consistency checker on a
// user's bounded-buffer type: ROBUSTNESS P22). The older write is now
// answered as stale, and the later one's retry from the table.
func TestOlderWriteQueuedBehindLaterIsStale(t *testing.T) {
	c := harness.New(t, harness.Options{Protocol: "orca-primary", Nodes: 3,
		Service: &orca.Service{Types: orca.Builtin}})
	at := orcaprimary.InitialPrimary(c.IDs(), "q")
	get := orca.Call("queue", "q", "get")
	later := automaton.Request{ID: automaton.RequestID{Client: 7, Seq: 2}, Op: get}
	older := automaton.Request{ID: automaton.RequestID{Client: 7, Seq: 1}, Op: get}
	c.Submit(at, later) // both wait for q to exist (get's guard)
	c.Submit(at, older)
	c.DeliverAll()
	do(t, c, at, orca.New("queue", "q"))
	do(t, c, at, orca.Call("queue", "q", "add", []byte("a")))
	do(t, c, at, orca.Call("queue", "q", "add", []byte("b")))
	c.Submit(at, later) // the client's retry
	c.DeliverAll()
	for _, r := range c.Responses(later.ID) {
		if string(r.Bytes) != "a" {
			t.Fatalf("the later get (and its retry) answered %v, want a", c.Responses(later.ID))
		}
	}
	if r, ok := c.Response(older.ID); !ok || !strings.Contains(r.Err, "later write of this client") {
		t.Fatalf("the older get answered %v (%v), want the stale refusal", r, ok)
	}
	if r := do(t, c, at, orca.Call("queue", "q", "len")); r.Int != 1 {
		t.Fatalf("%d jobs left after one get, want 1 (b)", r.Int)
	}
}
