package blocking

import (
	"testing"

	"github.com/synod-dev/synod/internal/fuzzcheck"
)

var codecs = []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return unmarshal(b) }, func(x any) []byte { m := x.(message); return m.marshal() }),
	fuzzcheck.New("ballot-record", func(b []byte) (any, error) { return unmarshalBallot(b) }, func(x any) []byte { return marshalBallot(x.(Ballot)) }),
	fuzzcheck.New("view-record", func(b []byte) (any, error) { return unmarshalView(b) }, func(x any) []byte { return x.(viewRecord).marshal() }),
	fuzzcheck.New("kentry-record", func(b []byte) (any, error) { return unmarshalKEntry(b) }, func(x any) []byte { return marshalKEntry(x.(kentry)) }),
	fuzzcheck.New("snap-record", func(b []byte) (any, error) { return unmarshalSnap(b) }, func(x any) []byte { return marshalSnap(x.([]kentry)) }),
}

// FuzzCodecs fuzzes every message and record decoder of the package (see
// fuzzcheck.Check), seeded with the encodings in golden/wire.txt.
func FuzzCodecs(f *testing.F) {
	fuzzcheck.Decoders(f, fuzzcheck.GoldenSeeds(f, "golden/wire.txt"), codecs)
}
