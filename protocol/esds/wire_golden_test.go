package esds

import (
	"flag"
	"fmt"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/internal/fuzzcheck"
	"github.com/synod-dev/synod/service"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// wireCodecs are the package's messages and records: the golden test and
// the fuzz target run through them (fuzzcheck.Wire).
var wireCodecs = fuzzcheck.Wire{Golden: "golden/wire.txt", Codecs: []fuzzcheck.Codec{
	fuzzcheck.New("message", unmarshalSample, func(x any) []byte { m := x.(message); return m.marshal() }),
	// An operation's record o/<id> (store.go): its entry, as recovery
	// reads it.
	fuzzcheck.New("op-record", func(b []byte) (any, error) {
		d, err := recHeader.OpenRecord(b, "operation")
		if err != nil {
			return nil, err
		}
		x := decodeEntry(d, new(service.OpDecoder), 0)
		return x, d.Done()
	}, func(x any) []byte {
		e := recHeader.Record(64)
		y := x.(entry)
		encodeEntry(&e, &y)
		return e.B
	}),
}}

// FuzzCodecs fuzzes every message and record decoder of the package (see
// fuzzcheck.Check), seeded with the encodings in golden/wire.txt.
func FuzzCodecs(f *testing.F) { wireCodecs.Fuzz(f) }

// TestWireGolden: the messages and the operation record encode to the
// bytes recorded in golden/wire.txt before the codec moved onto
// protocol/proto's header (wire and disk compatibility), and decode back to
// what was encoded.
func TestWireGolden(t *testing.T) {
	sop := service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}
	entries := []entry{
		{ID: "a", Prev: []string{"p1", "p2"}, Strict: true, Op: sop, Flags: flagDone | flagSolid, Label: Label{C: 3, R: 1, Set: true}},
		{ID: "b", Flags: flagGone},
		{ID: "c", Flags: flagDone | flagBare, Label: Label{C: 200, R: 0, Set: true}},
		{ID: "d", Op: sop},
	}
	aut, err := protocol{Capabilities: capabilities("esds", optParams, "")}.New(automaton.Config{Self: "n2", Nodes: []automaton.NodeID{"n1", "n2", "n3"}, Service: service.KV{}})
	if err != nil {
		t.Fatal(err)
	}
	a := aut.(*ESDS)
	o := &op{id: "x", prev: []string{"w"}, sop: sop, label: Label{C: 4, R: 1, Set: true}, solid: a.bit()}
	msg := func(name string, m message) fuzzcheck.Sample { return fuzzcheck.Pin(name, "message", m) }
	wireCodecs.Check(t, *updateWire, []fuzzcheck.Sample{
		msg("stream", message{Kind: kindStream, Inc: 99, Removed: 4, Stream: 7, From: 10, To: 13, AckStream: 5, AckSeq: 300, Entries: entries}),
		msg("stream-empty", message{Kind: kindStream, Inc: 1, Stream: 1, From: 1, To: 0}),
		msg("full", message{Kind: kindFull, Inc: 2, Entries: entries[:2]}),
		msg("request", message{Kind: kindRequest, Inc: 3, Entries: []entry{{ID: "a", Prev: []string{"p1"}, Strict: true, Op: sop}}}),
		msg("response", message{Kind: kindResponse, Inc: 4, Entries: []entry{{ID: "a", Flags: flagGone}}, Value: service.Bytes([]byte("v"))}),
		msg("reserve", message{Kind: kindReserve, Inc: 5, Removed: 2, Seq: 9}),
		msg("grant", message{Kind: kindGrant, Inc: 6, Seq: 9}),
		msg("reject", message{Kind: kindReject, Inc: 6, Seq: 10}),
		msg("initiate", message{Kind: kindInitiate, Inc: 5, Seq: 9, Inner: (&message{Kind: kindFull, Inc: 5, Entries: entries[:1]}).marshal()}),
		msg("done", message{Kind: kindDone, Inc: 6, Seq: 9, AckStream: 7, AckSeq: 12}),
		// What marshalOp writes for o.
		fuzzcheck.Pin("op-record", "op-record", a.entryOf(o)),
	})
}

// unmarshalSample is unmarshal for the samples: each entry's record key
// (idStrings) must be recOp+ID, and is then cleared, being no part of what
// was encoded.
func unmarshalSample(b []byte) (any, error) {
	m, err := unmarshal(b)
	for i := range m.Entries {
		x := &m.Entries[i]
		if x.rkey != recOp+x.ID {
			return nil, fmt.Errorf("entry %d: record key %q for id %q", i, x.rkey, x.ID)
		}
		x.rkey = ""
	}
	return m, err
}

// TestStreamIDsOneAllocation: a stream message's entry ids (and their
// record keys) are cut from one string (idStrings), not one allocation per
// entry: 64 bare entries decode in at most 3 allocations (the entries and
// one string of ids); one string per id made it 66 (fails on the old code).
func TestStreamIDsOneAllocation(t *testing.T) {
	m := message{Kind: kindStream, Inc: 1, Stream: 1, From: 1, To: 64}
	for i := range 64 {
		m.Entries = append(m.Entries, entry{ID: AssignedOpID(automaton.RequestID{Client: 7, Seq: uint64(i + 1)}),
			Flags: flagDone | flagBare, Label: Label{C: uint64(i + 1), Set: true}})
	}
	b := m.marshal()
	got := testing.AllocsPerRun(20, func() {
		if _, err := unmarshal(b); err != nil {
			t.Fatal(err)
		}
	})
	if got > 3 {
		t.Errorf("unmarshal of a stream message of 64 entries: %.0f allocations, want at most 3", got)
	}
	d, err := unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range d.Entries {
		if x.ID != m.Entries[i].ID || x.rkey != recOp+x.ID {
			t.Fatalf("entry %d: id %q key %q, want %q", i, x.ID, x.rkey, m.Entries[i].ID)
		}
	}
}
