package livetest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// TestShardedClusterKillGroupLeader runs a 9-node cluster whose default
// namespace is split into 3 paxos shards of 3 nodes (synod cluster up
// --nodes 9 --shards 3, fsync), with go-redis's ClusterClient (go.mod's
// pinned version) and redis-py's RedisCluster (scripts/test's pinned
// version) writing keys across every slot. It kill -9s the leader of one
// shard under that load and requires: writes to that shard's slots are
// acknowledged again after the kill, and every acknowledged write of
// either client reads back afterwards (through a fresh cluster client and
// through a plain client on a node that replicates none of the key's
// group, which forwards).
func TestShardedClusterKillGroupLeader(t *testing.T) {
	py, pyErr := shardPython()
	if pyErr != nil && os.Getenv("SYNOD_REQUIRE_COMPAT") != "" {
		t.Fatalf("redis-py required (SYNOD_REQUIRE_COMPAT): %v", pyErr)
	}
	// go-redis logs each failed dial to the killed node; count them instead.
	var dialLogs atomic.Int64
	redis.SetLogger(redisLogger(func(string, ...any) { dialLogs.Add(1) }))
	defer redis.SetLogger(redisLogger(func(f string, a ...any) { fmt.Fprintf(os.Stderr, "redis: "+f+"\n", a...) }))
	c := upCluster(t, cluster.UpOptions{Nodes: 9, Shards: 3, Protocol: "paxos", Service: "kv", Durability: "fsync"})
	addrs := c.ClientAddrs()
	ns := c.Config.Namespaces[0]
	slots := config.SlotMap(ns)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// go-redis v9.22 reloads its slot table on MOVED/ASK or every
	// ClusterStateReloadInterval (60 s by default), not after a failed dial:
	// CLUSTER SLOTS names each shard's leader (leader gossip), so the
	// default client dials the killed leader for up to 60 s
	// (docs/ROBUSTNESS.md N10, docs/SHARDING.md). 2 s is what a user
	// wanting fast fail-over sets.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second,
		ClusterStateReloadInterval: 2 * time.Second})
	defer cc.Close()

	// redis-py, concurrently with the Go writers and the kill.
	var pyOut, pyErrOut bytes.Buffer
	var pyCmd *exec.Cmd
	if pyErr == nil {
		host, port, _ := strings.Cut(addrs[0], ":")
		pyCmd = exec.CommandContext(ctx, py, "testdata/rediscluster.py", host, port, "12")
		pyCmd.Stdout, pyCmd.Stderr = &pyOut, &pyErrOut
		if err := pyCmd.Start(); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Logf("redis-py part SKIPPED: %v", pyErr)
	}

	const writers = 6
	type ack struct{ key, val string }
	var mu sync.Mutex
	var acked []ack
	var killedAt atomic.Int64 // unix nanos; 0 before the kill
	var victimGroup int
	var afterKill atomic.Int64      // acknowledged writes to the victim's group after the kill
	var firstAfterKill atomic.Int64 // unix nanos of the first of them
	var errs atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k, v := fmt.Sprintf("go%d-%d", w, i), fmt.Sprint(i)
				if err := cc.Set(ctx, k, v, 0).Err(); err != nil {
					errs.Add(1) // unknown outcome
					time.Sleep(20 * time.Millisecond)
					continue
				}
				mu.Lock()
				acked = append(acked, ack{k, v})
				mu.Unlock()
				if ka := killedAt.Load(); ka != 0 && slots.Group(k) == victimGroup {
					if afterKill.Add(1) == 1 {
						firstAfterKill.Store(time.Now().UnixNano())
					}
				}
			}
		}()
	}
	time.Sleep(2 * time.Second)

	// The leader of shard s1, as its members report it (INFO shards).
	victimGroup = 1
	leader := shardLeader(t, ctx, addrs[3], config.GroupName(ns.Name, ns.Shards[1].Name))
	if err := c.Kill(leader); err != nil {
		t.Fatalf("kill %s: %v", leader, err)
	}
	killedAt.Store(time.Now().UnixNano())
	t.Logf("kill -9 %s, the leader of %s", leader, ns.Shards[1].Name)
	// A node that replicates none of s1 (n1) names s1's new leader as its
	// master in CLUSTER SLOTS once s1 has elected one (leader gossip,
	// node/leadergossip.go; docs/ROBUSTNESS.md N10).
	learned := nonMemberLearnsLeader(t, ctx, c, addrs[0], ns, 1, leader)
	t.Logf("n1's CLUSTER SLOTS named %s's new leader %s %v after the kill", ns.Shards[1].Name, learned.leader, learned.after.Round(time.Millisecond))
	// go-redis keeps sending the shard's slots to the node it last knew as
	// master until its slot table is reloaded (ClusterStateReloadInterval
	// above, osscluster.go clusterStateHolder.Get); a Redis Cluster failover
	// takes longer (cluster-node-timeout, 15 s). So the load runs until 20
	// writes to the shard are acknowledged after the kill, 40 s at most.
	for deadline := time.Now().Add(40 * time.Second); afterKill.Load() < 20 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	firstAfter := time.Duration(firstAfterKill.Load() - killedAt.Load())
	close(stop)
	wg.Wait()
	mu.Lock()
	goAcked := append([]ack(nil), acked...)
	mu.Unlock()
	t.Logf("go-redis: %d acknowledged writes (%d to %s after the kill, the first %v after it), %d errors (unknown outcome), %d log lines (failed dials)",
		len(goAcked), afterKill.Load(), ns.Shards[1].Name, firstAfter.Round(time.Millisecond), errs.Load(), dialLogs.Load())
	if afterKill.Load() < 20 {
		// What each node says of the shard now, for the next reader.
		probe := "probe"
		for i := 0; slots.Group(probe) != victimGroup; i++ {
			probe = fmt.Sprintf("probe%d", i)
		}
		for i, a := range addrs {
			pc := redis.NewClient(&redis.Options{Addr: a, ReadTimeout: 3 * time.Second})
			plainErr := pc.Set(ctx, probe, "1", 0).Err() // before CLUSTER: a plain connection
			slotsReply, serr := pc.Do(ctx, "CLUSTER", "SLOTS").Result()
			info, _ := pc.Info(ctx, "shards").Result()
			awareErr := pc.Set(ctx, probe, "1", 0).Err() // after CLUSTER: may be MOVED
			pc.Close()
			t.Logf("n%d %s: SET %s (slot of %s) plain: %v, cluster-aware: %v; CLUSTER SLOTS %v (%v); INFO shards:\n%s",
				i+1, a, probe, ns.Shards[1].Name, plainErr, awareErr, slotsReply, serr, info)
		}
		for _, id := range ns.Shards[1].Nodes {
			if b, err := os.ReadFile(filepath.Join(c.Dir, id+".log")); err == nil {
				t.Logf("%s.log (the shard's lines, last 40):\n%s", id, tail(grepLines(string(b), ns.Shards[1].Name), 40))
			}
		}
		t.Fatalf("only %d writes to %s acknowledged in 40 s after its leader was killed", afterKill.Load(), ns.Shards[1].Name)
	}

	if pyCmd != nil {
		err := pyCmd.Wait()
		if err != nil {
			t.Fatalf("redis-py: %v\n%s", err, tail(pyErrOut.String(), 20))
		}
		n := 0
		sc := bufio.NewScanner(&pyOut)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 2 && f[0] == "lost":
				t.Errorf("redis-py: acknowledged write of %s lost (read back by redis-py)", f[1])
			case len(f) == 2:
				goAcked = append(goAcked, ack{f[0], f[1]})
				n++
			}
		}
		t.Logf("redis-py: %d acknowledged writes; %s", n, tail(pyErrOut.String(), 1))
		if n == 0 {
			t.Fatalf("redis-py acknowledged nothing:\n%s", tail(pyErrOut.String(), 20))
		}
	}

	// Every acknowledged write, read by a fresh cluster client, and a
	// sample by a plain client on n1, which replicates only s0 and so
	// forwards the other shards' keys.
	fresh := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs[:1], MaxRedirects: 16})
	defer fresh.Close()
	plain := redis.NewClient(&redis.Options{Addr: addrs[0]})
	defer plain.Close()
	lost := 0
	for i, a := range goAcked {
		got, err := fresh.Get(ctx, a.key).Result()
		if err != nil || got != a.val {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged %s=%s, read back %q, %v", a.key, a.val, got, err)
			}
			continue
		}
		if i%17 == 0 {
			if got, err := plain.Get(ctx, a.key).Result(); err != nil || got != a.val {
				t.Errorf("plain client on n1: %s (slot %d) = %q, %v; want %s", a.key, shard.KeySlot(a.key), got, err, a.val)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged writes lost", lost, len(goAcked))
	}
}

