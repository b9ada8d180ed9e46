package node

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/shard"
)

// A split into a new group, under load (session 45): s0 owns slots
// 0-1023 on n1-n3, s1 the rest on n4-n6 (no merges), s2 is an unplaced
// shard (no nodes, no slots) and there is no spare. A load on s0's slots
// over split_ops makes the placement leader create s2 on three of the
// least loaded nodes (by groups plus leaders), wait for it to answer and
// migrate the upper part of s0's slots into it (cut by load, split46).
// Checked: the map names s2 the owner of c-1023 and s0 of 0-(c-1) (epoch
// 2); s2 runs on exactly the nodes the
// decision names, which INFO shards lists; the decision log shows the
// decision (create=...) and the created and migrating steps; the
// metrics count the creation; every acknowledged write reads back, and a
// read after each acknowledged write returned it (no write lost, none
// read stale) through the creation and the migration.
func TestPlacementSplitsIntoNewGroup(t *testing.T) {
	c := startSplitCluster(t, &config.Placement{SplitOps: 40, NoMerge: true, Cooldown: "1s", Rate: 5000, BalanceOps: -1})
	ctx, nodes, addrs, plain := c.ctx, c.nodes, c.addrs, c.plain
	var hot []string
	for i := 0; len(hot) < 200; i++ {
		if k := fmt.Sprintf("k%d", i); shard.KeySlot(k) < 1024 {
			hot = append(hot, k)
		}
	}
	load := startHotLoad(ctx, t, plain, hot)
	// Until the migration into s2 is done (n2's view names s2 the owner),
	// and a second more of load on both halves.
	c.waitSplit()
	time.Sleep(time.Second)
	acked, errs := load.stop()
	s, v, log := c.split(t)
	t.Logf("%d keys acknowledged, %d errors", len(acked), errs)
	// The cut is by the per-slot load (split46; slotload.go): the load is
	// spread over s0's slots, so near the median, not at it.
	if len(v.groups[2]) != 1 || v.groups[2][0].Last != 1023 || shard.FormatSlots(v.groups[0]) != fmt.Sprintf("0-%d", v.groups[2][0].First-1) || shard.FormatSlots(v.groups[1]) != "1024-16383" {
		t.Fatalf("after the split: %v", v.groups)
	}
	cut := v.groups[2][0].First
	// The decision names the nodes; s2 runs there and nowhere else.
	i := strings.Index(log, "create=")
	if i < 0 || !strings.Contains(log, "step created") || !strings.Contains(log, "step migrating") {
		t.Fatalf("the decision log does not show the creation:\n%s", log)
	}
	created := strings.Fields(log[i+len("create="):])[0]
	members := s.members(2)
	if len(members) != 3 || fmt.Sprint(members) != "["+strings.ReplaceAll(created, ",", " ")+"]" {
		t.Fatalf("s2's members %v, the decision created it on %s", members, created)
	}
	for j, n := range nodes {
		id := fmt.Sprintf("n%d", j+1)
		if runs := n.serves("default#s2"); runs != strings.Contains(","+created+",", ","+id+",") {
			t.Fatalf("%s serves s2: %v; created on %s", id, runs, created)
		}
	}
	info, err := redis.NewClient(&redis.Options{Addr: addrs[0]}).Info(ctx, "shards").Result()
	if err != nil || !strings.Contains(info, fmt.Sprintf("default#s2:slots=%d-1023,nodes=", cut)+strings.ReplaceAll(created, ",", " ")) {
		t.Fatalf("INFO shards does not show s2 on %s: %v\n%s", created, err, info)
	}
	var made, dec float64
	for _, n := range nodes {
		made += counterValue(t, n, "synod_placement_groups_created_total", "namespace", "default")
		dec += counterValue(t, n, "synod_placement_decisions_total", "kind", "split-new-group")
	}
	if made != 1 || dec != 1 {
		t.Fatalf("groups created %v, split-new-group decisions %v (want 1, 1)", made, dec)
	}
	readBack(ctx, t, plain, acked, func() {})
	moved := 0
	for k := range acked {
		if shard.KeySlot(k) >= cut {
			moved++
		}
	}
	t.Logf("every acknowledged write reads back: %d keys, %d of them moved to the new group", len(acked), moved)
}

// splitCluster is the split tests' cluster (in memory): s0 owns slots
// 0-1023 on n1-n3, s1 the rest on n4-n6, s2 is an unplaced shard, with
// placement pl; plain and admin are clients of n2, ctx ends the test's
// time (180 s).
type splitCluster struct {
	ctx          context.Context
	nodes        []*Node
	addrs        []string
	plain, admin *redis.Client
	cfg          *config.Cluster
}

func startSplitCluster(t *testing.T, pl *config.Placement) *splitCluster {
	return startSplitClusterIn(t, pl, config.Memory)
}

