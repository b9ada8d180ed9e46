package pb

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/service"
)

func setReq(client, seq, low uint64, v string) automaton.Request {
	return automaton.Request{ID: automaton.RequestID{Client: client, Seq: seq}, Unanswered: low,
		Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte(v)}}}
}

var nodes3 = []automaton.NodeID{"n1", "n2", "n3"}

// Client sessions on a 3-node cluster (machine.go, package doc "Client
// sessions"): client 1's writes without their bound keep the window (64
// outcomes on every replica); client 2's, telling it and sent at a
// backup (forwarded), keep one; SessionEnd (at the other backup) removes
// client 2's row on every replica and leaves a tombstone; a retry of a
// forgotten write and every later write under the id are refused, not
// executed; the value never changes behind the client's back. Fails with
// the bound ignored (64 outcomes) or SessionEnd run as a write (refused
// by the service, the row kept).
func TestSessions(t *testing.T) {
	c := harness.New(t, harness.Options{Protocol: Name, Nodes: 3})
	send := func(at automaton.NodeID, r automaton.Request) service.Result {
		t.Helper()
		before := len(c.Responses(r.ID))
		c.Submit(at, r)
		c.DeliverAll()
		rs := c.Responses(r.ID)
		if len(rs) <= before {
			t.Fatalf("%v at %s: no answer", r.ID, at)
		}
		return rs[len(rs)-1]
	}
	for s := uint64(1); s <= 100; s++ {
		send("n1", setReq(1, s, 0, "old"))
		if r := send("n2", setReq(2, s, s, fmt.Sprint("v", s))); r.Type != service.ResultOK {
			t.Fatalf("write %d = %v", s, r)
		}
	}
	for _, n := range nodes3 {
		m := c.Node(n).(*PB).m
		if a, b := len(m.clients[1].Seqs), len(m.clients[2].Seqs); a != dedupWindow || b != 1 {
			t.Fatalf("%s: outcomes %d without the bound (want %d), %d with it (want 1)", n, a, dedupWindow, b)
		}
	}
	get := func() string {
		return string(send("n1", automaton.Request{ID: automaton.RequestID{Client: 9, Seq: 1}, Op: service.Op{Kind: "get", Key: "k"}}).Bytes)
	}
	if r := send("n1", setReq(2, 50, 50, "again")); !strings.Contains(r.Err, "not executed") {
		t.Fatalf("a retry of forgotten write 50 = %v, want refused", r)
	}
	if r := send("n3", setReq(2, 100, 100, "again")); r.Type != service.ResultOK || get() != "v100" {
		t.Fatalf("a retry of the latest write = %v, k = %q: want its first outcome, k unchanged", r, get())
	}
	end := automaton.Request{ID: automaton.RequestID{Client: 2, Seq: 101}, Op: automaton.SessionEnd()}
	if r := send("n3", end); r.Type != service.ResultOK {
		t.Fatalf("session end = %v", r)
	}
	for _, n := range nodes3 {
		m := c.Node(n).(*PB).m
		if _, ok := m.clients[2]; ok || len(m.closed) != 1 || len(m.clients) != 1 {
			t.Fatalf("%s after the session end: %d rows (client 2's: %v), %d tombstones", n, len(m.clients), ok, len(m.closed))
		}
	}
	for _, r := range []automaton.Request{setReq(2, 102, 102, "late"), setReq(2, 100, 100, "late"), setReq(2, 100, 0, "late")} {
		if res := send("n2", r); !strings.Contains(res.Err, "session ended") {
			t.Fatalf("%v after the session ended = %v, want refused", r.ID, res)
		}
	}
	applied := c.Node("n1").(*PB).m.applied
	if r := send("n2", end); r.Type != service.ResultOK || c.Node("n1").(*PB).m.applied != applied {
		t.Fatalf("a second copy of the session end = %v, entries %d -> %d", r, applied, c.Node("n1").(*PB).m.applied)
	}
	if v := get(); v != "v100" {
		t.Fatalf("k = %q, want v100: a refused write ran", v)
	}
	// The state image carries the tombstones (a joiner, a restart).
	m := c.Node("n2").(*PB).m
	back, err := decodeMachine(service.KV{}, m.encode())
	if err != nil || len(back.closed) != 1 || back.closed[2] != m.closed[2] || len(back.clients) != 1 {
		t.Fatalf("image round trip: %v, tombstones %v, rows %d", err, back.closed, len(back.clients))
	}
}

// The session fields travel with an entry (records, updates) and a
// forwarded request, and without them every encoding is as before.
func TestSessionEncoding(t *testing.T) {
	e := entry{index: 3, id: automaton.RequestID{Client: 4, Seq: 5}, payload: []byte("d"), out: outcome{res: service.OK()}}
	plain := marshalEntry(e)
	for _, x := range []entry{e, {index: 3, id: e.id, payload: []byte("d"), out: e.out, low: 5}, {index: 3, id: e.id, out: e.out, end: true}} {
		got, err := unmarshalEntry(marshalEntry(x))
		if err != nil || got.low != x.low || got.end != x.end || got.id != x.id {
			t.Fatalf("entry %+v decoded as %+v, %v", x, got, err)
		}
		m := message{Kind: kindUpdate, Index: x.index, ID: x.id, Payload: x.payload, Out: x.out, Low: x.low, End: x.end}
		gm, err := unmarshal(m.marshal())
		if err != nil || gm.Low != x.low || gm.End != x.end {
			t.Fatalf("update %+v decoded as %+v, %v", m, gm, err)
		}
	}
	old := recordHeader.Record(32)
	old.Uvarint(e.index)
	old.Uvarint(e.id.Client)
	old.Uvarint(e.id.Seq)
	old.Bool(e.full)
	old.Bytes(e.payload)
	encodeOutcome(&old, e.out)
	if !bytes.Equal(plain, old.B) {
		t.Fatal("an entry without session fields is not encoded as before")
	}
	f := message{Kind: kindForward, Req: setReq(4, 9, 7, "x")}
	gf, err := unmarshal(f.marshal())
	if err != nil || gf.Req.Unanswered != 7 {
		t.Fatalf("forward decoded as %+v, %v", gf.Req, err)
	}
	f.Req.Unanswered = 0
	nf := f.marshal()
	if gf, err := unmarshal(nf); err != nil || gf.Req.Unanswered != 0 || bytes.Contains(nf[len(nf)-1:], []byte{7}) {
		t.Fatalf("a forward without the bound: %+v, %v", gf.Req, err)
	}
}
