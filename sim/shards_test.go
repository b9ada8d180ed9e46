package sim

import (
	"flag"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/check"
)

// The sharded simulation's short pass (shards.go): a few seeds under
// every fault kind with splits, merges and moves, and the broken variant
// caught. Longer runs: synod-lab shardsim --seeds 1-200 (docs/SHARDING.md).

var shardSeed = flag.Int64("shards.seed", 0, "TestShardsSim: run only this seed")

func shardsCfg(seed int64) ShardsConfig {
	return ShardsConfig{Shards: 2, Spares: 1, Clients: 8, Ops: 1000, Seed: seed, Faults: "all", Migrations: 3, PlainFrac: 0.25, Think: "uniform:20ms:60ms", Hot: 0.8}
}

func TestShardsSim(t *testing.T) {
	seeds := []int64{1, 3, 4}
	if testing.Short() {
		seeds = seeds[:1]
	}
	if *shardSeed != 0 {
		seeds = []int64{*shardSeed}
	}
	var total ShardsStats
	for _, s := range seeds {
		cfg := shardsCfg(s)
		r, err := RunShards(cfg)
		if err != nil {
			t.Fatalf("seed %d: %v\nreplay: %s", s, err, ShardsReplay(cfg, s))
		}
		if r.Failed() {
			t.Errorf("seed %d: invariant %q, history %s %s\nreplay: %s (or go test ./sim -run 'TestShardsSim$' -args -shards.seed %d)",
				s, r.Invariant, r.Check, r.Detail, ShardsReplay(cfg, s), s)
		}
		if r.Stats.Completed == 0 {
			t.Errorf("seed %d: no operation completed: %v", s, r.Stats)
		}
		t.Logf("seed %d: %v check=%s decisions: %s", s, r.Stats, r.Check, r.Decisions)
		total.Migrations += r.Stats.Migrations
		total.Flips += r.Stats.Flips
		total.Crashes += r.Stats.Crashes
		total.PowerLosses += r.Stats.PowerLosses
		total.Partitions += r.Stats.Partitions
		total.Pauses += r.Stats.Pauses
		total.Reorders += r.Stats.Reorders
		total.DriverDeaths += r.Stats.DriverDeaths
		total.Moved += r.Stats.Moved + r.Stats.Asked
		total.Forwarded += r.Stats.Forwarded
		total.Splits += r.Stats.Splits
		total.Merges += r.Stats.Merges
		total.Dead += r.Stats.Dead
		total.Replaced += r.Stats.Replaced
	}
	// The runs must have exercised what they claim to check.
	if total.Migrations < len(seeds) || total.Flips < len(seeds) || total.Crashes == 0 || total.PowerLosses == 0 ||
		total.Partitions == 0 || total.Pauses == 0 || total.Reorders == 0 || total.DriverDeaths == 0 || total.Moved == 0 || total.Forwarded == 0 ||
		total.Splits == 0 || total.Merges == 0 || total.Dead == 0 || total.Replaced == 0 {
		t.Errorf("the seeds did not exercise migrations, faults and redirections: %v", total)
	}
}

