package sim

import (
	"strings"
	"testing"
)

// Membership changes in the sharded world (shards_members.go): Decide's
// replacements, replica moves and leader moves carried out under every
// fault kind, with the majority, one-chain and healed invariants and every
// history checked; and each broken variant caught.

func TestShardsSimMembers(t *testing.T) {
	type run struct {
		machines int
		seed     int64
	}
	// 9 machines (one replica each): replacements; 5 machines (groups
	// share them): replacements and leader moves, and on seed 17 replica
	// balance when the dead machine is back (seed 2 until session 47:
	// paxos answering a removal once a majority of the new configuration
	// knows it, about a heartbeat later, moved the runs; seeds 1-12 and
	// 16 of 5 machines then balanced none; since session 44's default, the
	// replicated placement namespace; 9 machines' seed 2 balanced before).
	runs := []run{{5, 4}, {0, 2}, {5, 17}}
	if testing.Short() {
		runs = runs[:1]
	}
	var total ShardsStats
	for _, x := range runs {
		cfg := shardsCfg(x.seed)
		cfg.Machines = x.machines
		r, err := RunShards(cfg)
		if err != nil {
			t.Fatalf("seed %d: %v\nreplay: %s", x.seed, err, ShardsReplay(cfg, x.seed))
		}
		if r.Failed() {
			t.Errorf("seed %d: invariant %q, history %s %s\nreplay: %s", x.seed, r.Invariant, r.Check, r.Detail, ShardsReplay(cfg, x.seed))
		}
		t.Logf("machines %d seed %d: %v check=%s decisions: %s", x.machines, x.seed, r.Stats, r.Check, r.Decisions)
		total.Dead += r.Stats.Dead
		total.Replaced += r.Stats.Replaced
		total.Balanced += r.Stats.Balanced
		total.LeaderMoves += r.Stats.LeaderMoves
		total.Confs += r.Stats.Confs
		total.Crashes += r.Stats.Crashes
		total.Pauses += r.Stats.Pauses
	}
	if total.Dead == 0 || total.Replaced == 0 || total.LeaderMoves == 0 || total.Confs < 2*total.Replaced || total.Crashes == 0 || total.Pauses == 0 ||
		!testing.Short() && total.Balanced == 0 {
		t.Errorf("the runs did not carry out replacements, replica moves and leader moves under faults: %v", total)
	}
}

// Each broken membership variant is caught by its invariant on some seed;
// the seed and the command that replays it are printed.
func TestShardsSimCatchesMemberVariants(t *testing.T) {
	cases := []struct {
		variant, faults, want string
		ops                   int
		seeds                 int64
	}{
		{"member-bootstrap", "dead", "served by two configurations", 400, 3},
		{"member-no-remove", "dead", "after the faults healed", 400, 3},
		// The old member goes before the new one is in: a crash or a pause
		// while the group has two members takes its majority.
		{"member-remove-first", "dead,crash,pause", "fewer than a majority", 600, 10},
	}
	if testing.Short() {
		cases = cases[:2]
	}
	for _, c := range cases {
		t.Run(c.variant, func(t *testing.T) {
			for s := int64(1); s <= c.seeds; s++ {
				cfg := shardsCfg(s)
				cfg.Faults, cfg.Ops, cfg.Broken = c.faults, c.ops, c.variant
				r, err := RunShards(cfg)
				if err != nil {
					t.Fatalf("seed %d: %v", s, err)
				}
				if strings.Contains(r.Invariant, c.want) {
					t.Logf("seed %d caught: %s\nreplay: %s", s, r.Invariant, ShardsReplay(cfg, s))
					return
				}
				t.Logf("seed %d not caught (%s): %v", s, r.Invariant, r.Stats)
			}
			t.Errorf("%s not caught (%q) in seeds 1-%d", c.variant, c.want, c.seeds)
		})
	}
}
