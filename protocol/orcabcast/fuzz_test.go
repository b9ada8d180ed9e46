package orcabcast

import (
	"testing"

	"github.com/synod-dev/synod/internal/fuzzcheck"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/service"
)

var codecs = []fuzzcheck.Codec{
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
}

// seeds are one message of each kind and both records.
func seeds() [][]byte {
	x := entry{seq: 7, origin: "n2", req: automaton.Request{ID: automaton.RequestID{Client: 3, Seq: 4},
		Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}}}
	s := snapshot{seq: 9, state: []byte("state"), dedup: orca.Dedup{3: {Seq: 4, Res: service.OK()}}, blocked: []entry{x}}
	out := [][]byte{encodeEntryRecord(x), encodeSnapRecord(s)}
	for k := byte(1); k <= kNack; k++ {
		out = append(out, message{kind: k, bal: 4, n: 5, c: 3, x: x, xs: []entry{x, x}, hasSnap: true, snap: s}.encode())
	}
	return out
}

// FuzzCodecs fuzzes every message and record decoder of the package (see
// fuzzcheck.Check).
func FuzzCodecs(f *testing.F) { fuzzcheck.Decoders(f, seeds(), codecs) }
