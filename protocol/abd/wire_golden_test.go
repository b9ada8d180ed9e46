package abd

import (
	"flag"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/internal/fuzzcheck"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// wireCodecs are the package's messages and records: the golden test and
// the fuzz target run through them (fuzzcheck.Wire).
var wireCodecs = fuzzcheck.Wire{Golden: "golden/wire.txt", Codecs: []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return unmarshal(b) }, func(x any) []byte { m := x.(message); return m.marshal() }),
	// kindBatch: one step's messages to one peer, as Step coalesces them.
	fuzzcheck.New("batch", func(b []byte) (any, error) {
		parts, err := header.SplitBatch(b, kindBatch)
		if err != nil {
			return nil, err
		}
		ms := make([]message, len(parts))
		for i, p := range parts {
			if ms[i], err = unmarshal(p); err != nil {
				return nil, err
			}
		}
		return ms, nil
	}, func(x any) []byte {
		var out []automaton.Output
		for _, m := range x.([]message) {
			out = append(out, automaton.Send{To: "n2", Msg: m.marshal()})
		}
		return header.Coalesce(out, kindBatch)[0].(automaton.Send).Msg
	}),
	fuzzcheck.New("entry-record", func(b []byte) (any, error) { return unmarshalEntry(b) }, func(x any) []byte { return x.(entry).marshal() }),
}}

// FuzzCodecs fuzzes every message and record decoder of the package (see
// fuzzcheck.Check), seeded with the encodings in golden/wire.txt.
func FuzzCodecs(f *testing.F) { wireCodecs.Fuzz(f) }

// TestWireGolden: every message kind and the register record encode to the
// bytes recorded in golden/wire.txt before the codec moved onto
// protocol/proto's header (wire and disk compatibility), and decode back to
// what was encoded.
func TestWireGolden(t *testing.T) {
	tag := Tag{TS: 7, Node: "n2", Seq: 300}
	query := message{Kind: kindQuery, Op: 1, Key: "k"}
	storeAck := message{Kind: kindStoreAck, Op: 3}
	msg := func(name string, m message) fuzzcheck.Sample { return fuzzcheck.Pin(name, "message", m) }
	wireCodecs.Check(t, *updateWire, []fuzzcheck.Sample{
		msg("query", query),
		msg("query-reply", message{Kind: kindQueryReply, Op: 2, Key: "k", Tag: tag, Value: []byte("v")}),
		msg("store", message{Kind: kindStore, Op: 129, Key: "key", Tag: tag, Tomb: true}),
		msg("store-ack", storeAck),
		// kindBatch (added after version 1's four kinds, whose bytes
		// above are unchanged): a query and a store-ack to one peer.
		fuzzcheck.Pin("batch", "batch", []message{query, storeAck}),
		fuzzcheck.Pin("entry-record", "entry-record", entry{Tag: tag, Value: []byte("value")}),
		// kindQueryAbove (added after kindBatch; the bytes above are
		// unchanged): the coordinator's highest tag, and a write's flag.
		msg("query-above", message{Kind: kindQueryAbove, Op: 4, Key: "k", Tag: tag, Writes: true}),
	})
}
