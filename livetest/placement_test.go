package livetest

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/shard"
)

// TestPlacementSplitsAndReplaces: 9 processes, fsync, two shards (s0 on
// n1-n3 owns 0-8191, s1 on n4-n6 the rest) and a spare (s2, n7-n9), the
// placement service on with split_ops 100. A go-redis ClusterClient load
// on s0's slots makes the placement leader split s0: the upper part of its
// slots moves to s2 (epoch 2). Keys of s1's slots are written, then n5
// (in s1) is killed -9: after dead_after (3 s) the placement leader
// decides to replace n5's replica of s1 and carries it out (a node
// outside s1 starts its replica, is added and caught up, n5 is removed,
// the members recorded: each step in the decision log). Every
// acknowledged write reads back; then one more member of s1 is killed -9
// and s1 still takes writes, which read back; n5, restarted, does not
// serve s1 (INFO shards: local=0).
func TestPlacementSplitsAndReplaces(t *testing.T) {
	if testing.Short() {
		t.Skip("9 processes")
	}
	c := upCluster(t, cluster.UpOptions{Nodes: 9, Shards: 2, Spares: 1, Protocol: "paxos", Service: "kv", Durability: "fsync",
		Placement: &config.Placement{SplitOps: 100, NoMerge: true, DeadAfter: "3s", Cooldown: "2s"}})
	addrs := c.ClientAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second,
		ClusterStateReloadInterval: 2 * time.Second})
	defer cc.Close()
	admin := redis.NewClient(&redis.Options{Addr: addrs[0]})
	defer admin.Close()
	status := func() string {
		s, err := admin.Do(ctx, "cluster", "migration", "status").Text()
		if err != nil {
			return err.Error()
		}
		return s
	}
	var hot []string
	for i := 0; len(hot) < 400; i++ {
		if k := fmt.Sprintf("h%d", i); shard.KeySlot(k) <= 8191 {
			hot = append(hot, k)
		}
	}
	var mu sync.Mutex
	acked := map[string]int{}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var errs, sets atomic.Int64
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 1; !stop.Load() && ctx.Err() == nil; i++ {
				k := hot[w*50+i%50]
				if err := cc.Set(ctx, k, i, 0).Err(); err != nil {
					errs.Add(1)
					continue
				}
				sets.Add(1)
				mu.Lock()
				acked[k] = i
				mu.Unlock()
			}
		}(w)
	}
	start := time.Now()
	for ctx.Err() == nil && !strings.Contains(status(), "epoch: 2") {
		time.Sleep(200 * time.Millisecond)
	}
	for ctx.Err() == nil && !strings.Contains(status(), "phase: done") {
		time.Sleep(200 * time.Millisecond)
	}
	split := time.Since(start)
	stop.Store(true)
	wg.Wait()
	st := status()
	// The cut is by the per-slot load (split46): near the median, not at it.
	if ctx.Err() != nil || !regexp.MustCompile(`split from=0 to=2 slots=[0-9]+-8191 `).MatchString(st) {
		t.Fatalf("no split of s0 into s2: %s", st)
	}
	t.Logf("split done %v after the load started: %d SETs acknowledged, %d errors", split.Round(time.Millisecond), sets.Load(), errs.Load())

	// Keys of s1's slots, which n5's replacement must receive.
	var cold []string
	for i := 0; len(cold) < 300; i++ {
		if k := fmt.Sprintf("c%d", i); shard.KeySlot(k) > 8191 {
			cold = append(cold, k)
		}
	}
	// setS1 writes every cold key, each retried for up to 20 s (a killed
	// member's connection, a cluster client's stale map).
	setS1 := func(round int) {
		for _, k := range cold {
			v := round*1000 + len(k)
			var err error
			for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				if err = cc.Set(ctx, k, v, 0).Err(); err == nil {
					break
				}
			}
			if err != nil {
				t.Fatalf("SET %s (round %d): %v; status:\n%s", k, round, err, status())
			}
			acked[k] = v
		}
	}
	readBack := func(when string) {
		for k, v := range acked {
			got, err := cc.Get(ctx, k).Int()
			if err != nil || got != v {
				t.Fatalf("%s: key %s: acknowledged %d, read %d (%v)", when, k, v, got, err)
			}
		}
	}
	setS1(1)

	killed := time.Now()
	if err := c.Kill("n5"); err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil && !strings.Contains(status(), "replace group=1 node=n5") {
		time.Sleep(200 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatalf("no replacement of n5 decided: %s", status())
	}
	decided := time.Since(killed)
	for ctx.Err() == nil && !strings.Contains(status(), "step recorded group=1 node=n5") {
		if strings.Contains(status(), "step failed group=1 node=n5") {
			t.Logf("a replacement step failed (it is decided again): %s", status())
		}
		time.Sleep(200 * time.Millisecond)
	}
	st = status()
	if ctx.Err() != nil {
		t.Fatalf("the replacement of n5 was not carried out: %s", st)
	}
	t.Logf("replacement of n5 decided %v and recorded %v after the kill; status:\n%s", decided.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond), st)
	readBack("after the replacement")

	// One more member of s1 down: s1 still has a majority (its new member
	// among it) and takes writes.
	var s1 []string
	for _, line := range strings.Split(infoShards(ctx, t, admin), "\n") {
		if strings.HasPrefix(line, "default#s1:") {
			_, rest, _ := strings.Cut(line, "nodes=")
			rest, _, _ = strings.Cut(rest, ",")
			s1 = strings.Fields(rest)
		}
	}
	if len(s1) != 3 || strings.Contains(strings.Join(s1, " "), "n5") {
		t.Fatalf("s1's members after the replacement: %v", s1)
	}
	second := s1[0]
	if second == "n4" { // a placement member too: take the other old one
		second = s1[1]
	}
	if err := c.Kill(second); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	setS1(2)
	t.Logf("s1 members %v; %s killed -9: %d SETs of s1 acknowledged in %v", s1, second, len(cold), time.Since(t0).Round(time.Millisecond))
	readBack("with a second member of s1 down")

	// n5 restarted: not a member of s1 any more, it does not serve it.
	if err := restartRetrying(t, c, "n5"); err != nil {
		t.Fatal(err)
	}
	n5 := redis.NewClient(&redis.Options{Addr: addrs[4]})
	defer n5.Close()
	var info string
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if info = infoShards(ctx, t, n5); strings.Contains(info, "default#s1:") && !strings.Contains(info, "n5") {
			break
		}
	}
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "default#s1:") && (!strings.Contains(line, "local=0") || strings.Contains(line, "n5")) {
			t.Fatalf("restarted n5 still serves s1: %s", line)
		}
	}
	for _, k := range cold[:20] {
		if got, err := n5.Get(ctx, k).Int(); err != nil || got != acked[k] {
			t.Fatalf("GET %s at the restarted n5: %d %v, want %d", k, got, err, acked[k])
		}
	}
}

// infoShards is a node's INFO shards section ("" on an error).
func infoShards(ctx context.Context, t *testing.T, c *redis.Client) string {
	s, err := c.Info(ctx, "shards").Result()
	if err != nil {
		t.Logf("INFO shards: %v", err)
		return ""
	}
	return s
}
