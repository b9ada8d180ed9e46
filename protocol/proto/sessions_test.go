package proto

import (
	"slices"
	"testing"

	"github.com/synod-dev/synod/automaton"
)

// The table answers every write inside the window with its first outcome,
// in whatever order the sequence numbers arrived, forgets the oldest as the
// window slides, and keeps Seqs the ascending keys of Res.
func TestSessionWindow(t *testing.T) {
	const window = 4
	tab := Sessions[string]{}
	s, created := tab.Row(7, window)
	if !created {
		t.Fatal("first Row did not create the row")
	}
	for _, seq := range []uint64{3, 1, 2, 5} {
		s.Record(seq, "first", uint64(seq), window)
	}
	s.Record(2, "second", 99, window) // already recorded: ignored
	if r, ok := tab.Lookup(automaton.RequestID{Client: 7, Seq: 2}); !ok || r != "first" {
		t.Fatalf("seq 2: %q %v, want the first outcome", r, ok)
	}
	if s.Last != 5 {
		t.Fatalf("Last %d, want 5 (a repeat must not move it)", s.Last)
	}
	s.Record(4, "first", 6, window)
	if want := []uint64{2, 3, 4, 5}; !slices.Equal(s.Seqs, want) {
		t.Fatalf("Seqs %v, want %v", s.Seqs, want)
	}
	if _, ok := s.Res[1]; ok || s.Floor != 2 {
		t.Fatalf("seq 1 kept (floor %d): the window holds %d", s.Floor, window)
	}
	if !tab.Forgotten(automaton.RequestID{Client: 7, Seq: 1}) || tab.Forgotten(automaton.RequestID{Client: 7, Seq: 2}) {
		t.Fatal("Forgotten disagrees with the floor")
	}
	if _, ok := tab.Lookup(automaton.RequestID{Client: 8, Seq: 1}); ok {
		t.Fatal("a client without a row has an outcome")
	}
	if _, created := tab.Row(7, window); created {
		t.Fatal("second Row created the row again")
	}
}

// EvictIdle drops the rows with the lowest Last, ties by id, and IDs
// lists the rest in order.
func TestSessionsEvictIdle(t *testing.T) {
	tab := Sessions[int]{}
	for id, last := range map[uint64]uint64{10: 5, 11: 1, 12: 1, 13: 9} {
		s, _ := tab.Row(id, 1)
		s.Record(1, 0, last, 1)
	}
	tab.EvictIdle(2)
	if got := tab.IDs(); !slices.Equal(got, []uint64{10, 13}) {
		t.Fatalf("after evicting 2: %v, want [10 13]", got)
	}
	tab.EvictIdle(5)
	if len(tab) != 0 {
		t.Fatalf("evicting more rows than there are left %d", len(tab))
	}
}