// A run replays: the same seed gives the same run.
func TestShardsSimDeterministic(t *testing.T) {
	// Also with the placement namespace replicated (its leader's
	// failovers included).
	for _, pr := range []int{-1, 0} {
		cfg := shardsCfg(7)
		cfg.Ops, cfg.PlaceReplicas = 400, pr
		a, err := RunShards(cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, err := RunShards(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if a.Stats != b.Stats {
			t.Fatalf("seed 7 (placement replicas %d) ran twice differently:\n%v\n%v", pr, a.Stats, b.Stats)
		}
		if pr == 0 && a.Stats.PlaceWrites == 0 {
			t.Fatalf("seed 7 wrote nothing through the placement log: %v", a.Stats)
		}
	}
}

// The broken variant (groups keep admitting reads and writes to slots
// they have handed over) is caught by the step invariant, and, with the
// invariant off, by the history check.
func TestShardsSimCatchesKeepAccepting(t *testing.T) {
	for _, s := range []int64{1, 2} {
		cfg := shardsCfg(s)
		cfg.Faults, cfg.Broken = "none", "keep-accepting"
		r, err := RunShards(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.Invariant == "" {
			t.Errorf("seed %d: keep-accepting not caught by the invariant: %v", s, r.Stats)
		}
		t.Logf("seed %d caught: %s", s, r.Invariant)
	}
	cfg := shardsCfg(1)
	cfg.Faults, cfg.Broken, cfg.NoInvariants = "none", "keep-accepting", true
	r, err := RunShards(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Check != check.Illegal {
		t.Errorf("seed 1: keep-accepting, invariants off: the history check says %s (%v)", r.Check, r.Stats)
	}
}

// Decide splits by size too: with the load thresholds out of reach, a
// group holding more than split_keys keys splits into the spare.
func TestShardsSimSplitsBySize(t *testing.T) {
	cfg := shardsCfg(1)
	cfg.Faults, cfg.Hot, cfg.Keys, cfg.Migrations = "none", 0, 64, 1
	cfg.Place = SimPlaceParams
	cfg.Place.SplitKeys, cfg.Place.SplitOps, cfg.Place.MergeKeys, cfg.Place.MergeOps = 24, 1e9, 8, 0
	var trace strings.Builder
	cfg.Trace = &trace
	r, err := RunShards(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Failed() || r.Stats.Splits != 1 || r.Stats.Migrations != 1 {
		t.Fatalf("want one split by keys, done: %v %s invariant %q check %s\nreplay: %s", r.Stats, r.Decisions, r.Invariant, r.Check, ShardsReplay(cfg, 1))
	}
	// The cut is where the group's keys halve, by its per-slot answer
	// (session 48; before, the median slot).
	var split string
	for _, l := range strings.Split(trace.String(), "\n") {
		if strings.Contains(l, "placement decision: split") {
			split = l
		}
	}
	if !strings.Contains(split, "after a cut by size (") {
		t.Fatalf("the split was not cut by the group's per-slot keys: %q", split)
	}
	t.Logf("%v decisions: %s; %s", r.Stats, r.Decisions, split)
}

// The broken placer (decided slots run one slot past the decision, into
// the next group's) is caught by the decision invariant: a split or merge
// moves only slots its source owns.
func TestShardsSimCatchesPlacerOverreach(t *testing.T) {
	// Seeds 3, 6 and 15 of 1-16 catch it with the replicated placement
	// namespace since session 51's paxos changes (the relayed Forward and
	// the unpinned answer move the placement group's timings; 1, 3 and 10
	// did before, 2 and 5 with registers).
	seeds := []int64{6, 3}
	if testing.Short() {
		seeds = seeds[1:]
	}
	for _, s := range seeds {
		cfg := shardsCfg(s)
		cfg.Faults, cfg.Broken = "none", "placer-overreach"
		r, err := RunShards(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.Invariant == "" {
			t.Errorf("seed %d: placer-overreach not caught: %v %s", s, r.Stats, r.Decisions)
		}
		t.Logf("seed %d caught: %s", s, r.Invariant)
	}
}

// A split under load is online: clients are answered while it runs, at a
// rate not far below the rate before it (the figures: synod-lab shardsim
// --migration-load, docs/SHARDING.md).
func TestShardsMigrationLoad(t *testing.T) {
	var b strings.Builder
	base := ShardsConfig{Shards: 2, Keys: 256, PlainFrac: 0.5}
	if err := MigrationLoad(base, []int64{1}, 32, 30000, 1200*time.Millisecond, &b); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	t.Log(b.String())
	var ratio float64
	for _, l := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "1" {
			ratio, _ = strconv.ParseFloat(f[len(f)-1], 64)
		}
	}
	if ratio < 0.3 {
		t.Errorf("throughput during the split fell to %.2f of the rate before it", ratio)
	}
}

// Cross-shard transactions in the sharded world: bank transfers and
// whole-bank reads over accounts in several groups, through the real
// groups' logs under every fault kind and the decided migrations; the
// bank's history is strictly serializable.
func TestShardsSimTxn(t *testing.T) {
	seeds := []int64{1, 2}
	if testing.Short() {
		seeds = seeds[:1]
	}
	var txns, early, evaluated int
	for _, s := range seeds {
		cfg := shardsCfg(s)
		cfg.TxnClients, cfg.Ops = 4, 600
		r, err := RunShards(cfg)
		if err != nil {
			t.Fatalf("seed %d: %v\nreplay: %s", s, err, ShardsReplay(cfg, s))
		}
		if r.Failed() || r.TxnCheck != check.Ok {
			t.Errorf("seed %d: invariant %q, history %s, bank %s %s\nreplay: %s", s, r.Invariant, r.Check, r.TxnCheck, r.TxnDetail, ShardsReplay(cfg, s))
		}
		t.Logf("seed %d: %d bank ops, %d cross-shard attempts (%d answered before their last step, %d transfers at the decision), %d coordinators died, %d resolved; %v",
			s, r.TxnOps, r.Stats.Txns, r.Stats.TxnEarly, r.Stats.TxnEvaluated, r.Stats.TxnCoordDeaths, r.Stats.TxnResolved, r.Stats)
		txns += r.Stats.Txns
		early += r.Stats.TxnEarly
		evaluated += r.Stats.TxnEvaluated
	}
	if txns == 0 || early == 0 || evaluated == 0 {
		t.Errorf("no cross-shard transaction ran (%d), or none answered early (%d), or no transfer at its decision (%d)", txns, early, evaluated)
	}
}

// catchTxnVariant runs seeds until one's bank history is illegal (a
// search, as shard/txn's TestTxnSimBrokenVariants does: which seed
// catches a variant moves whenever shared code changes a schedule).
func catchTxnVariant(t *testing.T, broken string, txnClients int, faults string, seeds []int64) {
	t.Helper()
	for _, s := range seeds {
		cfg := shardsCfg(s)
		cfg.TxnClients, cfg.Ops, cfg.Faults, cfg.Broken = txnClients, 600, faults, broken
		r, err := RunShards(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.TxnCheck == check.Illegal {
			t.Logf("%s caught on seed %d: %.400s", broken, s, r.TxnDetail)
			return
		}
		t.Logf("%s: seed %d not caught (bank %s)", broken, s, r.TxnCheck)
	}
	t.Fatalf("%s not caught on seeds %v", broken, seeds)
}

// The broken variant txn-no-dirty (a transaction whose keys are in one
// group is sent without its written keys' dirty marks, so a migration
// under way does not copy them again) is caught by the strict-
// serializability checker: the destination serves an older balance.
func TestShardsSimTxnCatchesNoDirty(t *testing.T) {
	// Seeds 18, 23, 27, 45, 47 and 82 of 9-27, 41-48 and 81-84 catch it
	// since session 51 (a follower's relayed Forward and the leader's
	// unpinned answers moved the groups' schedules; the correct code passes
	// 18, 23, 45, 47 and 82); seed 8 did since session 44 (the replicated placement
	// namespace by default, transfers answered at the decision), 1-7 not.
	catchTxnVariant(t, "txn-no-dirty", 8, "none", []int64{18, 23, 27, 45, 8})
}

// A broken variant of the Coordinator itself, read-only-without-locks
// (whole-bank reads take no locks), is caught by the strict-
// serializability checker in the sharded world too (synod-lab shardsim
// --seeds 1-8 --faults all --hot 0.8 --txn-clients 8 --plain 0.25 --think
// uniform:20ms:60ms --ops 600 --broken txn:read-only-without-locks: 2 of
// 8 seeds at 217c52f). Not in the short pass (seconds of CPU).
func TestShardsSimTxnCatchesReadsWithoutLocks(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds of CPU: go test ./sim -run TestShardsSimTxnCatchesReadsWithoutLocks")
	}
	catchTxnVariant(t, "txn:read-only-without-locks", 8, "all", []int64{3, 6, 8, 4, 7, 1, 2, 5, 9, 10})
}
