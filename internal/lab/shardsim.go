package lab

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/internal/cli"
	"github.com/synod-dev/synod/sim"
)

func init() {
	var (
		cfg        sim.ShardsConfig
		seeds      string
		scale      string
		trace      string
		perShard   int
		opsPerShrd int
		place      string
		migLoad    bool
		migAt      time.Duration
	)
	cmd := &cobra.Command{
		Use:   "shardsim",
		Short: "Simulate a sharded cluster (many replica groups on shared machines) with migrations under faults, or measure its throughput as shards grow",
		Long: `Simulate one sharded KV namespace: --shards replica groups owning the 16,384
hash slots and --spares owning none, their replicas (paxos) spread over
--machines machines (0: one machine per replica), each machine one processor,
one disk and one fate shared by the replicas it hosts. Cluster clients route by
their copy of the slot map and follow MOVED, ASK and TRYAGAIN; --plain of them
send to any machine, which forwards. --migrations splits, merges and moves run
through the real migration machine (package shard) while --faults (all, none,
or a comma list of crash, partition, loss, dup, pause, slow, reorder, power,
dead) strike; the placer (--plan decide) also carries out replacements of dead
machines' replicas, replica moves and leader moves through the groups' own
membership changes. Each step checks that no group
applies a client's write to a slot its log has given away, each slot map
places every slot once, each group keeps a majority of live members and one
chain of configurations (and its replica count once the faults heal), and the
history is checked for linearizability.
Every failing seed is printed with the command that replays it; the exit
status is non-zero if any seed fails.

--scale 1,2,4,8 instead measures throughput in the CPU model (--op-cost,
--msg-cost, --apply-cost, --fwd-cost) for each shard count, over --seeds, with
--clients-per-shard closed-loop clients and --ops-per-shard operations per
shard, and prints throughput and per-machine CPU utilisation beside their
spread. --machines 0 gives every replica its own machine (3 per shard).`,
		Example: `  synod-lab shardsim --seeds 1-20 --shards 2 --spares 1 --faults all --migrations 3 --plain 0.25 --think uniform:20ms:60ms
  synod-lab shardsim --seeds 3 --broken keep-accepting --faults none --migrations 2
  synod-lab shardsim --seeds 1-20 --faults all --hot 0.8 --txn-clients 4 --plain 0.25 --think uniform:20ms:60ms
  synod-lab shardsim --scale 1,2,4,8 --seeds 1-3 --machines 0 --plain 0.5
  synod-lab shardsim --scale 1,2,4,8 --seeds 1-3 --machines 9 --plain 0.5
  synod-lab shardsim --migration-load --shards 2 --seeds 1-3 --clients-per-shard 64 --ops-per-shard 20000 --plain 0.5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ss, err := sim.ParseSeeds(seeds)
			if err != nil {
				return err
			}
			if place != "" {
				if cfg.Place, err = sim.ParsePlaceParams(place); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			if migLoad {
				return sim.MigrationLoad(cfg, ss, perShard*cfg.Shards, opsPerShrd*cfg.Shards, migAt, out)
			}
			if scale != "" {
				var points []int
				for _, p := range strings.Split(scale, ",") {
					n, err := strconv.Atoi(strings.TrimSpace(p))
					if err != nil || n < 1 {
						return fmt.Errorf("--scale %q: want a comma list of shard counts", scale)
					}
					points = append(points, n)
				}
				return sim.ShardScale(cfg, points, ss, perShard, opsPerShrd, out)
			}
			if trace != "" {
				if len(ss) != 1 {
					return fmt.Errorf("--trace needs exactly one seed")
				}
				f, err := os.Create(trace)
				if err != nil {
					return err
				}
				defer f.Close()
				cfg.Trace = f
			}
			failed := 0
			for _, s := range ss {
				c := cfg
				c.Seed = s
				r, err := sim.RunShards(c)
				if err != nil {
					return err
				}
				verdict := "ok"
				if r.Failed() {
					failed++
					verdict = "FAIL"
				}
				fmt.Fprintf(out, "seed %d %s: %s check=%s", s, verdict, r.Stats, r.Check)
				if r.Decisions != "" {
					fmt.Fprintf(out, " decisions: %s", r.Decisions)
				}
				if r.TxnOps > 0 {
					fmt.Fprintf(out, " txn-check=%s (%d bank ops, %d cross-shard attempts, %d answered early, %d of them at the decision from the prepares)", r.TxnCheck, r.TxnOps, r.Stats.Txns, r.Stats.TxnEarly, r.Stats.TxnEvaluated)
				}
				fmt.Fprintln(out)
				if r.Failed() {
					if r.Invariant != "" {
						fmt.Fprintf(out, "  invariant: %s\n", r.Invariant)
					}
					if r.Detail != "" {
						fmt.Fprintf(out, "  history: %s\n", firstLines(r.Detail, 6))
					}
					if r.TxnDetail != "" {
						fmt.Fprintf(out, "  bank history: %s\n", firstLines(r.TxnDetail, 6))
					}
					fmt.Fprintf(out, "  replay: %s\n", sim.ShardsReplay(cfg, s))
				}
			}
			fmt.Fprintf(out, "%d seeds, %d failed\n", len(ss), failed)
			if failed > 0 {
				return fmt.Errorf("%d of %d seeds failed", failed, len(ss))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&seeds, "seeds", "1", "seeds: N, N-M or a comma list")
	f.StringVar(&cfg.Protocol, "protocol", "paxos", "the groups' protocol (one with atomic groups)")
	f.IntVar(&cfg.Shards, "shards", 2, "groups owning slots at the start")
	f.IntVar(&cfg.Spares, "spares", 1, "groups owning no slots at the start (splits move slots into them)")
	f.BoolVar(&cfg.Incarnations, "incarnations", false, "with --new-groups and --place-replicas -1: a created group a merge empties is retired and its name created again at the next incarnation (a fresh group on the machines the placer chooses); --broken reuse-name: without the incarnation in the name, caught")
	f.IntVar(&cfg.NewGroups, "new-groups", 0, "group names reserved for splits into new groups: no replicas at the start; a split with no spare creates one on the least loaded machines and migrates the slots into it")
	f.BoolVar(&cfg.CutByLoad, "cut-by-load", false, "give the placer per-slot request rates: a split by load cuts where the load halves (default: at the median slot)")
	f.IntVar(&cfg.Machines, "machines", 0, "machines (0: one per replica)")
	f.IntVar(&cfg.Clients, "clients", 8, "closed-loop clients")
	f.IntVar(&cfg.TxnClients, "txn-clients", 0, "bank clients: transfers and whole-bank reads over accounts in several groups (cross-shard two-phase commit), judged by the strict-serializability checker")
	f.IntVar(&cfg.Ops, "ops", 1500, "operations in all")
	f.StringVar(&cfg.Faults, "faults", "all", "none, all, or a comma list of "+strings.Join(sim.ShardFaultKinds, ","))
	f.IntVar(&cfg.Migrations, "migrations", 3, "splits, merges and moves to run, in turn")
	f.StringVar(&cfg.Plan, "plan", "decide", "what starts migrations: decide (the placement policy, shard.Decide, on the simulated load and size) or rotation (split, merge, move in turn)")
	f.IntVar(&cfg.PlaceReplicas, "place-replicas", 0, "replicate the placement namespace (slot map, migration and members records) in a group of the protocol on this many machines, whose leader runs the placer and the drivers and replaces its dead members (0: the default, 3 with --plan decide; -1: the records are registers)")
	f.StringVar(&place, "place", "", "Decide's thresholds, a comma list of split_ops=, merge_ops=, split_keys=, merge_keys=, merge_delay=, cooldown=, dead_after=, balance_ops=, balance_margin= (default sim.SimPlaceParams; balance_ops > 0 turns balance by load on)")
	f.Float64Var(&cfg.Hot, "hot", 0, "fraction of operations on the hot keys in hot phases, which alternate with quiet ones (0: uniform keys, no phases)")
	f.IntVar(&cfg.HotKeys, "hot-keys", 0, "hot keys per hot phase (default 1)")
	f.DurationVar(&cfg.HotPhase, "hot-phase", 0, "length of a hot or quiet phase (default 2s)")
	f.IntVar(&cfg.Keys, "keys", 32, "distinct keys")
	f.Float64Var(&cfg.PlainFrac, "plain", 0, "fraction of clients that are not cluster clients (any machine, which forwards)")
	f.StringVar(&cfg.Latency, "latency", "", "machine-to-machine latency (default "+sim.DefaultLatency+")")
	f.StringVar(&cfg.Think, "think", "", "a client's pause between operations (default "+sim.DefaultThink+")")
	f.StringVar(&cfg.OpCost, "op-cost", "", "CPU per client request at a replica")
	f.StringVar(&cfg.MsgCost, "msg-cost", "", "CPU per peer message")
	f.StringVar(&cfg.ApplyCost, "apply-cost", "", "CPU per service Apply")
	f.StringVar(&cfg.FwdCost, "fwd-cost", "", "CPU per request a machine forwards for a plain client")
	f.StringVar(&cfg.Broken, "broken", "", "a deliberately wrong variant: keep-accepting (groups admit slots they gave away), placer-overreach (decided slots run one past the decision), member-remove-first (a replacement removes the old member before adding the new), member-no-remove (adds without removing), member-bootstrap (the new member starts as a founding member of a new configuration), place-no-guard (with --place-replicas: placement record writes without their version guards), members-no-guard (with --place-replicas: members record writes without their version guards, derived from the placement leader's possibly old view), split-publish-early (with --new-groups: a split into a new group publishes it as the slots' owner before the migration fences the source), reuse-name (with --incarnations: a retired name is founded again without an incarnation, so an old replica's messages reach the new group)")
	f.BoolVar(&cfg.NoInvariants, "no-invariants", false, "skip the step invariants (the history check alone)")
	f.StringVar(&scale, "scale", "", "measure throughput for these shard counts (comma list) instead")
	f.IntVar(&perShard, "clients-per-shard", 64, "--scale: closed-loop clients per shard")
	f.IntVar(&opsPerShrd, "ops-per-shard", 20000, "--scale: operations per shard")
	f.BoolVar(&migLoad, "migration-load", false, "measure throughput and latency before, during and after one split under load, in the CPU model (--shards groups and a spare, --clients-per-shard, --ops-per-shard, --at)")
	f.DurationVar(&migAt, "at", 2*time.Second, "--migration-load: when the split starts (virtual time)")
	f.StringVar(&trace, "trace", "", "write a trace of one seed to this file")
	cli.AddCommand(cmd)
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n  ")
}
