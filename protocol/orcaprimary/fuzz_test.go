package orcaprimary

import (
	"testing"

	"github.com/synod-dev/synod/internal/fuzzcheck"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/service"
)

var codecs = []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return decodeMessage(b) }, func(x any) []byte { return x.(message).encode() }),
	fuzzcheck.New("object-record", func(b []byte) (any, error) {
		d, err := header.OpenRecord(b, "object")
		if err != nil {
			return nil, err
		}
		r := decodeRecord(d)
		return r, d.Done()
	}, func(x any) []byte { return x.(record).encode() }),
}

// seeds are one message of each kind and an object record.
func seeds() [][]byte {
	req := automaton.Request{ID: automaton.RequestID{Client: 3, Seq: 4}, Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}}
	r := record{version: 2, state: []byte("state"), copies: []automaton.NodeID{"n1", "n2"},
		dedup: orca.Dedup{3: {Seq: 4, Res: service.OK()}}, inflight: &req, epoch: 1}
	out := [][]byte{r.encode()}
	for k := byte(1); k <= kMigrated; k++ {
		out = append(out, message{kind: k, key: "k", version: 2, nonce: 1, has: true, req: req, res: service.Int(5), state: r.encode(), origin: "n3"}.encode())
	}
	return out
}

// FuzzCodecs fuzzes every message and record decoder of the package (see
// fuzzcheck.Check).
func FuzzCodecs(f *testing.F) { fuzzcheck.Decoders(f, seeds(), codecs) }
