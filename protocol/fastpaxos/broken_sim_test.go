package fastpaxos_test

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/protocol/fastpaxos"
	"github.com/synod-dev/synod/sim"
)

// TestBrokenVariantsTripTheirInvariant: each of the two later broken
// variants is caught by the invariant it was written for (not only by
// some check), in the simulator, within a few seeds of its scenario.
func TestBrokenVariantsTripTheirInvariant(t *testing.T) {
	for _, c := range []struct {
		proto, faults, want string
		nodes               int
	}{
		// A deposed leader's phase 2a reaches an acceptor that promised a
		// newer ballot: crashes and partitions make leaders change.
		{fastpaxos.BrokenStaleVote, "crash,partition", "below its promise", 5},
		// A vote lost leaves a learner with a gap it then skips.
		{fastpaxos.BrokenSkipGap, "loss,reorder", "executed prefix", 3},
	} {
		caught := false
		for seed := int64(1); seed <= 10 && !caught; seed++ {
			cfg := sim.Config{Protocol: c.proto, Nodes: c.nodes, Clients: 4, Ops: 300, Seed: seed, Faults: c.faults}
			r, err := sim.Run(cfg)
			if err != nil {
				t.Fatalf("%s seed %d: %v\nreplay: %s", c.proto, seed, err, cfg.Command())
			}
			if r.Invariant != "" && !strings.Contains(r.Invariant, c.want) {
				t.Errorf("%s seed %d: caught by another invariant: %s\nreplay: %s", c.proto, seed, r.Invariant, cfg.Command())
			}
			caught = strings.Contains(r.Invariant, c.want)
		}
		if !caught {
			t.Errorf("%s: no seed of 1-10 tripped %q", c.proto, c.want)
		}
	}
}