// startSplitClusterIn is startSplitCluster with durability dur.
func startSplitClusterIn(t *testing.T, pl *config.Placement, dur string) *splitCluster {
	ns := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv", Shards: []config.Shard{
		{Name: "s0", Slots: "0-1023", Nodes: []string{"n1", "n2", "n3"}},
		{Name: "s1", Slots: "1024-16383", Nodes: []string{"n4", "n5", "n6"}},
		{Name: "s2", Slots: ""},
	}, Placement: pl}
	cfg, ls := mkCluster(t, 6, dur, ns)
	c := &splitCluster{cfg: cfg}
	for i, l := range ls {
		c.nodes = append(c.nodes, startNode(t, cfg, fmt.Sprintf("n%d", i+1), l, Options{}))
		c.addrs = append(c.addrs, cfg.Nodes[i].Client)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	c.ctx = ctx
	c.plain = redis.NewClient(&redis.Options{Addr: c.addrs[1], ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
	c.admin = redis.NewClient(&redis.Options{Addr: c.addrs[1]})
	t.Cleanup(func() { c.plain.Close(); c.admin.Close(); cancel() })
	return c
}

// waitSplit waits until n2's map names s2 the owner of slots (or the
// test's time ends).
func (c *splitCluster) waitSplit() {
	for c.ctx.Err() == nil {
		if v := c.nodes[1].shards["default"].view(); v.epoch >= 2 && len(v.groups[2]) > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// split fails unless waitSplit saw the split, and returns n2's namespace,
// its map, and the status and decision log (logged).
func (c *splitCluster) split(t *testing.T) (*shardedNS, *slotView, string) {
	t.Helper()
	if c.ctx.Err() != nil {
		t.Fatalf("no split into s2 within the time; status: %v", statusText(context.Background(), c.admin)+c.nodes[0].placementLog(context.Background(), c.nodes[0].shards["default"], placeLogLen))
	}
	s := c.nodes[1].shards["default"]
	v := s.view()
	log := statusText(c.ctx, c.admin) + c.nodes[1].placementLog(c.ctx, s, placeLogLen)
	t.Logf("epoch %d %v; status and decision log:\n%s", v.epoch, v.groups, log)
	return s, v, log
}

// cutInside fails unless s0 was cut once inside slots lo-hi (s2 owns
// c-1023, lo < c <= hi) so that each side keeps between a quarter and
// three quarters of keys; it returns the cut and the keys that stay.
func cutInside(t *testing.T, v *slotView, keys []string, lo, hi int) (int, int) {
	t.Helper()
	moved := v.groups[2]
	if len(moved) != 1 || moved[0].Last != 1023 || shard.FormatSlots(v.groups[1]) != "1024-16383" {
		t.Fatalf("after the split: %v", v.groups)
	}
	cut := moved[0].First
	below := 0
	for _, k := range keys {
		if shard.KeySlot(k) < cut {
			below++
		}
	}
	if cut <= lo || cut > hi || below < len(keys)/4 || below > 3*len(keys)/4 {
		t.Fatalf("s0 was cut at slot %d: %d of the %d keys (slots %d-%d) stay, %d move; want a cut inside their slots that divides them", cut, below, len(keys), lo, hi, len(keys)-below)
	}
	return cut, below
}

// hotLoad is 4 writers, each on its own 50 of keys, SET then GET (a read
// after an acknowledged write must return it), until stopped.
type hotLoad struct {
	mu    sync.Mutex
	acked map[string]string
	halt  atomic.Bool
	wg    sync.WaitGroup
	errs  atomic.Int64
}

func startHotLoad(ctx context.Context, t *testing.T, c *redis.Client, keys []string) *hotLoad {
	l := &hotLoad{acked: map[string]string{}}
	for w := 0; w < 4; w++ {
		l.wg.Add(1)
		go func(w int) {
			defer l.wg.Done()
			for i := 0; !l.halt.Load() && ctx.Err() == nil; i++ {
				k := keys[w*50+i%50]
				v := fmt.Sprintf("%d-%d", w, i)
				if err := c.Set(ctx, k, v, 0).Err(); err != nil {
					l.errs.Add(1)
					continue
				}
				l.mu.Lock()
				l.acked[k] = v
				l.mu.Unlock()
				if got, err := c.Get(ctx, k).Result(); err == nil && got != v {
					t.Errorf("read %s = %q after acknowledged %q", k, got, v)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}(w)
	}
	return l
}

// stop ends the load: the last value acknowledged per key, and the errors.
func (l *hotLoad) stop() (map[string]string, int64) {
	l.halt.Store(true)
	l.wg.Wait()
	return l.acked, l.errs.Load()
}

// readBack reads every key of acked in one pipeline (one at a time, 500
// keys took the rest of a test's time under -race at load 35) and fails
// on a value other than the one acknowledged last, after calling explain.
func readBack(ctx context.Context, t *testing.T, c *redis.Client, acked map[string]string, explain func()) {
	t.Helper()
	pipe := c.Pipeline()
	gets := map[string]*redis.StringCmd{}
	for k := range acked {
		gets[k] = pipe.Get(ctx, k)
	}
	pipe.Exec(ctx) // each command's own error is checked below
	for k, want := range acked {
		if got, err := gets[k].Result(); err != nil || got != want {
			explain()
			t.Fatalf("key %s (slot %d): acknowledged %q, read %q (%v)", k, shard.KeySlot(k), want, got, err)
		}
	}
}
