package fastpaxos

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

func setReq(client, seq, low uint64, v string) automaton.Request {
	return automaton.Request{ID: automaton.RequestID{Client: client, Seq: seq}, Unanswered: low,
		Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte(v)}}}
}

// The table keeps what a retry can still ask for and forgets a closed
// client (machine.go, session 51): 100 writes telling their bound leave one
// outcome (64 without it: the window, as before); a retry of a forgotten
// write is refused and of the latest answered its first outcome; after
// SessionEnd the row is gone and every later write under the id is
// refused; the value never changes behind the client's back. Fails on the
// old machine (the bound ignored: 64 outcomes; SessionEnd recorded as a
// write: the row stays).
func TestMachineSessions(t *testing.T) {
	m := newMachine(service.KV{})
	i := uint64(0)
	apply := func(r automaton.Request) service.Result { i++; return m.apply(r, i) }
	for s := uint64(1); s <= 100; s++ {
		apply(setReq(1, s, 0, "old"))
		apply(setReq(2, s, s, fmt.Sprint("v", s)))
	}
	if a, b := len(m.clients[1].Seqs), len(m.clients[2].Seqs); a != dedupWindow || b != 1 {
		t.Fatalf("outcomes: %d without the bound (want %d), %d with it (want 1)", a, dedupWindow, b)
	}
	get := func() string { return string(apply(automaton.Request{Op: service.Op{Kind: "get", Key: "k"}}).Bytes) }
	if r := apply(setReq(2, 50, 50, "again")); !strings.Contains(r.Err, "not executed") {
		t.Fatalf("a retry of forgotten write 50 = %v, want refused", r)
	}
	if r := apply(setReq(2, 100, 100, "again")); r.Type != service.ResultOK || get() != "v100" {
		t.Fatalf("a retry of the latest write = %v, k = %q: want its first outcome, k unchanged", r, get())
	}
	end := automaton.Request{ID: automaton.RequestID{Client: 2, Seq: 101}, Op: automaton.SessionEnd()}
	if r := apply(end); r.Type != service.ResultOK {
		t.Fatalf("session end = %v", r)
	}
	if _, ok := m.clients[2]; ok || len(m.closed) != 1 || len(m.clients) != 1 {
		t.Fatalf("after the session end: %d rows (client 2's: %v), %d tombstones", len(m.clients), ok, len(m.closed))
	}
	for _, r := range []automaton.Request{setReq(2, 102, 102, "late"), setReq(2, 100, 100, "late"), setReq(2, 100, 0, "late")} {
		if res := apply(r); !strings.Contains(res.Err, "session ended") {
			t.Fatalf("%v after the session ended = %v, want refused", r.ID, res)
		}
	}
	if r := apply(end); r.Type != service.ResultOK || len(m.closed) != 1 {
		t.Fatalf("a second copy of the session end = %v, %d tombstones", r, len(m.closed))
	}
	if v := get(); v != "v100" {
		t.Fatalf("k = %q, want v100: a refused write ran", v)
	}
}

// A request's bound travels with it (votes, proposals, catch-up, the
// records) and a request without one is encoded as before.
func TestRequestBoundEncoding(t *testing.T) {
	for _, r := range []automaton.Request{setReq(9, 7, 0, "x"), setReq(9, 7, 7, "x"), setReq(9, 7, 3, "x"), setReq(9, 7, 12, "x")} {
		got, ok, err := decodeValue(encodeValue(r))
		want := min(r.Unanswered, r.ID.Seq)
		if err != nil || !ok || got.ID != r.ID || got.Unanswered != want || got.Op.Kind != "set" {
			t.Fatalf("%+v decoded as %+v, %v, %v; want Unanswered %d", r, got, ok, err, want)
		}
	}
	r := setReq(9, 7, 0, "x")
	old := wire.Encoder{}
	old.Byte(msgVersion)
	old.Byte(valCmd)
	old.Uvarint(r.ID.Client)
	old.Uvarint(r.ID.Seq)
	old.Byte(byte(r.Opts.Read))
	service.EncodeOp(&old, r.Op)
	if !bytes.Equal(encodeValue(r), old.B) {
		t.Fatal("a request without a bound is not encoded as before")
	}
}

// On a cluster: a client's writes fanned out to every node, then its
// session end; every replica drops the row, and a late copy of a write is
// refused everywhere.
func TestSessionEndOnEveryReplica(t *testing.T) {
	c := cluster(t, Name, 4, "n1")
	send := func(r automaton.Request) automaton.RequestID {
		r.Fanout = true
		for _, n := range all4 {
			c.Submit(n, r)
		}
		c.DeliverAll()
		return r.ID
	}
	for s := uint64(1); s <= 5; s++ {
		send(setReq(5, s, s, fmt.Sprint("v", s)))
	}
	for _, n := range all4 {
		if s := node(c, n).sm.clients[5]; s == nil || len(s.Seqs) != 1 {
			t.Fatalf("%s: client 5's row %+v, want one outcome", n, s)
		}
	}
	id := send(automaton.Request{ID: automaton.RequestID{Client: 5, Seq: 6}, Op: automaton.SessionEnd()})
	if rs := c.Responses(id); len(rs) == 0 || rs[0].Type != service.ResultOK {
		t.Fatalf("session end answered %v", rs)
	}
	before := len(c.Responses(automaton.RequestID{Client: 5, Seq: 5}))
	late := send(setReq(5, 5, 5, "late"))
	for _, n := range all4 {
		a := node(c, n)
		if _, ok := a.sm.clients[5]; ok || len(a.sm.closed) != 1 {
			t.Fatalf("%s: client 5's row still there (%v) or %d tombstones", n, ok, len(a.sm.closed))
		}
	}
	rs := c.Responses(late)[before:]
	if len(rs) == 0 {
		t.Fatal("the late copy of write 5 was not answered")
	}
	for _, r := range rs {
		if !strings.Contains(r.Err, "session ended") {
			t.Fatalf("a late copy of write 5 answered %v, want refused", r)
		}
	}
}
