package pb

import (
	"testing"

	"github.com/synod-dev/synod/internal/fuzzcheck"

	"github.com/synod-dev/synod/protocol/proto"
)

var codecs = []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return unmarshal(b) }, func(x any) []byte { m := x.(message); return m.marshal() }),
	fuzzcheck.New("view-record", func(b []byte) (any, error) { return unmarshalViewRecord(b) }, func(x any) []byte { return x.(viewRecord).marshal() }),
	fuzzcheck.New("entry-record", func(b []byte) (any, error) { return unmarshalEntry(b) }, func(x any) []byte { return marshalEntry(x.(entry)) }),
	fuzzcheck.New("boot-record", func(b []byte) (any, error) { return unmarshalBoot(b) }, func(x any) []byte { return marshalBoot(x.(proto.Ballot)) }),
}

// FuzzCodecs fuzzes every message and record decoder of the package (see
// fuzzcheck.Check), seeded with the encodings in golden/wire.txt.
func FuzzCodecs(f *testing.F) {
	fuzzcheck.Decoders(f, fuzzcheck.GoldenSeeds(f, "golden/wire.txt"), codecs)
}
