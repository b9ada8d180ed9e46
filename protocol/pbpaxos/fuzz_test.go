package pbpaxos

import (
	"testing"

	"github.com/synod-dev/synod/internal/fuzzcheck"
)

// snapRec is the snapshot record's fields, for the fuzz codec table.
type snapRec struct {
	I     uint64
	P     pn
	State []byte
}

var codecs = []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return unmarshal(b) }, func(x any) []byte { return x.(*message).marshal() }),
	fuzzcheck.New("commands", func(b []byte) (any, error) { return decodeCmds(b) }, func(x any) []byte { return encodeCmds(x.([]cmd)) }),
	fuzzcheck.New("promise-record", func(b []byte) (any, error) { return decodeBallotRec(b) }, func(x any) []byte { return encodeBallotRec(x.(Ballot)) }),
	fuzzcheck.New("commit-record", func(b []byte) (any, error) { return decodeUintRec(b) }, func(x any) []byte { return encodeUintRec(x.(uint64)) }),
	fuzzcheck.New("slot-record", func(b []byte) (any, error) { return decodeSlotRec(b) }, func(x any) []byte { return encodeSlotRec(x.(*slot)) }),
	fuzzcheck.New("snap-record", func(b []byte) (any, error) {
		i, p, s, err := decodeSnapRec(b)
		return snapRec{i, p, s}, err
	}, func(x any) []byte { r := x.(snapRec); return encodeSnapRec(r.I, r.P, r.State) }),
}

// FuzzCodecs fuzzes every message and record decoder of the package (see
// fuzzcheck.Check), seeded with the encodings in golden/wire.txt.
func FuzzCodecs(f *testing.F) {
	fuzzcheck.Decoders(f, fuzzcheck.GoldenSeeds(f, "golden/wire.txt"), codecs)
}
