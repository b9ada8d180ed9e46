package paxos

import (
	"testing"

	"github.com/synod-dev/synod/internal/fuzzcheck"
)

var codecs = []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return unmarshal(b) }, func(x any) []byte { return x.(*message).marshal() }),
	fuzzcheck.New("batch", func(b []byte) (any, error) { return decodeBatch(b) }, func(x any) []byte { return encodeBatch(x.([]cmd)) }),
	fuzzcheck.New("slot-record", func(b []byte) (any, error) { return decodeSlot(b) }, func(x any) []byte { return encodeSlot(x.(*slot)) }),
	fuzzcheck.New("uint-record", func(b []byte) (any, error) { return decodeUint(b) }, func(x any) []byte { return encodeUint(x.(uint64)) }),
	fuzzcheck.New("ballot-record", func(b []byte) (any, error) { return unmarshalBallotRec(b) }, func(x any) []byte { return encodeBallotRec(x.(Ballot)) }),
}

// FuzzCodecs fuzzes every message and record decoder of the package (see
// fuzzcheck.Check), seeded with the encodings in golden/wire.txt.
func FuzzCodecs(f *testing.F) {
	fuzzcheck.Decoders(f, fuzzcheck.GoldenSeeds(f, "golden/wire.txt"), codecs)
}
