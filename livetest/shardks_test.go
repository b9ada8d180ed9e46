package livetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/shard"
)

// Whole-keyspace commands on a sharded namespace through real processes
// (shardks49, session 49; node/shardks.go): a 6-node cluster, 2 paxos
// shards of 3 nodes (fsync). go-redis's ClusterClient (go.mod's version)
// and a plain client get the namespace's answer from any node; redis-py's
// RedisCluster (scripts/test's version) gets it from dbsize/keys (its
// default node) and sees each key once per primary in scan_iter (it scans
// every primary with a cursor of its own), as docs/SHARDING.md says;
// ClusterClient.DBSize likewise sums every master's answer.
func TestShardedKeyspaceLive(t *testing.T) {
	py, pyErr := shardPython()
	if pyErr != nil && os.Getenv("SYNOD_REQUIRE_COMPAT") != "" {
		t.Fatalf("redis-py required (SYNOD_REQUIRE_COMPAT): %v", pyErr)
	}
	c := upCluster(t, cluster.UpOptions{Nodes: 6, Shards: 2, Protocol: "paxos", Service: "kv", Durability: "fsync"})
	addrs := c.ClientAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16})
	defer cc.Close()
	const n = 200
	for i := 0; i < n; i++ {
		if err := cc.Set(ctx, fmt.Sprintf("gk-%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i, a := range addrs {
		pc := redis.NewClient(&redis.Options{Addr: a})
		got, err := pc.DBSize(ctx).Result()
		pc.Close()
		if err != nil || got != n {
			t.Fatalf("DBSIZE at n%d = %d, %v; want %d", i+1, got, err, n)
		}
	}
	if got, err := cc.Do(ctx, "dbsize").Int64(); err != nil || got != n {
		t.Fatalf("ClusterClient Do(DBSIZE) = %d, %v; want %d", got, err, n)
	}
	var seen []string
	it := cc.Scan(ctx, 0, "gk-*", 9).Iterator()
	for it.Next(ctx) {
		seen = append(seen, it.Val())
	}
	slices.Sort(seen)
	if err := it.Err(); err != nil || len(slices.Compact(seen)) != n {
		t.Fatalf("ClusterClient SCAN: %d distinct keys, %v; want %d", len(slices.Compact(seen)), err, n)
	}
	masters := 0
	if err := cc.ForEachMaster(ctx, func(context.Context, *redis.Client) error { masters++; return nil }); err != nil {
		t.Fatal(err)
	}
	if got := cc.DBSize(ctx).Val(); got != int64(n*masters) {
		t.Errorf("ClusterClient.DBSize = %d, want %d (%d masters, each answering %d): docs/SHARDING.md says so", got, n*masters, masters, n)
	}
	if err := cc.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := cc.Do(ctx, "dbsize").Int64(); err != nil || got != 0 {
		t.Fatalf("DBSIZE after ClusterClient FLUSHDB = %d, %v", got, err)
	}

	if pyErr != nil {
		t.Logf("redis-py part SKIPPED: %v", pyErr)
		return
	}
	host, port, _ := strings.Cut(addrs[0], ":")
	out, err := exec.CommandContext(ctx, py, "testdata/rediscluster_keyspace.py", host, port, fmt.Sprint(n)).CombinedOutput()
	if err != nil {
		t.Fatalf("rediscluster_keyspace.py: %v\n%s", err, out)
	}
	fig := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(l, " ")
		fig[k], _ = strconv.Atoi(v)
	}
	t.Logf("redis-py: %v", fig)
	want := map[string]int{"dbsize": n, "keys": n, "scan_distinct": n, "scan_total": n * fig["primaries"], "plain_scan": n, "randomkey_ok": 1, "flush_dbsize": 0}
	for k, w := range want {
		if fig[k] != w {
			t.Errorf("redis-py %s = %d, want %d\n%s", k, fig[k], w, out)
		}
	}
}

// A statically sharded ABD namespace through real processes (shardks49;
// docs/SHARDING.md, "Which protocols shard"): 6 nodes, 2 shards of 3,
// fsync. go-redis's ClusterClient writes and reads every key, a plain
// client on a node of the other group reads them through forwarding, and
// a connection that spoke the cluster protocol gets MOVED.
func TestShardedABDLive(t *testing.T) {
	c := upCluster(t, cluster.UpOptions{Nodes: 6, Shards: 2, Protocol: "abd", Service: "kv", Durability: "fsync"})
	addrs := c.ClientAddrs()
	ns := c.Config.Namespaces[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs[:1], MaxRedirects: 16})
	defer cc.Close()
	const n = 200
	for i := 0; i < n; i++ {
		if err := cc.Set(ctx, fmt.Sprintf("ak-%d", i), i, 0).Err(); err != nil {
			t.Fatalf("SET ak-%d: %v", i, err)
		}
	}
	for i := 0; i < n; i++ {
		if v, err := cc.Get(ctx, fmt.Sprintf("ak-%d", i)).Int(); err != nil || v != i {
			t.Fatalf("ClusterClient GET ak-%d = %d, %v", i, v, err)
		}
	}
	// n1 does not replicate every group: the others' keys reach it forwarded.
	pc := redis.NewClient(&redis.Options{Addr: addrs[0]})
	defer pc.Close()
	var other string
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("ak-%d", i)
		if v, err := pc.Get(ctx, k).Int(); err != nil || v != i {
			t.Fatalf("plain GET %s at n1 = %d, %v", k, v, err)
		}
		if g := config.SlotMap(ns).Group(k); !slices.Contains(ns.Shards[g].Nodes, "n1") {
			other = k
		}
	}
	if other == "" {
		t.Fatalf("every key is in a group of n1: %+v", ns.Shards)
	}
	conn := pc.Conn()
	defer conn.Close()
	if err := conn.Do(ctx, "READONLY").Err(); err != nil {
		t.Fatal(err)
	}
	if err := conn.Get(ctx, other).Err(); err == nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("MOVED %d ", shard.KeySlot(other))) {
		t.Fatalf("GET %s after READONLY at n1 = %v, want MOVED", other, err)
	}
}
