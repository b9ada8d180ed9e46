package sim_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	_ "github.com/synod-dev/synod/protocol/abd"
	_ "github.com/synod-dev/synod/protocol/paxos"
	"github.com/synod-dev/synod/sim"
)

// ABD with client batches (sim.Config.BatchWindow: the requests reaching a
// node within 2ms are one automaton.ClientBatch, whose phases travel as
// one batch message per peer) is linearizable under every fault, and the
// batches share rounds: fewer peer messages per operation than the same
// workload without them.
func TestABDBatchesLinearizableUnderFaults(t *testing.T) {
	seeds := int64(12)
	if testing.Short() {
		seeds = 4
	}
	batches := 0
	for seed := int64(1); seed <= seeds; seed++ {
		cfg := sim.Config{Protocol: "abd", Nodes: 5, Clients: 24, Ops: 400, Seed: seed, Faults: "all",
			Keys: 4, BatchWindow: 2 * time.Millisecond}
		r := runABDUnderFaults(t, cfg)
		batches += r.Stats.ClientBatches
	}
	if batches == 0 {
		t.Fatalf("no client batch in %d seeds: the window never held two requests", seeds)
	}

	per := func(window time.Duration, groups string) float64 {
		cfg := sim.Config{Protocol: "abd", Nodes: 3, Clients: 32, Ops: 2000, Seed: 7, Faults: "none",
			Keys: 50, Think: "constant:0s", BatchWindow: window, Params: map[string]string{"window": groups}}
		r, err := sim.Run(cfg)
		if err != nil {
			t.Fatalf("%v\nreplay: %s", err, cfg.Command())
		}
		if r.Violation {
			t.Fatalf("%v\nreplay: %s", r.Check, cfg.Command())
		}
		t.Logf("batch window %v, window=%s: %d messages, %d completed, %d batches, %d fsyncs", window, groups, r.Stats.MsgsSent, r.Completed, r.Stats.ClientBatches, r.Stats.Fsyncs)
		return float64(r.Stats.MsgsSent) / float64(r.Completed)
	}
	// Without round groups (window=0) and without runtime batches every
	// request runs its own rounds; runtime batches share them, and so do
	// round groups alone (requests waiting behind window groups begin
	// together, protocol/abd batch.go).
	alone := per(0, "0")
	if batched := per(2*time.Millisecond, "0"); batched > alone/2 {
		t.Errorf("runtime batches: %.2f peer messages per operation, alone %.2f: batches should at least halve them", batched, alone)
	}
	if grouped := per(0, "2"); grouped > alone/2 {
		t.Errorf("round groups: %.2f peer messages per operation, alone %.2f: groups should at least halve them", grouped, alone)
	}
}

// The broken variants are still caught with batches on (the batch path
// handles their reads and stores, and the checkers see them).
func TestABDBatchesBrokenCaught(t *testing.T) {
	for _, proto := range []string{"abd-broken-nowriteback", "abd-broken-nowriterid"} {
		t.Run(proto, func(t *testing.T) {
			for seed := int64(1); seed <= 40; seed++ {
				cfg := sim.Config{Protocol: proto, Nodes: 3, Clients: 10, Ops: 300, Seed: seed, Keys: 1,
					Mix: "get:6,set:3,exists:1", Latency: "uniform:1ms:10ms", Loss: 0.2, BatchWindow: 2 * time.Millisecond}
				r, err := sim.Run(cfg)
				if err != nil {
					t.Fatalf("%v\nreplay: %s", err, cfg.Command())
				}
				if r.Violation || r.Invariant != "" {
					if r.Stats.ClientBatches == 0 {
						t.Fatalf("caught at seed %d without a batch", seed)
					}
					t.Logf("caught at seed %d: %.120s\nreplay: %s", seed, r.Invariant+" "+fmt.Sprint(r.Check), cfg.Command())
					return
				}
			}
			t.Errorf("%s with batches: no violation in seeds 1-40", proto)
		})
	}
}

// The window is part of the replay command, and refused for a protocol
// that does not step batches.
func TestBatchWindowCommand(t *testing.T) {
	cfg := sim.Config{Protocol: "abd", Nodes: 3, Clients: 2, Ops: 10, Seed: 3, BatchWindow: time.Millisecond}
	if c := cfg.Command(); !strings.Contains(c, "--batch-window 1ms") {
		t.Errorf("command %q lacks the window", c)
	}
	cfg.Protocol = "paxos"
	if _, err := sim.Run(cfg); err == nil || !strings.Contains(err.Error(), "batch") {
		t.Errorf("paxos with a batch window: %v", err)
	}
}

// runABDUnderFaults runs one seed of the ABD fault workload (5 nodes, 24
// clients, 400 operations, every fault) and fails the test unless its
// history is linearizable, no invariant broke and at least 300 operations
// completed; every failure prints the replay command.
func runABDUnderFaults(t *testing.T, cfg sim.Config) *sim.Result {
	t.Helper()
	r, err := sim.Run(cfg)
	if err != nil {
		t.Fatalf("%v\nreplay: %s", err, cfg.Command())
	}
	if r.Violation || r.Check.Result != "ok" {
		t.Errorf("seed %d: %s\nreplay: %s", cfg.Seed, r.Check, cfg.Command())
	}
	if r.Invariant != "" {
		t.Errorf("seed %d: invariant: %s\nreplay: %s", cfg.Seed, r.Invariant, cfg.Command())
	}
	if r.Completed < 300 {
		t.Errorf("seed %d: %d of %d completed\nreplay: %s", cfg.Seed, r.Completed, r.Ops, cfg.Command())
	}
	return r
}
