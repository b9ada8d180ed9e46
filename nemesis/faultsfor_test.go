package nemesis

import (
	"slices"
	"testing"

	_ "github.com/synod-dev/synod/protocol/all"
)

// TestFaultsFor: a protocol without a narrower failure model gets every
// kind; primary-backup (crash, dup, reorder, slow in the simulator) gets
// exactly kill, dup, reorder and delay on real processes.
func TestFaultsFor(t *testing.T) {
	if got := FaultsFor("paxos"); !slices.Equal(got, AllFaults) {
		t.Errorf("paxos: %v, want every kind", got)
	}
	want := []string{FaultDelay, FaultDup, FaultReorder, FaultKill}
	for _, p := range []string{"pb", "pbdurable"} {
		if got := FaultsFor(p); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", p, got, want)
		}
	}
}
