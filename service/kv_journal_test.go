package service

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
)

// TestJournalCompactInPlace: a state whose few keys change often compacts
// its journal in its own array, allocating nothing for it, and a Clone
// keeps the journal it was given: the source compacting in place the
// array they share (when it has room to grow in place, after an earlier
// compaction) must not change the clone's Delta.
func TestJournalCompactInPlace(t *testing.T) {
	s := KV{}.NewState().(*KVState)
	for i := range 1100 { // one compaction: the array keeps its room
		s.Apply(op("set", "hot", fmt.Sprint(i)))
	}
	since := s.Version()
	s.Apply(op("set", "hot", "at clone"))
	s.Apply(op("set", "m", "v"))
	c := s.Clone().(*KVState)
	want, err := c.Delta(since)
	if err != nil {
		t.Fatal(err)
	}
	// The source writes 100 more keys (its next compaction keeps more
	// entries than the clone's journal holds before since) and compacts.
	for i := range 100 {
		s.Apply(op("set", fmt.Sprint("n", i), "v"))
	}
	for i := range 3000 {
		s.Apply(op("set", "hot", fmt.Sprint("s", i)))
	}
	got, err := c.Delta(since)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the clone's delta changed when the source compacted (%d bytes, was %d)", len(got), len(want))
	}

	// A hot key's writes allocate nothing for the journal: the bytes
	// allocated per write, averaged over many compactions.
	h := KV{}.NewState().(*KVState)
	set := Op{Kind: "set", Key: "hot", Args: [][]byte{[]byte("v")}}
	for range 2048 {
		h.Apply(set)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 * 1024 {
		h.Apply(set)
	}
	runtime.ReadMemStats(&after)
	per := float64(after.TotalAlloc-before.TotalAlloc) / (10 * 1024)
	t.Logf("%.1f bytes allocated per write of a hot key", per)
	if per > 8 {
		t.Fatalf("%.1f bytes allocated per write of a hot key", per)
	}
}
