package fastpaxos

import (
	"testing"

	"github.com/synod-dev/synod/internal/fuzzcheck"

	"github.com/synod-dev/synod/automaton"
)

// value is a decoded log value, for the fuzz codec table.
type value struct {
	Req automaton.Request
	Cmd bool
}

var codecs = []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return unmarshal(b) }, func(x any) []byte { return x.(*message).marshal() }),
	fuzzcheck.New("value", func(b []byte) (any, error) {
		r, ok, err := decodeValue(b)
		return value{r, ok}, err
	}, func(x any) []byte {
		if !x.(value).Cmd {
			return noop
		}
		return encodeValue(x.(value).Req)
	}),
	fuzzcheck.New("promise-record", func(b []byte) (any, error) { return decodeBallotRec(b) }, func(x any) []byte { return encodeBallotRec(x.(Ballot)) }),
	fuzzcheck.New("instance-record", func(b []byte) (any, error) { return decodeInst(b) }, func(x any) []byte { return encodeInst(x.(*inst)) }),
	fuzzcheck.New("learned-record", func(b []byte) (any, error) { return decodeLearnRec(b) }, func(x any) []byte { return encodeLearnRec(x.([]byte)) }),
}

// FuzzCodecs fuzzes every message and record decoder of the package (see
// fuzzcheck.Check), seeded with the encodings in golden/wire.txt.
func FuzzCodecs(f *testing.F) {
	fuzzcheck.Decoders(f, fuzzcheck.GoldenSeeds(f, "golden/wire.txt"), codecs)
}