type learnedLeader struct {
	leader string
	after  time.Duration // since the kill
}

// nonMemberLearnsLeader waits until shard gi's surviving members agree on
// a leader other than killed, then until the node at addr (not a member)
// names that leader first for the shard's slots in CLUSTER SLOTS; it fails
// the test when that takes more than 30 s after the kill.
func nonMemberLearnsLeader(t *testing.T, ctx context.Context, c *cluster.Cluster, addr string, ns config.Namespace, gi int, killed string) learnedLeader {
	t.Helper()
	start := time.Now()
	group := config.GroupName(ns.Name, ns.Shards[gi].Name)
	client := map[string]string{}
	for _, m := range c.Config.Nodes {
		client[m.ID] = m.Client
	}
	first, _, _ := strings.Cut(ns.Shards[gi].Slots, "-")
	pc := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 3 * time.Second})
	defer pc.Close()
	var last any
	for time.Since(start) < 30*time.Second {
		var agreed string
		for _, id := range ns.Shards[gi].Nodes {
			if id == killed {
				continue
			}
			l := infoLeader(ctx, client[id], group)
			if l == "" || l == killed || (agreed != "" && l != agreed) {
				agreed = ""
				break
			}
			agreed = l
		}
		if agreed != "" {
			cs, err := pc.ClusterSlots(ctx).Result()
			last = cs
			if err != nil {
				last = err
			}
			for _, r := range cs {
				if fmt.Sprint(r.Start) == first && len(r.Nodes) > 0 && r.Nodes[0].Addr == client[agreed] {
					return learnedLeader{agreed, time.Since(start)}
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s (a non-member) does not name %s's new leader in CLUSTER SLOTS 30 s after %s was killed; last answer %v", addr, group, killed, last)
	return learnedLeader{}
}

// infoLeader is the leader of group the node at addr names (INFO shards),
// "" when none or unreachable.
func infoLeader(ctx context.Context, addr, group string) string {
	c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: time.Second, DialTimeout: time.Second, MaxRetries: -1})
	defer c.Close()
	info, err := c.Info(ctx, "shards").Result()
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), group+":"); ok {
			for _, kv := range strings.Split(rest, ",") {
				if id, ok := strings.CutPrefix(kv, "leader="); ok {
					return id
				}
			}
		}
	}
	return ""
}

