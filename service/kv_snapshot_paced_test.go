package service

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestKVSnapshotWriterMatchesSnapshot: a snapshot written a part at a
// time (SnapshotWriter, parts of a random byte budget, after 0-4 bytes of
// the caller's) through a kept key order is byte for byte Snapshot's, after every operation of random typed
// runs (renames, deletes and expiries change the key set, sometimes
// keeping its size, so the kept order sometimes names a key the state no
// longer holds), and it takes several parts. A writer that kept a stale
// order, or lost or repeated a key at a part's boundary, fails the
// comparison.
func TestKVSnapshotWriterMatchesSnapshot(t *testing.T) {
	multi := 0
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 51))
		s := newKVState()
		var o KeyOrder
		now := int64(1_000_000)
		for i := range 300 {
			now += int64(r.IntN(20))
			s.ApplyEnv(randomTypedOp(r, 6+int(seed%7)), Env{Time: now * 1e6, Seed: uint64(i)})
			view := s.Clone().(*KVState)
			head := []byte("head")[:r.IntN(5)] // a caller's room before the snapshot
			w := view.SnapshotWriter(&o, head)
			budget := 1 + r.IntN(40)
			parts := 1
			for !w.Next(budget) {
				if w.Bytes() != nil {
					t.Fatalf("seed %d op %d: bytes before the snapshot is complete", seed, i)
				}
				parts++
			}
			if parts > 1 {
				multi++
			}
			if want := append([]byte("head")[:len(head):len(head)], s.Snapshot()...); !bytes.Equal(w.Bytes(), want) {
				t.Fatalf("seed %d op %d: snapshot written in %d parts of %d bytes differs from Snapshot's", seed, i, parts, budget)
			}
			if !w.Next(budget) || !bytes.Equal(w.Bytes()[len(head):], s.Snapshot()) {
				t.Fatalf("seed %d op %d: Next after the end changed the snapshot", seed, i)
			}
		}
	}
	if multi == 0 {
		t.Fatal("no snapshot took more than one part: the test exercises nothing")
	}
}
