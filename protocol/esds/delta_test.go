package esds

import (
	"testing"
	"time"

	"github.com/synod-dev/synod/sim"
)

// forceDelta makes every collection of a state with a snapshot write
// record "g" (collectDelta) until the kept records reach 1,000 times the
// snapshot, so that small states take the path large ones take; that
// path collects at every tick (collectEveryTick), here at most 2 of 5
// operations examined a tick, so that the bounds and the cursor are
// exercised too.
func forceDelta(t *testing.T) {
	oldMin, oldFactor, oldPer, oldScan := deltaMin, deltaFactor, gcPerTick, gcScanPerTick
	deltaMin, deltaFactor, gcPerTick, gcScanPerTick = 1, 1000, 2, 5
	t.Cleanup(func() { deltaMin, deltaFactor, gcPerTick, gcScanPerTick = oldMin, oldFactor, oldPer, oldScan })
}

// TestDeltaRecordsCrashRestart: with the stable state kept as record "s"
// plus "g" and the collected operations' records (gc.go collectDelta),
// restarts recover it: the random loads with crashes agree on one order
// and answer strict operations with their values in it.
func TestDeltaRecordsCrashRestart(t *testing.T) {
	forceDelta(t)
	w, r := deltaUse.writes.Load(), deltaUse.restores.Load()
	randomLoads(t, true)
	if deltaUse.writes.Load() == w || deltaUse.restores.Load() == r {
		t.Fatalf("%d records \"g\" written, %d restarts found one: the test exercises nothing", deltaUse.writes.Load()-w, deltaUse.restores.Load()-r)
	}
}

// TestDeltaRecordsSim: the same under the simulator's faults (crashes
// that lose unsynced records, power loss, a lossy network), with the
// invariants (stable orders agree across restarts) and the ESDS checker;
// some collections stop at gcPerTick or gcScanPerTick and the next tick
// goes on from there (collectEveryTick).
func TestDeltaRecordsSim(t *testing.T) {
	forceDelta(t)
	w, r, bd := deltaUse.writes.Load(), deltaUse.restores.Load(), deltaUse.bounded.Load()
	for seed := int64(1); seed <= 6; seed++ {
		cfg := sim.Config{Protocol: "esds", Service: "kv", Nodes: 3, Clients: 4, Ops: 300, Seed: seed, Faults: "all",
			StrictFrac: 0.3, PrevProb: 0.3, RequestTimeout: 3 * time.Second}
		res, err := sim.Run(cfg)
		if err != nil {
			t.Fatalf("%v\nreplay (with deltaMin=1, deltaFactor=1000, gcPerTick=2, gcScanPerTick=5): %s", err, cfg.Command())
		}
		t.Logf("seed %d: %d completed, %d invariant checks; %s", seed, res.Completed, res.InvariantChecks, res.ESDS.Detail())
		if res.Violation || res.Invariant != "" {
			t.Fatalf("seed %d: %s %s\nreplay (with deltaMin=1, deltaFactor=1000, gcPerTick=2, gcScanPerTick=5): %s", seed, res.Invariant, res.ESDS.Detail(), cfg.Command())
		}
	}
	t.Logf("%d records \"g\" written, %d restarts found one, %d collections stopped at their bound", deltaUse.writes.Load()-w, deltaUse.restores.Load()-r, deltaUse.bounded.Load()-bd)
	if deltaUse.writes.Load() == w || deltaUse.restores.Load() == r || deltaUse.bounded.Load() == bd {
		t.Fatal("the delta path or its bound was not exercised")
	}
}
