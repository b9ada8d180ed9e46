package livetest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
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

// migrationStatus reads CLUSTER MIGRATION STATUS ("name: value" lines).
func migrationStatus(ctx context.Context, c *redis.Client) (map[string]string, error) {
	s, err := c.Do(ctx, "cluster", "migration", "status").Text()
	if err != nil {
		return nil, err
	}
	return parseMigrationStatus(s), nil
}

// parseMigrationStatus is CLUSTER MIGRATION STATUS's text as fields.
func parseMigrationStatus(s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		out[k] = v
	}
	return out
}

// TestMigrateUnderLoadKillSourceLeader runs 9 processes (synod cluster up
// --nodes 9 --shards 3, fsync) and moves slots 0-1999 from s0 to s1 while
// go-redis's ClusterClient and redis-py's RedisCluster write and read keys
// of those slots, and kill -9s s0's leader (the source's) during the copy,
// restarts it, then kill -9s s1's (the destination's): one node down at a
// time, the failure model of groups of 3.
// Required: the migration finishes (its driver resumes from the logged
// phase), no read returns a value older than the one its client's last
// acknowledged write made (each key has one writer), every acknowledged
// write reads back afterwards, and CLUSTER SLOTS names s1 for the range.
func TestMigrateUnderLoadKillSourceLeader(t *testing.T) {
	py, pyErr := shardPython()
	if pyErr != nil && os.Getenv("SYNOD_REQUIRE_COMPAT") != "" {
		t.Fatalf("redis-py required (SYNOD_REQUIRE_COMPAT): %v", pyErr)
	}
	var dialLogs atomic.Int64
	redis.SetLogger(redisLogger(func(string, ...any) { dialLogs.Add(1) }))
	defer redis.SetLogger(redisLogger(func(f string, a ...any) { fmt.Fprintf(os.Stderr, "redis: "+f+"\n", a...) }))
	c := upCluster(t, cluster.UpOptions{Nodes: 9, Shards: 3, Protocol: "paxos", Service: "kv", Durability: "fsync"})
	addrs := c.ClientAddrs()
	ns := c.Config.Namespaces[0]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	moved := []shard.Range{{First: 0, Last: 1999}}

	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second,
		ClusterStateReloadInterval: 2 * time.Second})
	defer cc.Close()
	// Preload: 2,000 keys of the range, 512 bytes each.
	var keys []string
	pad := strings.Repeat("x", 500)
	for i := 0; len(keys) < 2000; i++ {
		if k := fmt.Sprintf("pre-%d", i); shard.InRanges(moved, shard.KeySlot(k)) {
			keys = append(keys, k)
		}
	}
	for i, k := range keys {
		if err := cc.Set(ctx, k, fmt.Sprintf("%s=0;%s", k, pad), 0).Err(); err != nil {
			t.Fatalf("preload %d: %v", i, err)
		}
	}

	// redis-py, concurrently.
	var pyOut, pyErrOut bytes.Buffer
	var pyCmd *exec.Cmd
	if pyErr == nil {
		host, port, _ := strings.Cut(addrs[0], ":")
		pyCmd = exec.CommandContext(ctx, py, "testdata/rediscluster_migrate.py", host, port, "15", "0", "1999", "50")
		pyCmd.Stdout, pyCmd.Stderr = &pyOut, &pyErrOut
		if err := pyCmd.Start(); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Logf("redis-py part SKIPPED: %v", pyErr)
	}

	// go-redis writers: writer w owns keys w, w+4, ... of the first 200;
	// it writes k=<seq> and reads k back.
	const writers = 4
	var stop atomic.Bool
	var wg sync.WaitGroup
	var lastAck sync.Map // key -> seq
	var sets, gets, errs, stale atomic.Int64
	var staleMsg atomic.Value
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for seq := 1; !stop.Load(); seq++ {
				for i := w; i < 200 && !stop.Load(); i += writers {
					k := keys[i]
					if err := cc.Set(ctx, k, fmt.Sprintf("%s=%d;%s", k, seq, pad), 0).Err(); err != nil {
						errs.Add(1)
						time.Sleep(20 * time.Millisecond)
						continue
					}
					sets.Add(1)
					lastAck.Store(k, seq)
					v, err := cc.Get(ctx, k).Result()
					if err != nil {
						errs.Add(1)
						continue
					}
					gets.Add(1)
					if got := seqOf(v); got < seq {
						stale.Add(1)
						staleMsg.CompareAndSwap(nil, fmt.Sprintf("read %s = seq %d after acknowledged write %d", k, got, seq))
					}
				}
			}
		}(w)
	}

	admin := redis.NewClient(&redis.Options{Addr: addrs[8], ReadTimeout: 10 * time.Second})
	defer admin.Close()
	time.Sleep(time.Second)
	start := time.Now()
	if err := admin.Do(ctx, "cluster", "migrate", "s0", "s1", "0-1999", "rate", "1000").Err(); err != nil {
		t.Fatal(err)
	}
	// Kill -9 the source's leader once the copy has started.
	var st map[string]string
	for ctx.Err() == nil {
		st, _ = migrationStatus(ctx, admin)
		if n, _ := strconv.Atoi(st["keys_copied"]); n >= 300 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	leader := shardLeader(t, ctx, addrs[1], config.GroupName(ns.Name, ns.Shards[0].Name))
	if err := c.Kill(leader); err != nil {
		t.Fatalf("kill %s: %v", leader, err)
	}
	killedAt := time.Since(start)
	t.Logf("kill -9 %s, the leader of %s, %v after the start, at phase %s with %s keys copied", leader, ns.Shards[0].Name, killedAt.Round(time.Millisecond), st["phase"], st["keys_copied"])
	// One node down at a time: a group of 3 keeps a majority only so, and
	// the two leaders may both be members of the placement namespace
	// (n1, n4, n7 of 9), whose quorum the migration's driver needs. Two
	// nodes down at once is beyond the failure model, and the clean-clone
	// CI at f83135f saw exactly that (n1 and n4 killed; the migration
	// could not go on). So the source's leader is restarted before the
	// destination's is killed.
	time.Sleep(time.Second)
	if err := restartRetrying(t, c, leader); err != nil {
		t.Fatalf("restart %s: %v", leader, err)
	}
	t.Logf("restarted %s, %v after the start", leader, time.Since(start).Round(time.Millisecond))
	// Then the destination's leader, once the copy has gone further.
	phases, last := []string{st["phase"]}, st["phase"]
	destKilled := ""
	for ctx.Err() == nil {
		s, err := migrationStatus(ctx, admin)
		if err == nil {
			st = s
			if st["phase"] != last {
				last = st["phase"]
				phases = append(phases, fmt.Sprintf("%s@%v", last, time.Since(start).Round(time.Millisecond)))
			}
			if st["phase"] == "done" {
				break
			}
			if n, _ := strconv.Atoi(st["keys_copied"]); destKilled == "" && n >= 1200 {
				destKilled = shardLeader(t, ctx, addrs[4], config.GroupName(ns.Name, ns.Shards[1].Name)) // n5, a member of s1
				if err := c.Kill(destKilled); err != nil {
					t.Fatalf("kill %s: %v", destKilled, err)
				}
				t.Logf("kill -9 %s, the leader of %s, %v after the start, at phase %s with %s keys copied", destKilled, ns.Shards[1].Name, time.Since(start).Round(time.Millisecond), st["phase"], st["keys_copied"])
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("migration done in %v: phases %v; status %v", took.Round(time.Millisecond), phases, st)
	if st["phase"] != "done" {
		t.Fatalf("migration did not finish: %v", st)
	}
	time.Sleep(time.Second) // load after the flip: MOVED
	stop.Store(true)
	wg.Wait()
	t.Logf("go-redis: %d SET and %d GET acknowledged, %d errors (unknown outcome), %d stale reads, %d log lines (failed dials)", sets.Load(), gets.Load(), errs.Load(), stale.Load(), dialLogs.Load())
	if m := staleMsg.Load(); m != nil {
		t.Errorf("go-redis: %s", m)
	}
	if tok, _ := strconv.Atoi(st["driver_token"]); tok < 2 {
		t.Logf("the driver was not restarted (token %d): the killed leader did not lead the placement namespace and no action failed", tok)
	}

	if pyCmd != nil {
		if err := pyCmd.Wait(); err != nil {
			t.Fatalf("redis-py: %v\n%s", err, tail(pyErrOut.String(), 20))
		}
		sc := bufio.NewScanner(&pyOut)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) > 0 && (f[0] == "stale" || f[0] == "lost") {
				t.Errorf("redis-py: %s", sc.Text())
			}
		}
		summary := tail(pyErrOut.String(), 1)
		t.Logf("redis-py: %s (writes reads errors)", summary)
		if f := strings.Fields(summary); len(f) != 4 || f[1] == "0" {
			t.Fatalf("redis-py acknowledged nothing:\n%s", tail(pyErrOut.String(), 20))
		}
	}

	// Every acknowledged write reads back through a fresh client.
	fresh := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs[8:], MaxRedirects: 16})
	defer fresh.Close()
	lost := 0
	lastAck.Range(func(k, v any) bool {
		got, err := fresh.Get(ctx, k.(string)).Result()
		if err != nil || seqOf(got) < v.(int) {
			lost++
			t.Errorf("acknowledged %s=%d, read back seq %d (%v)", k, v, seqOf(got), err)
		}
		return lost < 10
	})
	for _, k := range keys[200:] { // untouched by the load: the preload's value
		if got, err := fresh.Get(ctx, k).Result(); err != nil || seqOf(got) != 0 || !strings.HasPrefix(got, k+"=") {
			t.Fatalf("preloaded %s read back %.40q (%v)", k, got, err)
		}
	}
	slots, err := fresh.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	s1 := map[string]bool{}
	for _, id := range ns.Shards[1].Nodes {
		for _, m := range c.Config.Nodes {
			if m.ID == id {
				s1[m.Client] = true
			}
		}
	}
	for _, r := range slots {
		if r.Start == 0 && (len(r.Nodes) == 0 || !s1[r.Nodes[0].Addr]) {
			t.Fatalf("CLUSTER SLOTS: slots %d-%d served by %v, want a node of %s", r.Start, r.End, r.Nodes, ns.Shards[1].Name)
		}
	}
}

// seqOf reads the sequence number of a value "<key>=<seq>;...".
func seqOf(v string) int {
	_, rest, ok := strings.Cut(v, "=")
	if !ok {
		return -1
	}
	n, _, _ := strings.Cut(rest, ";")
	x, err := strconv.Atoi(n)
	if err != nil {
		return -1
	}
	return x
}
