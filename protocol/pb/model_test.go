package pb

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/mc"
)

// TestModelDuplicateForward: in pb-broken-nodedup's model the checker
// finds the double execution (exactly-once), while pb itself, checked in
// the same model exhaustively, answers the write once.
func TestModelDuplicateForward(t *testing.T) {
	cfg := mc.NewConfig(BrokenNoDedup)
	r, err := mc.Check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Violation == nil || !strings.Contains(r.Violation.Violation, "exactly-once") {
		t.Fatalf("%s: not caught in %d states: %v", BrokenNoDedup, r.States, r.Violation)
	}
	cfg = mc.NewConfig(Name)
	cfg.Model, cfg.Net, cfg.Timers, cfg.Depth = DuplicateForwardModel(), mc.Network{Duplicating: true}, "none", 8
	r, err = mc.Check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Violation != nil || !r.Sometimes[0].Reached {
		t.Fatalf("pb in the duplicate-forward model: violation %v, write completes %v (%d states)", r.Violation, r.Sometimes[0].Reached, r.States)
	}
	t.Logf("pb: %d states to depth 8; %s found", r.States, BrokenNoDedup)
}
