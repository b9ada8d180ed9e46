package eve

import (
	"testing"

	"github.com/synod-dev/synod/internal/fuzzcheck"
)

var codecs = []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return unmarshal(b) }, func(x any) []byte { return x.(*message).marshal() }),
	fuzzcheck.New("dups", func(b []byte) (any, error) { return decodeDups(b) }, func(x any) []byte {
		return (&replica{dups: x.(map[uint64]dupEntry)}).encodeDups()
	}),
}

// FuzzCodecs fuzzes every message and record decoder of the package (see
// fuzzcheck.Check), seeded with the encodings in golden/wire.txt.
func FuzzCodecs(f *testing.F) {
	fuzzcheck.Decoders(f, fuzzcheck.GoldenSeeds(f, "golden/wire.txt"), codecs)
}
