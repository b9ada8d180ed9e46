package pbpaxos

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// nestedReq is a nested request (automaton.Request.Nested) of client 77,
// as every replica of a calling namespace sends it.
func nestedReq(seq uint64, op service.Op) automaton.Request {
	return automaton.Request{ID: automaton.RequestID{Client: 77, Seq: seq}, Op: op, Nested: true}
}

// TestNestedReadCached: a nested read is queued, agreed and cached like a
// write (nested.go), so a copy of it sent later, at the leader or at a
// follower, gets the first answer although the key changed in between; a
// plain read sees the change.
func TestNestedReadCached(t *testing.T) {
	c := cluster(t, nil, nil)
	w := newReq(set("k", "a"))
	c.Submit("n1", w)
	c.DeliverAll()
	read := nestedReq(1, get("k"))
	c.Submit("n2", read)
	c.DeliverAll()
	if got := answers(c, read.ID); string(got["n2"].Bytes) != "a" {
		t.Fatalf("nested read answered %v, want \"a\" at n2", got)
	}
	w2 := newReq(set("k", "b"))
	c.Submit("n1", w2)
	c.DeliverAll()
	for _, at := range []automaton.NodeID{"n1", "n3"} {
		c.Submit(at, read)
		c.DeliverAll()
		if got := answers(c, read.ID)[at]; string(got.Bytes) != "a" {
			t.Fatalf("copy of the nested read at %s answered %v, want the cached \"a\"", at, got)
		}
	}
	plain := newReq(get("k"))
	c.Submit("n3", plain)
	c.DeliverAll()
	if got := answers(c, plain.ID); string(got["n3"].Bytes) != "b" {
		t.Fatalf("plain read answered %v, want \"b\"", got)
	}
}

// TestNestedWriteOnce: copies of a nested write sent to every node, before
// and after it executed, apply it once and get the same answer.
func TestNestedWriteOnce(t *testing.T) {
	c := cluster(t, nil, nil)
	inc := nestedReq(5, service.Op{Kind: "incr", Key: "n", Args: [][]byte{[]byte("1")}})
	c.Submit("n2", inc)
	c.Submit("n3", inc)
	c.DeliverAll()
	for _, at := range []automaton.NodeID{"n1", "n2", "n3"} {
		c.Submit(at, inc)
		c.DeliverAll()
		if got := answers(c, inc.ID)[at]; got.Int != 1 {
			t.Fatalf("copy at %s answered %v, want 1", at, got)
		}
	}
	r := newReq(get("n"))
	c.Submit("n1", r)
	c.DeliverAll()
	if got := answers(c, r.ID); string(got["n1"].Bytes) != "1" {
		t.Fatalf("n = %v after copies of one nested increment", got)
	}
}

// TestNestedCodec: the mark survives a forwarded request; without it the
// bytes are the old ones.
func TestNestedCodec(t *testing.T) {
	req := nestedReq(3, get("k"))
	m, err := unmarshal((&message{Kind: kindForward, Req: req}).marshal())
	if err != nil || !m.Req.Nested {
		t.Fatalf("forward: %+v %v", m, err)
	}
	plain := req
	plain.Nested = false
	a, b := (&message{Kind: kindForward, Req: plain}).marshal(), (&message{Kind: kindForward, Req: req}).marshal()
	if len(a) != len(b) || string(a) == string(b) {
		t.Fatalf("the mark is not one flag bit: %x vs %x", a, b)
	}
	if c, err := automaton.CapabilitiesOf(Name); err != nil || c.NestedWindow != nestedWindow || !automaton.ServesNested(Name) {
		t.Fatalf("pbpaxos declares nested window %d (%v)", c.NestedWindow, err)
	}
}
