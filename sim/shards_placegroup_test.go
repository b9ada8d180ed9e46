package sim

import (
	"strings"
	"testing"
)

// The placement namespace replicated (shards_placegroup.go): the slot
// map, the migration record and the members records are written through a
// paxos group of the simulated machines, whose leader runs the placer and
// the drivers; its machine crashes, pauses and is cut off like any other
// (and the crash fault aims at it one time in four), so placement leaders
// fail over and their successors resume migrations and replacements.

func TestShardsSimPlaceGroup(t *testing.T) {
	seeds := []int64{8, 3}
	if testing.Short() {
		seeds = seeds[:1]
	}
	var total ShardsStats
	for _, s := range seeds {
		cfg := shardsCfg(s)
		cfg.PlaceReplicas = 3
		r, err := RunShards(cfg)
		if err != nil {
			t.Fatalf("seed %d: %v\nreplay: %s", s, err, ShardsReplay(cfg, s))
		}
		if r.Failed() {
			t.Errorf("seed %d: invariant %q, history %s %s\nreplay: %s", s, r.Invariant, r.Check, r.Detail, ShardsReplay(cfg, s))
		}
		t.Logf("seed %d: %v check=%s decisions: %s", s, r.Stats, r.Check, r.Decisions)
		total.PlaceFailovers += r.Stats.PlaceFailovers
		total.PlaceResumed += r.Stats.PlaceResumed
		total.Flips += r.Stats.Flips
		total.Replaced += r.Stats.Replaced
		total.Completed += r.Stats.Completed
	}
	if total.PlaceFailovers == 0 || total.PlaceResumed == 0 || total.Flips == 0 || total.Replaced == 0 || total.Completed == 0 {
		t.Errorf("the runs did not fail the placement leader over while it carried out migrations and replacements: %v", total)
	}
}

// place-no-guard (record writes without their version guards) is caught
// by the driver-token or the epoch invariant: a deposed placement
// leader's write, still in flight, lands after its successor's. The seed
// and the command that replays it are printed.
func TestShardsSimCatchesPlaceNoGuard(t *testing.T) {
	for _, s := range []int64{8, 1, 2, 3} {
		cfg := shardsCfg(s)
		cfg.PlaceReplicas, cfg.Broken = 3, "place-no-guard"
		r, err := RunShards(cfg)
		if err != nil {
			t.Fatalf("seed %d: %v", s, err)
		}
		if strings.Contains(r.Invariant, "driver tokens") || strings.Contains(r.Invariant, "epochs") {
			t.Logf("seed %d caught: %s\nreplay: %s", s, r.Invariant, ShardsReplay(cfg, s))
			return
		}
		t.Logf("seed %d not caught (%s): %v", s, r.Invariant, r.Stats)
	}
	t.Error("place-no-guard not caught in seeds 8, 1, 2, 3")
}
