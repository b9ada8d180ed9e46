package orcaprimary

import (
	"flag"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/internal/fuzzcheck"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/service"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// wireCodecs are the package's message and object record: the golden test
// and the fuzz target run through them (fuzzcheck.Wire).
var wireCodecs = fuzzcheck.Wire{Golden: "golden/wire.txt", Codecs: []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return decodeMessage(b) }, func(x any) []byte { return x.(message).encode() }),
	fuzzcheck.New("object-record", func(b []byte) (any, error) {
		d, err := header.OpenRecord(b, "object")
		if err != nil {
			return nil, err
		}
		r := decodeRecord(d)
		return r, d.Done()
	}, func(x any) []byte { return x.(record).encode() }),
}}

// TestWireGolden: one message of each kind and an object record encode to
// the bytes in golden/wire.txt (wire and disk compatibility) and decode
// back. A message is pinned as its kind's fields carry it (the sample
// below sets every field; the encoder writes those of the kind).
func TestWireGolden(t *testing.T) {
	req := automaton.Request{ID: automaton.RequestID{Client: 3, Seq: 4}, Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}}
	r := record{version: 2, state: []byte("state"), copies: []automaton.NodeID{"n1", "n2"},
		dedup: orca.Dedup{3: {Seq: 4, Res: service.OK()}}, inflight: &req, epoch: 1}
	samples := []fuzzcheck.Sample{fuzzcheck.Pin("object-record", "object-record", r)}
	for k := byte(1); k <= kMigrated; k++ {
		m, err := decodeMessage(message{kind: k, key: "k", version: 2, nonce: 1, has: true, req: req, res: service.Int(5), state: r.encode(), origin: "n3"}.encode())
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
