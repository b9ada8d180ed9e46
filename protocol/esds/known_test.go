package esds

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/synod-dev/synod/service"
)

// TestUnmarshalKnown: a gossip message decoded for a replica that holds
// some of its operations (unmarshalKnown) has every entry unmarshal gives,
// except that the entries about the held operations carry no descriptor
// (prev, strict, operation), and takes fewer allocations; a request is
// decoded whole whatever the replica holds. An unmarshalKnown that read
// past the wrong bytes fails the comparison of the entries after a
// skipped one.
func TestUnmarshalKnown(t *testing.T) {
	var es []entry
	known := map[string]*op{}
	for i := range 12 {
		x := entry{ID: fmt.Sprintf("00000000000000%02x-%d", i, i+1), Flags: flagDone, Label: Label{Set: true, C: uint64(i + 1), R: uint32(i % 3)},
			Op: service.Op{Kind: "set", Key: fmt.Sprintf("k%d", i), Args: [][]byte{[]byte("vvvvvvvv")}}}
		switch i % 4 {
		case 1:
			x.Prev, x.Strict = []string{"p1", "p2"}, true
		case 2:
			x.Flags |= flagBare
			x.Op, x.Prev = service.Op{}, nil
		case 3:
			x.Flags = flagGone
			x.Op, x.Label = service.Op{}, Label{}
		}
		es = append(es, x)
		if i%3 == 0 {
			known[x.ID] = &op{id: x.ID}
		}
	}
	b := (&message{Kind: kindStream, Inc: 7, Stream: 1, From: 1, To: uint64(len(es)), Entries: es}).marshal()
	whole, err := unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := unmarshalKnown(b, known)
	if err != nil {
		t.Fatal(err)
	}
	skipped := 0
	for i := range whole.Entries {
		w, g := whole.Entries[i], got.Entries[i]
		if known[w.ID] != nil && w.Flags&flagBare == 0 && w.Flags != flagGone {
			skipped++
			w.Prev, w.Strict, w.Op = nil, false, service.Op{}
		}
		if !reflect.DeepEqual(w, g) {
			t.Fatalf("entry %d: %+v, want %+v", i, g, w)
		}
	}
	got.Entries, whole.Entries = nil, nil
	if !reflect.DeepEqual(got, whole) {
		t.Fatalf("message %+v, want %+v", got, whole)
	}
	if skipped == 0 {
		t.Fatal("no descriptor skipped: the test exercises nothing")
	}
	aw := testing.AllocsPerRun(100, func() { unmarshal(b) })
	ak := testing.AllocsPerRun(100, func() { unmarshalKnown(b, known) })
	if ak >= aw {
		t.Errorf("unmarshalKnown %.0f allocations, unmarshal %.0f", ak, aw)
	}
	req := (&message{Kind: kindRequest, Inc: 7, Entries: []entry{{ID: es[0].ID, Op: es[0].Op}}}).marshal()
	r1, _ := unmarshal(req)
	r2, err := unmarshalKnown(req, known)
	if err != nil || !reflect.DeepEqual(r1, r2) {
		t.Fatalf("request decoded %+v (%v), want %+v", r2, err, r1)
	}
	t.Logf("%d descriptors skipped; %.0f allocations against %.0f", skipped, ak, aw)
}
