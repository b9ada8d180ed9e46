package esds

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/sim"
)

// TestRestartKeepsLabelCounter: a replica whose own label on an operation is
// lowered by gossip keeps its lbl-counter across a restart (recCounter).
// Before, the rewritten record named the other replica's label, the restart
// restored a counter below a label other replicas still held for that
// operation, and the replica gave the same label to a new operation: the
// invariant "labels unique" failed on this run (slow gossip of impl=simple
// with variant=unopt makes lowered labels common).
func TestRestartKeepsLabelCounter(t *testing.T) {
	passesPinned(t, "--protocol esds --nodes 3 --clients 4 --ops 300 --faults all --latency uniform:1ms:5ms --service counter --strict 0.5 --prev 0.2 --param impl=simple --param variant=unopt --seeds 6")
}

// passesPinned runs one seed of the simulator command line cmd (flags and
// --seeds N) and fails on any violation, printing the replay command.
func passesPinned(t *testing.T, cmd string) {
	t.Helper()
	cfg, seeds, err := sim.ParseArgs(strings.Fields(cmd))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed = seeds[0]
	r, err := sim.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Violation {
		t.Fatalf("%s\n%s", r.Invariant+r.Divergence, cfg.Command())
	}
}
