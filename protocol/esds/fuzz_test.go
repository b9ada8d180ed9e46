package esds

import (
	"testing"

	"github.com/synod-dev/synod/service"
)

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
