package paxos

import (
	"fmt"
	"math"
	"testing"
)

// TestSlotKey holds slotKey to the stored key format (recSlotPfx and 16
// lower-case hex digits, as fmt's "%s%016x" wrote it: keys already on disk
// must still name their instances), slotOfKey to its inverse, and slotKey
// to one allocation (the string; fmt.Sprintf took two).
func TestSlotKey(t *testing.T) {
	for _, i := range []uint64{0, 1, 9, 10, 15, 16, 255, 256, 0xabcdef, 1 << 32, 0x0123456789abcdef, math.MaxUint64 - 1, math.MaxUint64} {
		k := slotKey(i)
		if want := fmt.Sprintf("%s%016x", recSlotPfx, i); k != want {
			t.Errorf("slotKey(%d) = %q, want %q", i, k, want)
		}
		if got, ok := slotOfKey(k); !ok || got != i {
			t.Errorf("slotOfKey(slotKey(%d)) = %d, %v", i, got, ok)
		}
	}
	if _, ok := slotOfKey(recPromised); ok {
		t.Errorf("slotOfKey(%q) names an instance", recPromised)
	}
	i := uint64(1 << 40)
	if n := testing.AllocsPerRun(100, func() { i++; _ = slotKey(i) }); n > 1 {
		t.Errorf("slotKey allocates %.1f times, want 1", n)
	}
}
