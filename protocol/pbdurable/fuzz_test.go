package pbdurable

import (
	"flag"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/internal/fuzzcheck"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// wireCodecs are the package's messages: the golden test and the fuzz
// target run through them (fuzzcheck.Wire).
var wireCodecs = fuzzcheck.Wire{Golden: "golden/wire.txt", Codecs: []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return decode(b) }, func(x any) []byte { return x.(msg).encode() }),
}}

// TestWireGolden: one message of each kind encodes to the bytes in
// golden/wire.txt (wire compatibility) and decodes back. A message is
// pinned as its kind's fields carry it (the sample sets every field).
func TestWireGolden(t *testing.T) {
	var samples []fuzzcheck.Sample
	for k := byte(1); int(k) <= len(header.Kinds); k++ {
		m, err := decode(msg{kind: k, view: proto.Ballot{Round: 2, Node: 1}, index: 9, commit: 7, db: true, state: []byte("state"),
			ups: []durability.Update{{Object: "c", Method: "inc", State: []byte("s")}},
			id:  automaton.RequestID{Client: 3, Seq: 4}, op: service.Op{Kind: "incr", Key: "k"}, res: service.Int(5)}.encode())
		if err != nil {
			t.Fatalf("kind %s: %v", header.KindName(k), err)
		}
		samples = append(samples, fuzzcheck.Pin(header.KindName(k), "message", m))
	}
	wireCodecs.Check(t, *updateWire, samples)
}

// FuzzCodecs fuzzes every message decoder of the package (see
// fuzzcheck.Check), seeded with the encodings in golden/wire.txt.
func FuzzCodecs(f *testing.F) { wireCodecs.Fuzz(f) }
