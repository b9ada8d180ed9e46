package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/shard"
)

// A statically placed sharded namespace (shards with nodes in the cluster
// file, no placement block) of a protocol other than paxos (shardks49,
// session 49; docs/SHARDING.md, "Which protocols shard"): go-redis's
// ClusterClient writes and reads every key through CLUSTER SLOTS, a plain
// client on a node of the other group is served by forwarding, a
// connection that spoke the cluster protocol gets MOVED, and DBSIZE
// answers for the namespace. MSET over two groups: a cross-shard
// transaction where the protocol runs atomic groups
// (automaton.TransactionsOf(p).Atomic: pbpaxos, unreplicated), one
// request per key where it does not (abd, esds); CLUSTER MIGRATE is
// refused without atomic groups. ABD is a register: DBSIZE is refused as
// on an unsharded ABD namespace. ESDS reads are eventual: a key written
// at one replica is read at another once gossiped.
func TestShardedOtherProtocols(t *testing.T) {
	for _, p := range []string{"abd", "esds", "pbpaxos", "unreplicated"} {
		t.Run(p, func(t *testing.T) {
			ns := config.Namespace{Name: "default", Protocol: p, Service: "kv", Shards: []config.Shard{
				{Name: "s0", Slots: "0-8191", Nodes: []string{"n1", "n2", "n3"}},
				{Name: "s1", Slots: "8192-16383", Nodes: []string{"n4", "n5", "n6"}},
			}}
			if p == "esds" {
				ns.Params = map[string]string{"volatile": "true"} // memory durability, no restarts here
			}
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
			var a, b string // keys of s0 and s1
			for i := 0; i < 40; i++ {
				k := fmt.Sprintf("k%d", i)
				if err := cc.Set(ctx, k, i, 0).Err(); err != nil {
					t.Fatalf("ClusterClient SET %s: %v", k, err)
				}
				if shard.KeySlot(k) < 8192 {
					a = k
				} else {
					b = k
				}
			}
			pc := redis.NewClient(&redis.Options{Addr: addrs[1]}) // n2: s0 only
			defer pc.Close()
			for i := 0; i < 40; i++ {
				k := fmt.Sprintf("k%d", i)
				var v int
				var err error
				for ctx.Err() == nil {
					if v, err = pc.Get(ctx, k).Int(); err == nil && v == i || p != "esds" {
						break
					}
					time.Sleep(20 * time.Millisecond) // ESDS: until gossiped
				}
				if err != nil || v != i {
					t.Fatalf("plain GET %s at n2 = %d, %v; want %d", k, v, err, i)
				}
			}
			conn := pc.Conn()
			defer conn.Close()
			if err := conn.Do(ctx, "READONLY").Err(); err != nil {
				t.Fatal(err)
			}
			if err := conn.Get(ctx, b).Err(); err == nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("MOVED %d ", shard.KeySlot(b))) {
				t.Errorf("GET %s (s1) at n2 after READONLY = %v, want MOVED", b, err)
			}
			n, err := pc.DBSize(ctx).Result()
			if p == "abd" {
				if err == nil {
					t.Errorf("DBSIZE on sharded abd = %d, want refused (a register)", n)
				}
			} else if err != nil || n != 40 {
				t.Errorf("DBSIZE = %d, %v; want 40", n, err)
			}
			// MSET over both groups: a cross-shard transaction with atomic
			// groups; without, the gateway sends one request per key (as
			// on an unsharded namespace of the protocol: not atomic
			// across keys), each routed to its group.
			atomic := automaton.TransactionsOf(p).Atomic
			if err := pc.MSet(ctx, a, "x", b, "y").Err(); err != nil {
				t.Fatalf("MSET %s %s across groups on %s: %v", a, b, p, err)
			}
			for k, want := range map[string]string{a: "x", b: "y"} {
				var v string
				for ctx.Err() == nil {
					if v = pc.Get(ctx, k).Val(); v == want || p != "esds" {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				if v != want {
					t.Errorf("GET %s after the MSET = %q, want %q", k, v, want)
				}
			}
			err = pc.Do(ctx, "cluster", "migrate", "s0", "s1", fmt.Sprint(shard.KeySlot(a))).Err() // a's slot
			if !atomic && (err == nil || !strings.Contains(err.Error(), "cannot migrate")) {
				t.Errorf("CLUSTER MIGRATE on %s = %v, want refused", p, err)
			}
			if atomic {
				// The migration ends, and every key reads back (a's from s1).
				if err != nil {
					t.Fatalf("CLUSTER MIGRATE on %s: %v", p, err)
				}
				waitPhase(t, ctx, pc, "done")
				for i := 0; i < 40; i++ {
					k := fmt.Sprintf("k%d", i)
					want := fmt.Sprint(i)
					if k == a {
						want = "x"
					} else if k == b {
						want = "y"
					}
					if v, err := cc.Get(ctx, k).Result(); err != nil || v != want {
						t.Fatalf("GET %s after migrating %s's slot = %q, %v; want %q", k, a, v, err, want)
					}
				}
				if st, err := migStatus(ctx, pc); err != nil || st["keys_copied"] == "0" || st["keys_copied"] == "" {
					t.Errorf("migration status %v, %v: no key copied", st, err)
				}
			}
			t.Logf("%s: DBSIZE %d; cross-group MSET %v; CLUSTER MIGRATE %v", p, n, atomic, err)
		})
	}
}
