package orcabcast

import (
	"flag"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/internal/fuzzcheck"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/service"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// wireCodecs are the package's message and records: the golden test and
// the fuzz target run through them (fuzzcheck.Wire).
var wireCodecs = fuzzcheck.Wire{Golden: "golden/wire.txt", Codecs: []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return decodeMessage(b) }, func(x any) []byte { return x.(message).encode() }),
	fuzzcheck.New("update-record", func(b []byte) (any, error) {
		d, err := header.OpenRecord(b, "update")
		if err != nil {
			return nil, err
		}
		x := decodeEntry(d)
		return x, d.Done()
	}, func(x any) []byte { return encodeEntryRecord(x.(entry)) }),
	fuzzcheck.New("snapshot-record", func(b []byte) (any, error) {
		d, err := header.OpenRecord(b, "snapshot")
		if err != nil {
			return nil, err
		}
		s := decodeSnapshot(d)
		return s, d.Done()
	}, func(x any) []byte { return encodeSnapRecord(x.(snapshot)) }),
}}

// TestWireGolden: one message of each kind and both records encode to the
// bytes in golden/wire.txt (wire and disk compatibility) and decode back.
// A message is pinned as its kind's fields carry it (the sample sets
// every field; the encoder writes those of the kind).
func TestWireGolden(t *testing.T) {
	x := entry{seq: 7, origin: "n2", req: automaton.Request{ID: automaton.RequestID{Client: 3, Seq: 4},
		Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}}}
	s := snapshot{seq: 9, state: []byte("state"), dedup: orca.Dedup{3: {Seq: 4, Res: service.OK()}}, blocked: []entry{x}}
	samples := []fuzzcheck.Sample{fuzzcheck.Pin("update-record", "update-record", x), fuzzcheck.Pin("snapshot-record", "snapshot-record", s)}
	for k := byte(1); k <= kNack; k++ {
		m, err := decodeMessage(message{kind: k, bal: 4, n: 5, c: 3, x: x, xs: []entry{x, x}, hasSnap: true, snap: s}.encode())
		if err != nil {
			t.Fatalf("kind %s: %v", header.KindName(k), err)
		}
		samples = append(samples, fuzzcheck.Pin(header.KindName(k), "message", m))
	}
	wireCodecs.Check(t, *updateWire, samples)
}

// FuzzCodecs fuzzes every message and record decoder of the package (see
// fuzzcheck.Check), seeded with the encodings in golden/wire.txt.
func FuzzCodecs(f *testing.F) { wireCodecs.Fuzz(f) }
