package unreplicated

import (
	"testing"

	"github.com/synod-dev/synod/internal/fuzzcheck"
)

// snapRec is the snapshot record's two fields, for the fuzz codec table.
type snapRec struct {
	Index uint64
	State []byte
}

var codecs = []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return unmarshal(b) }, func(x any) []byte { m := x.(message); return m.marshal() }),
	fuzzcheck.New("write-record", func(b []byte) (any, error) { return unmarshalWrite(b) }, func(x any) []byte { return x.(writeRecord).marshal() }),
	fuzzcheck.New("snap-record", func(b []byte) (any, error) {
		i, s, err := unmarshalSnap(b)
		return snapRec{i, s}, err
	}, func(x any) []byte { return marshalSnap(x.(snapRec).Index, x.(snapRec).State) }),
}

// FuzzCodecs fuzzes the messages and both records (see fuzzcheck.Check).
func FuzzCodecs(f *testing.F) {
	fuzzcheck.Decoders(f, fuzzcheck.GoldenSeeds(f, "golden/wire.txt"), codecs)
}
