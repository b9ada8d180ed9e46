package pbdurable

import (
	"testing"

	"github.com/synod-dev/synod/internal/fuzzcheck"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

var codecs = []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return decode(b) }, func(x any) []byte { return x.(msg).encode() }),
}

// seeds are one message of each kind.
func seeds() [][]byte {
	var out [][]byte
	for k := byte(kindHeartbeat); k <= kindReply; k++ {
		out = append(out, msg{kind: k, view: proto.Ballot{Round: 2, Node: 1}, index: 9, commit: 7, db: true, state: []byte("state"),
			ups: []durability.Update{{Object: "c", Method: "inc", State: []byte("s")}},
			id:  automaton.RequestID{Client: 3, Seq: 4}, op: service.Op{Kind: "incr", Key: "k"}, res: service.Int(5)}.encode())
	}
	return out
}

// FuzzCodecs fuzzes every message and record decoder of the package (see
// fuzzcheck.Check).
func FuzzCodecs(f *testing.F) { fuzzcheck.Decoders(f, seeds(), codecs) }
