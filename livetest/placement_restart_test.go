package livetest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/shard"
)

// TestShardedMigrationKillsAndWholeRestart (issue 33 items 2, 3 and 6):
// a sharded paxos cluster with fsync moves a slot range from one group to
// another at a limited rate while 8 recorded clients (the project's
// client, which any node serves by forwarding) read and write keys in and
// out of the range. During the copy, kill -9 of the source group's
// leader (restarted a second later), then of the placement namespace's
// leader (restarted likewise), then of every node at once, restarted in
// reverse order. Required: the migration finishes (its driver resumes
// from the phase recorded in #placement), the whole history, final reads
// through every node included, is linearizable (package check), every
// preloaded key reads back, and every node's CLUSTER SLOTS places each of
// the 16,384 slots exactly once, all nodes alike, the range on the
// destination's nodes.
//
// CI runs 6 nodes, 2 shards, 300 preloaded keys at 60 keys/s, one round
// (about a minute). The longer variant is a command:
//
//	SYNOD_PLACEKILL_NODES=9 SYNOD_PLACEKILL_ROUNDS=3 go test -count=1 -run TestShardedMigrationKillsAndWholeRestart -v ./livetest
//
// (9 nodes, 3 shards; each round moves the range back the other way.)
func TestShardedMigrationKillsAndWholeRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("real node processes, kill -9 and a whole-cluster restart")
	}
	nodes, rounds := 6, 1
	if s := os.Getenv("SYNOD_PLACEKILL_NODES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 6 || v%3 != 0 {
			t.Fatalf("SYNOD_PLACEKILL_NODES=%q: want 6, 9, 12, ...", s)
		}
		nodes = v
	}
	if s := os.Getenv("SYNOD_PLACEKILL_ROUNDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("SYNOD_PLACEKILL_ROUNDS=%q: want a positive count", s)
		}
		rounds = v
	}
	shards := nodes / 3
	c := upCluster(t, cluster.UpOptions{Nodes: nodes, Shards: shards, Protocol: "paxos", Service: "kv", Durability: "fsync"})
	defer func() {
		if t.Failed() {
			logTails(t, c.Dir, 40)
		}
	}()
	addrs := c.ClientAddrs()
	ids := make([]string, nodes)
	for i := range ids {
		ids[i] = fmt.Sprintf("n%d", i+1)
	}
	ns := c.Config.Namespaces[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(3+2*rounds)*time.Minute)
	defer cancel()
	// The range moved: the first 1,000 slots of s0.
	s0 := c.Config.ShardGroups(ns)[0].Slots[0]
	moved := []shard.Range{{First: s0.First, Last: s0.First + 999}}
	rangeText := shard.FormatSlots(moved)

	// Preload 50 keys of the range per node (300 with 6 nodes), 256 bytes each,
	// so that the copy lasts several seconds at the rate below.
	preload := 300 * nodes / 6
	pad := strings.Repeat("p", 250)
	var pre []string
	for i := 0; len(pre) < preload; i++ {
		if k := fmt.Sprintf("pre-%d", i); shard.InRanges(moved, shard.KeySlot(k)) {
			pre = append(pre, k)
		}
	}
	plain := redis.NewClient(&redis.Options{Addr: addrs[nodes-1], ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	defer plain.Close()
	for i, k := range pre {
		if err := plain.Set(ctx, k, k+"="+pad, 0).Err(); err != nil {
			t.Fatalf("preload %d: %v", i, err)
		}
	}

	// The recorded load: 24 keys, 16 in the range and 8 outside it.
	var keys []string
	for i := 0; len(keys) < 24; i++ {
		k := fmt.Sprintf("k%d", i)
		if in := shard.InRanges(moved, shard.KeySlot(k)); in && len(keys) < 16 || !in && len(keys) >= 16 {
			keys = append(keys, k)
		}
	}
	r := newRecorder(t, "paxos", "fsync")
	stop := make(chan struct{})
	done := make(chan struct{})
	const clients = 8
	go func() {
		defer close(done)
		wait := make(chan struct{}, clients)
		for i := 0; i < clients; i++ {
			go func(i int) { runClient(t, r, i, addrs, keys, stop); wait <- struct{}{} }(i)
		}
		for i := 0; i < clients; i++ {
			<-wait
		}
	}()

	// status reads CLUSTER MIGRATION STATUS through any node that answers.
	status := func() map[string]string {
		for _, a := range addrs {
			cl := redis.NewClient(&redis.Options{Addr: a, ReadTimeout: 3 * time.Second, MaxRetries: -1})
			st, err := migrationStatus(ctx, cl)
			cl.Close()
			if err == nil && st["phase"] != "" {
				return st
			}
		}
		return nil
	}
	copied := func(st map[string]string) int { n, _ := strconv.Atoi(st["keys_copied"]); return n }
	// waitFor polls status until f holds or the migration is done, for
	// at most 90 s; it returns the last status.
	waitFor := func(what string, f func(map[string]string) bool) map[string]string {
		t.Helper()
		var st map[string]string
		for deadline := time.Now().Add(90 * time.Second); ctx.Err() == nil && time.Now().Before(deadline); {
			if st = status(); st != nil && (f(st) || st["phase"] == "done") {
				return st
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("waiting for %s: not within 90 s (%v); last status %v", what, ctx.Err(), st)
		return nil
	}
	// leaders: every group (the placement namespace's too) names a leader
	// at some live node.
	groups := []string{config.PlacementName}
	for _, s := range ns.Shards {
		groups = append(groups, config.GroupName(ns.Name, s.Name))
	}
	leaderOf := func(group string) string { return groupLeader(ctx, addrs, group) } // splitkill_test.go
	allLed := func(limit time.Duration) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for _, g := range groups {
			for leaderOf(g) == "" {
				if time.Now().After(deadline) {
					t.Fatalf("%s names no leader %v after the restart", g, limit)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	kill := func(id, why string, st map[string]string) {
		t.Helper()
		if err := c.Kill(id); err != nil {
			t.Fatalf("kill %s: %v", id, err)
		}
		t.Logf("kill -9 %s (%s) at phase %s, %d keys copied", id, why, st["phase"], copied(st))
	}
	restart := func(id string) {
		t.Helper()
		if err := restartRetrying(t, c, id); err != nil {
			t.Fatalf("restart %s: %v", id, err)
		}
	}

	from, to := ns.Shards[0].Name, ns.Shards[1].Name
	for round := 1; round <= rounds; round++ {
		start := time.Now()
		admin := redis.NewClient(&redis.Options{Addr: addrs[nodes-1], ReadTimeout: 10 * time.Second})
		if err := admin.Do(ctx, "cluster", "migrate", from, to, rangeText, "rate", strconv.Itoa(60*nodes/6)).Err(); err != nil {
			t.Fatalf("round %d: CLUSTER MIGRATE %s %s %s: %v", round, from, to, rangeText, err)
		}
		admin.Close()
		t.Logf("round %d: migrating %s from %s to %s", round, rangeText, from, to)
		fromGroup := config.GroupName(ns.Name, from)

		// 1. The source's leader, once the copy has begun.
		st := waitFor("the copy to begin", func(st map[string]string) bool { return copied(st) >= preload/6 })
		if st["phase"] != "done" {
			victim := leaderOf(fromGroup)
			kill(victim, "the leader of "+from, st)
			time.Sleep(time.Second)
			restart(victim)
			allLed(30 * time.Second)
		}
		// 2. The placement namespace's leader (the migration's driver),
		// once the copy went on after the first kill.
		was := copied(st)
		st = waitFor("the copy to go on", func(st map[string]string) bool { return copied(st) >= preload/3 && copied(st) > was })
		if st["phase"] != "done" {
			victim := leaderOf(config.PlacementName)
			kill(victim, "the leader of "+config.PlacementName+", the migration's driver", st)
			time.Sleep(time.Second)
			restart(victim)
			allLed(30 * time.Second)
		}
		// 3. Every node at once, then restarted in reverse order.
		was = copied(st)
		st = waitFor("the copy to go further", func(st map[string]string) bool { return copied(st) >= preload/2 && copied(st) > was })
		atKill := st["phase"]
		for _, id := range ids {
			if err := c.Kill(id); err != nil {
				t.Fatalf("kill %s: %v", id, err)
			}
		}
		t.Logf("round %d: kill -9 of all %d nodes at phase %s, %d keys copied, %v after the start", round, nodes, atKill, copied(st), time.Since(start).Round(time.Millisecond))
		for i := len(ids) - 1; i >= 0; i-- {
			restart(ids[i])
		}
		allLed(60 * time.Second)
		t.Logf("round %d: every group leads again %v after the start", round, time.Since(start).Round(time.Millisecond))
		st = waitFor("the migration to finish", func(map[string]string) bool { return false })
		t.Logf("round %d: migration done %v after the start: driver token %s, %s keys copied (copied again after restarts count twice)",
			round, time.Since(start).Round(time.Millisecond), st["driver_token"], st["keys_copied"])
		if st["from"] != from || st["to"] != to {
			t.Fatalf("round %d: the last migration is %s -> %s, want %s -> %s: %v", round, st["from"], st["to"], from, to, st)
		}
		from, to = to, from
	}
	time.Sleep(time.Second) // load after the last flip
	close(stop)
	<-done
	t.Logf("load: %d writes acknowledged, %d of unknown outcome, %d reads, %d failed reads",
		r.stats.ackedWrites.Load(), r.stats.unknownWrites.Load(), r.stats.ackedReads.Load(), r.stats.failedReads.Load())
	if r.stats.ackedWrites.Load() == 0 {
		t.Fatal("the load acknowledged no write")
	}
	readAll(t, r, addrs, keys, "after the restarts")
	checkHistory(t, r, "the whole run")

	// Every preloaded key reads back.
	for _, k := range pre {
		if got, err := plain.Get(ctx, k).Result(); err != nil || got != k+"="+pad {
			t.Fatalf("preloaded %s read back %.40q (%v)", k, got, err)
		}
	}
	// Every node places each slot exactly once, all alike; the range on
	// the group the last round moved it to (from, after the swap).
	owner := map[string]string{} // client address -> its group's short name
	for _, s := range ns.Shards {
		for _, id := range s.Nodes {
			for _, m := range c.Config.Nodes {
				if m.ID == id {
					owner[m.Client] = s.Name
				}
			}
		}
	}
	var first []string
	for i, a := range addrs {
		cl := redis.NewClient(&redis.Options{Addr: a, ReadTimeout: 5 * time.Second})
		slots, err := cl.ClusterSlots(ctx).Result()
		cl.Close()
		if err != nil {
			t.Fatalf("CLUSTER SLOTS at %s: %v", ids[i], err)
		}
		by := make([]string, shard.Slots)
		for _, rg := range slots {
			g := ""
			var ms []string
			for _, m := range rg.Nodes {
				ms = append(ms, m.Addr)
				if g == "" {
					g = owner[m.Addr]
				} else if owner[m.Addr] != g {
					t.Fatalf("CLUSTER SLOTS at %s: slots %d-%d on nodes of two groups %v", ids[i], rg.Start, rg.End, rg.Nodes)
				}
			}
			sort.Strings(ms)
			for sl := rg.Start; sl <= rg.End; sl++ {
				if by[sl] != "" {
					t.Fatalf("CLUSTER SLOTS at %s: slot %d placed twice (%s and %s)", ids[i], sl, by[sl], g)
				}
				by[sl] = g
			}
		}
		for sl, g := range by {
			if g == "" {
				t.Fatalf("CLUSTER SLOTS at %s: slot %d placed nowhere", ids[i], sl)
			}
			if shard.InRanges(moved, sl) && g != from {
				t.Fatalf("CLUSTER SLOTS at %s: moved slot %d on %s, want %s", ids[i], sl, g, from)
			}
		}
		if first == nil {
			first = by
		} else if !slices.Equal(first, by) {
			t.Fatalf("CLUSTER SLOTS at %s differs from %s's", ids[i], ids[0])
		}
	}
	t.Logf("every node places each of the %d slots once, alike; %s on %s", shard.Slots, rangeText, from)
}
