package abd

import (
	"testing"

	"github.com/synod-dev/synod/internal/fuzzcheck"
)

var codecs = []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return unmarshal(b) }, func(x any) []byte { m := x.(message); return m.marshal() }),
	fuzzcheck.New("entry-record", func(b []byte) (any, error) { return unmarshalEntry(b) }, func(x any) []byte { return x.(entry).marshal() }),
}

// FuzzCodecs fuzzes every message and record decoder of the package (see
// fuzzcheck.Check), seeded with the encodings in golden/wire.txt.
func FuzzCodecs(f *testing.F) {
	fuzzcheck.Decoders(f, fuzzcheck.GoldenSeeds(f, "golden/wire.txt"), codecs)
}
