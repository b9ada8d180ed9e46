// Package simtest runs one pinned simulation for a test: the seed's
// result, and the command that replays it, failing the test when the
// run says too little (a check cut short, or too few operations
// completed).
package simtest

import (
	"testing"

	"github.com/synod-dev/synod/sim"
)

// Run simulates `synod-lab sim` with args (which must not name seeds)
// on seed, and returns the result and its replay command. It fails t
// when the linearizability check was cut short or fewer than
// minCompleted operations completed (the check would be nearly vacuous).
func Run(t *testing.T, args []string, seed string, minCompleted int) (*sim.Result, string) {
	t.Helper()
	cfg, seeds, err := sim.ParseArgs(append(append([]string(nil), args...), "--seeds", seed))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed = seeds[0]
	r, err := sim.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Check != nil && len(r.Check.Undecided) > 0 {
		t.Fatalf("seed %s: the check was cut short (%v); replay: %s", seed, r.Check.Undecided, cfg.Command())
	}
	if r.Completed < minCompleted {
		t.Fatalf("seed %s: only %d of %d operations completed: the check is nearly vacuous; replay: %s", seed, r.Completed, r.Ops, cfg.Command())
	}
	return r, cfg.Command()
}
