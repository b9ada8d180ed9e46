package esds

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/synod-dev/synod/automaton"
)

// TestAssignedOpIDFormat: AssignedOpID spells every id as
// fmt.Sprintf("%016x-%d") does (the form parseDerived reads and ids
// persisted by older builds carry), in one allocation.
func TestAssignedOpIDFormat(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	ids := []automaton.RequestID{{}, {Client: 1, Seq: 1}, {Client: ^uint64(0), Seq: ^uint64(0)}, {Client: 0xabc, Seq: 10}}
	for range 1000 {
		ids = append(ids, automaton.RequestID{Client: rng.Uint64() >> rng.Intn(64), Seq: rng.Uint64() >> rng.Intn(64)})
	}
	for _, r := range ids {
		if got, want := AssignedOpID(r), fmt.Sprintf("%016x-%d", r.Client, r.Seq); got != want {
			t.Fatalf("AssignedOpID(%v) = %q, want %q", r, got, want)
		}
		if c, s, ok := parseDerived(AssignedOpID(r)); !ok || c != r.Client || s != r.Seq {
			t.Fatalf("parseDerived(AssignedOpID(%v)) = %x, %d, %v", r, c, s, ok)
		}
	}
	r := automaton.RequestID{Client: 0x1234567890abcdef, Seq: 123456789}
	if n := testing.AllocsPerRun(100, func() { _ = AssignedOpID(r) }); n > 1 {
		t.Errorf("AssignedOpID: %.0f allocations, want 1", n)
	}
}
