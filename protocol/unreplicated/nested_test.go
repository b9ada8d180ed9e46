package unreplicated

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// nested submits a nested request at node at and returns its latest answer.
func nested(t *testing.T, c interface {
	Submit(automaton.NodeID, automaton.Request) []automaton.Output
	DeliverAll() int
	Response(automaton.RequestID) (service.Result, bool)
}, at automaton.NodeID, client, seq uint64, o service.Op) service.Result {
	t.Helper()
	id := automaton.RequestID{Client: client, Seq: seq}
	c.Submit(at, automaton.Request{ID: id, Op: o, Nested: true})
	c.DeliverAll()
	r, ok := c.Response(id)
	if !ok {
		t.Fatalf("nested %v %v at %s: no answer", id, o, at)
	}
	return r
}

// Copies of one nested id, at the server and through forwarders, apply
// once and get the first answer, reads included; an older id of the same
// client gets an error that is not retryable.
func TestNestedCopiesApplyOnce(t *testing.T) {
	c := newCluster(t, Name, nil)
	for _, at := range []automaton.NodeID{"n2", "n1", "n3", "n2"} {
		if r := nested(t, c, at, 7, 1, op("incr", "n", "1")); r.Int != 1 {
			t.Fatalf("copy of nested incr at %s answered %v, want 1 (applied once)", at, r)
		}
	}
	if r := nested(t, c, "n3", 8, 1, op("get", "n")); string(r.Bytes) != "1" {
		t.Fatalf("nested read: %v", r)
	}
	do(t, c, "n1", op("set", "n", "changed"))
	for _, at := range []automaton.NodeID{"n1", "n2"} {
		if r := nested(t, c, at, 8, 1, op("get", "n")); string(r.Bytes) != "1" {
			t.Fatalf("copy of the nested read at %s answered %v after the key changed, want the first answer \"1\"", at, r)
		}
	}
	if r := do(t, c, "n2", op("get", "n")); string(r.Bytes) != "changed" {
		t.Fatalf("plain read: %v", r)
	}
	nested(t, c, "n1", 7, 2, op("incr", "m", "1"))
	r := nested(t, c, "n2", 7, 1, op("incr", "n", "1"))
	if !r.IsErr() || !strings.Contains(r.Err, "older than its client's latest") || automaton.RetryableAnswer(r.Err) {
		t.Fatalf("an older id answered %v, want a non-retryable error", r)
	}
}

// With the records alone (every write's and the snapshot's), a restarted
// server answers copies of nested ids executed before the crash from the
// table, and applies nothing again: through the write records and through
// a snapshot that covers them.
func TestNestedTableSurvivesRestart(t *testing.T) {
	for _, every := range []string{"100", "2"} {
		c := newCluster(t, Name, map[string]string{"snapshot_every": every})
		nested(t, c, "n2", 7, 1, op("append", "k", "a"))
		nested(t, c, "n1", 8, 1, op("get", "k"))
		nested(t, c, "n3", 9, 1, op("append", "k", "b"))
		do(t, c, "n1", op("append", "k", "c"))
		c.Restart("n1")
		if _, ok := c.Disk("n1")[snapKey]; ok != (every == "2") {
			t.Fatalf("snapshot_every=%s: snapshot present %v", every, ok)
		}
		if r := nested(t, c, "n3", 7, 1, op("append", "k", "a")); r.Int != 1 {
			t.Fatalf("snapshot_every=%s: copy of 7:1 after restart answered %v, want 1", every, r)
		}
		if r := nested(t, c, "n2", 8, 1, op("get", "k")); string(r.Bytes) != "a" {
			t.Fatalf("snapshot_every=%s: copy of the nested read after restart answered %v, want \"a\"", every, r)
		}
		if r := nested(t, c, "n1", 9, 1, op("append", "k", "b")); r.Int != 2 {
			t.Fatalf("snapshot_every=%s: copy of 9:1 after restart answered %v, want 2", every, r)
		}
		if r := do(t, c, "n2", op("get", "k")); string(r.Bytes) != "abc" {
			t.Fatalf("snapshot_every=%s: k = %v after the copies, want \"abc\" (nothing applied twice)", every, r)
		}
	}
}

// A record with a nested outcome decodes to what was encoded; records
// without one keep their bytes (the wire golden pins those).
func TestNestedRecordCodec(t *testing.T) {
	r := writeRecord{Op: op("get", "k"), Nested: &nestedTrailer{ID: automaton.RequestID{Client: 1 << 63, Seq: 5},
		Result: service.Result{Type: service.ResultBytes, Bytes: []byte("v")}}}
	got, err := unmarshalWrite(r.marshal())
	if err != nil || got.Nested == nil || got.Nested.ID != r.Nested.ID || string(got.Nested.Result.Bytes) != "v" || got.Envs != nil {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	g := writeRecord{Ops: []service.Op{op("set", "a", "1"), op("set", "b", "2")}, Nested: &nestedTrailer{ID: automaton.RequestID{Client: 3, Seq: 4},
		Result: service.OK(), Results: []service.Result{service.OK(), service.OK()}}}
	if got, err := unmarshalWrite(g.marshal()); err != nil || len(got.Ops) != 2 || got.Nested == nil || len(got.Nested.Results) != 2 {
		t.Fatalf("group round trip: %+v, %v", got, err)
	}
	tab := map[uint64]nestedEntry{9: {seq: 2, result: service.Result{Type: service.ResultInt, Int: 4}}}
	_, _, back, err := unmarshalSnap(marshalSnap(3, []byte("state"), tab))
	if err != nil || back[9].seq != 2 || back[9].result.Int != 4 {
		t.Fatalf("snapshot table round trip: %v, %v", back, err)
	}
}
