package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/shard"
)

// go-redis's ClusterClient (the version go.mod pins) against a sharded
// namespace in-process: it reads CLUSTER SLOTS and sends each key to its
// group's nodes. A plain client on a node that replicates no group of a
// key is served by forwarding; a connection that spoke the cluster
// protocol is redirected with MOVED instead.
func TestShardedRedisCluster(t *testing.T) {
	ns := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv", Shards: []config.Shard{
		{Name: "s0", Slots: "0-5460", Nodes: []string{"n1", "n2", "n3"}},
		{Name: "s1", Slots: "5461-10922", Nodes: []string{"n4", "n5", "n6"}},
		{Name: "s2", Slots: "10923-16383", Nodes: []string{"n1", "n5", "n6"}},
	}}
	cfg, ls := mkCluster(t, 6, config.Memory, ns)
	var addrs []string
	for i, l := range ls {
		startNode(t, cfg, fmt.Sprintf("n%d", i+1), l, Options{})
		addrs = append(addrs, cfg.Nodes[i].Client)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs[:1]})
	defer cc.Close()
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(slots) != 3 || slots[0].Start != 0 || slots[0].End != 5460 || len(slots[1].Nodes) != 3 {
		t.Fatalf("CLUSTER SLOTS = %+v", slots)
	}
	for i := 0; i < 300; i++ {
		if err := cc.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err(); err != nil {
			t.Fatalf("set k%d: %v", i, err)
		}
	}
	for i := 0; i < 300; i++ {
		if v, err := cc.Get(ctx, fmt.Sprintf("k%d", i)).Int(); err != nil || v != i {
			t.Fatalf("get k%d = %d, %v", i, v, err)
		}
	}
	// MGET across slots: ClusterClient splits it by slot; one slot's keys
	// (a hash tag) go in one command.
	if vs, err := cc.MGet(ctx, "{u}1", "{u}2").Result(); err != nil || vs[0] != nil {
		t.Fatalf("MGET {u}1 {u}2 = %v, %v", vs, err)
	}
	if err := cc.Incr(ctx, "{u}1").Err(); err != nil {
		t.Fatal(err)
	}

	// A plain client on n2, which replicates only s0, reads every key.
	pc := redis.NewClient(&redis.Options{Addr: addrs[1]})
	defer pc.Close()
	for i := 0; i < 300; i += 7 {
		if v, err := pc.Get(ctx, fmt.Sprintf("k%d", i)).Int(); err != nil || v != i {
			t.Fatalf("plain get k%d at n2 = %d, %v", i, v, err)
		}
	}
	if info := pc.Info(ctx, "cluster").Val(); !strings.Contains(info, "cluster_enabled:1") {
		t.Fatalf("INFO cluster on a sharded namespace:\n%s", info)
	}
	// Keys in two groups in one command from a plain client: a computed
	// cross-shard transaction (txn.go), where Redis Cluster answers
	// CROSSSLOT.
	var a, b string
	for i := 0; a == "" || b == ""; i++ {
		k := fmt.Sprintf("k%d", i)
		switch config.SlotMap(ns).Group(k) {
		case 0:
			a = k
		case 1:
			b = k
		}
	}
	va := pc.Get(ctx, a).Val()
	if err := pc.Rename(ctx, a, b).Err(); err != nil {
		t.Fatalf("RENAME across shards = %v", err)
	}
	if v := pc.Get(ctx, b).Val(); v != va || pc.Exists(ctx, a).Val() != 0 {
		t.Fatalf("after RENAME %s %s: %s = %q (want %q), %s exists %d", a, b, b, v, va, a, pc.Exists(ctx, a).Val())
	}
	if err := pc.Rename(ctx, b, a).Err(); err != nil { // put it back for what follows
		t.Fatal(err)
	}

	// A connection that spoke the cluster protocol gets MOVED for s1's
	// key at n2, naming a node of s1.
	conn := pc.Conn()
	defer conn.Close()
	if err := conn.Do(ctx, "READONLY").Err(); err != nil {
		t.Fatal(err)
	}
	err = conn.Get(ctx, b).Err()
	want := fmt.Sprintf("MOVED %d ", shard.KeySlot(b))
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("GET %s after READONLY at n2 = %v, want %s<addr>", b, err, want)
	}
	host := strings.TrimPrefix(err.Error(), want)
	if host != addrs[3] && host != addrs[4] && host != addrs[5] {
		t.Fatalf("MOVED to %s, not a node of s1 (%v)", host, addrs[3:])
	}
	if got := conn.Do(ctx, "CLUSTER", "KEYSLOT", "somekey").Val(); got != int64(11058) {
		t.Fatalf("CLUSTER KEYSLOT somekey = %v", got)
	}
	nodesText := conn.Do(ctx, "CLUSTER", "NODES").Val().(string)
	if strings.Count(nodesText, "\n") != 6 || !strings.Contains(nodesText, "myself") {
		t.Fatalf("CLUSTER NODES:\n%s", nodesText)
	}
	if _, err := cc.ClusterShards(ctx).Result(); err != nil {
		t.Fatalf("CLUSTER SHARDS: %v", err)
	}
}