// shardLeader asks the node at addr for group's leader until it names one
// (INFO shards: "<group>:slots=...,leader=nK,...").
func shardLeader(t *testing.T, ctx context.Context, addr, group string) string {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := c.Info(ctx, "shards").Result()
		if err == nil {
			for _, l := range strings.Split(info, "\n") {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(l), group+":"); ok {
					for _, kv := range strings.Split(rest, ",") {
						if id, ok := strings.CutPrefix(kv, "leader="); ok && id != "" {
							return id
						}
					}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s names no leader of %s within 10 s (%v):\n%s", addr, group, err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// shardPython finds an interpreter that imports redis-py (scripts/test
// installs it and exports SYNOD_COMPAT_PYTHON).
func shardPython() (string, error) {
	py := os.Getenv("SYNOD_COMPAT_PYTHON")
	if py == "" {
		var err error
		if py, err = exec.LookPath("python3"); err != nil {
			return "", fmt.Errorf("python3 not found")
		}
	}
	if out, err := exec.Command(py, "-c", "import redis.cluster").CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s cannot import redis.cluster: %s", py, strings.TrimSpace(string(out)))
	}
	return py, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// redisLogger is a go-redis logger (redis.SetLogger) calling f.
type redisLogger func(format string, a ...any)

func (l redisLogger) Printf(_ context.Context, format string, a ...any) { l(format, a...) }

// grepLines keeps the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
