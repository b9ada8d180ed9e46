package esds

import (
	"testing"

	"github.com/synod-dev/synod/internal/fuzzcheck"

	"github.com/synod-dev/synod/service"
)

var codecs = []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return unmarshal(b) }, func(x any) []byte { m := x.(message); return m.marshal() }),
}

// FuzzCodecs fuzzes every message and record decoder of the package (see
// fuzzcheck.Check), seeded with the encodings in golden/wire.txt.
// A request whose entry count does not decode is refused (found by
// FuzzCodecs: it indexed the missing entry and panicked).
func TestRequestWithBadCountRefused(t *testing.T) {
	b := (&message{Kind: kindRequest}).marshal()
	b = append(b[:len(b)-1], 0xff, 0xff, 0xff, 0xff, 0x0f)
	if _, err := unmarshal(b); err == nil {
		t.Fatalf("%x decoded", b)
	}
}

// A message whose entries are minimal (an empty id and flags: 2 bytes)
// decodes (found by FuzzUnmarshal: the entry count was checked against 4
// bytes per entry, so a response with one such entry and a nil value did
// not decode after its own encoding).
func TestMinimalEntriesDecode(t *testing.T) {
	for _, m := range []message{
		{Kind: kindResponse, Entries: []entry{{Flags: flagGone}}, Value: service.Nil()},
		{Kind: kindFull, Entries: []entry{{Flags: flagGone}, {Flags: flagBare}}},
	} {
		if _, err := unmarshal(m.marshal()); err != nil {
			t.Errorf("%+v: %v", m, err)
		}
	}
}

func FuzzCodecs(f *testing.F) {
	fuzzcheck.Decoders(f, fuzzcheck.GoldenSeeds(f, "golden/wire.txt"), codecs)
}
