package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
)

// migrationCluster starts 6 in-process nodes with two shards of
// "default": s0 (slots 0-8191) on n1-n3, s1 on n4-n6 (opts[0], when
// given, are every node's options).
func migrationCluster(t *testing.T, opts ...Options) (*config.Cluster, []*Node, []string) {
	return migrationClusterParams(t, nil, opts...)
}

// migrationClusterParams is migrationCluster with the groups' protocol
// parameters.
func migrationClusterParams(t *testing.T, params map[string]string, opts ...Options) (*config.Cluster, []*Node, []string) {
	ns := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv", Params: params, Shards: []config.Shard{
		{Name: "s0", Slots: "0-8191", Nodes: []string{"n1", "n2", "n3"}},
		{Name: "s1", Slots: "8192-16383", Nodes: []string{"n4", "n5", "n6"}},
	}}
	cfg, ls := mkCluster(t, 6, config.Memory, ns)
	var nodes []*Node
	var addrs []string
	for i, l := range ls {
		o := Options{}
		if len(opts) > 0 {
			o = opts[0]
		}
		nodes = append(nodes, startNode(t, cfg, fmt.Sprintf("n%d", i+1), l, o))
		addrs = append(addrs, cfg.Nodes[i].Client)
	}
	return cfg, nodes, addrs
}

// migStatus reads CLUSTER MIGRATION STATUS into a map.
func migStatus(ctx context.Context, c *redis.Client) (map[string]string, error) {
	s, err := c.Do(ctx, "cluster", "migration", "status").Text()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		out[k] = v
	}
	return out, nil
}

func waitPhase(t *testing.T, ctx context.Context, c *redis.Client, want ...string) map[string]string {
	t.Helper()
	var st map[string]string
	var err error
	for ctx.Err() == nil {
		if st, err = migStatus(ctx, c); err == nil {
			for _, w := range want {
				if st["phase"] == w {
					return st
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st == nil && err == nil {
		t.Fatalf("migration did not reach %v: the test's time was up before the wait began", want)
	}
	t.Fatalf("migration did not reach %v: last status %v, err %v", want, st, err)
	return nil
}

// keysIn lists group gi's keys of slots rs (scanning its state through
// its log, as the driver does).
func keysIn(t *testing.T, ctx context.Context, n *Node, gi int, rs []shard.Range) []string {
	s := n.shards["default"]
	var out []string
	cursor := "0"
	for {
		res, err := n.groupDo(ctx, s, gi, []service.Op{kvOp("scan", "", cursor, "count", "1000")})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range res[0].Elems[1].Elems {
			if !shard.Reserved(string(k.Bytes)) && shard.InRanges(rs, shard.KeySlot(string(k.Bytes))) {
				out = append(out, string(k.Bytes))
			}
		}
		if cursor = string(res[0].Elems[0].Bytes); cursor == "0" {
			return out
		}
	}
}

// A slot range moves from s0 to s1 while go-redis's ClusterClient and a
// plain client (served by forwarding, its redirections followed by the
// node) write and read it: every acknowledged write is read back from
// s1 afterwards, no read returns a value older than the writer's last
// acknowledged one, CLUSTER SLOTS names s1, and s0 no longer holds the
// range's keys.
func TestMigrateSlotsUnderLoad(t *testing.T) {
	_, nodes, addrs := migrationCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	moved := []shard.Range{{First: 0, Last: 1499}}
	var keys []string
	for i := 0; len(keys) < 400; i++ {
		k := fmt.Sprintf("key:%d", i)
		if shard.InRanges(moved, shard.KeySlot(k)) || i%8 == 0 {
			keys = append(keys, k)
		}
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs[:1], MaxRedirects: 16})
	defer cc.Close()
	for _, k := range keys {
		if err := cc.Set(ctx, k, k+"=0", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	plain := redis.NewClient(&redis.Options{Addr: addrs[3]})
	defer plain.Close()

	// Writers: each owns a quarter of the keys, writes k=<seq> and reads
	// back; a read older than its own last acknowledged write fails.
	var stop atomic.Bool
	var wg sync.WaitGroup
	var acked sync.Map // key -> last acknowledged seq
	var ops, errs atomic.Int64
	var firstErr atomic.Value
	for w := 0; w < 4; w++ {
		var c redis.Cmdable = cc
		if w == 3 {
			c = plain
		}
		wg.Add(1)
		go func(w int, c redis.Cmdable) {
			defer wg.Done()
			for seq := 1; !stop.Load(); seq++ {
				for i := w; i < len(keys); i += 4 {
					if stop.Load() {
						return
					}
					k := keys[i]
					oc, ocancel := context.WithTimeout(ctx, 10*time.Second)
					err := c.Set(oc, k, fmt.Sprintf("%s=%d", k, seq), 0).Err()
					if err == nil {
						acked.Store(k, seq)
						var v string
						v, err = c.Get(oc, k).Result()
						if err == nil {
							got, _ := strconv.Atoi(v[strings.LastIndexByte(v, '=')+1:])
							if got < seq {
								err = fmt.Errorf("read %s = %q after acknowledged write %d", k, v, seq)
								firstErr.CompareAndSwap(nil, err)
							}
						}
					}
					ocancel()
					ops.Add(1)
					if err != nil {
						errs.Add(1)
						firstErr.CompareAndSwap(nil, err)
					}
				}
			}
		}(w, c)
	}

	admin := redis.NewClient(&redis.Options{Addr: addrs[1]})
	defer admin.Close()
	time.Sleep(300 * time.Millisecond)
	if err := admin.Do(ctx, "cluster", "migrate", "s0", "s1", "0-1499").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "cluster", "migrate", "s0", "s1", "1500-1600").Err(); err == nil {
		t.Fatal("a second migration started while one is under way")
	}
	st := waitPhase(t, ctx, admin, "done")
	time.Sleep(500 * time.Millisecond) // load after the flip: MOVED
	stop.Store(true)
	wg.Wait()
	t.Logf("migration: %v", st)
	t.Logf("load: %d operations, %d errors", ops.Load(), errs.Load())
	if e := firstErr.Load(); e != nil {
		if strings.Contains(e.(error).Error(), "after acknowledged write") {
			t.Fatal(e)
		}
		t.Logf("first error: %v", e)
	}
	if errs.Load() > ops.Load()/20 {
		t.Fatalf("%d of %d operations failed", errs.Load(), ops.Load())
	}
	// Every acknowledged write reads back (from a fresh client).
	cc2 := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs[5:]})
	defer cc2.Close()
	lost := 0
	acked.Range(func(k, v any) bool {
		got, err := cc2.Get(ctx, k.(string)).Result()
		n, _ := strconv.Atoi(got[strings.LastIndexByte(got, '=')+1:])
		if err != nil || n < v.(int) {
			lost++
			t.Errorf("key %s: acknowledged write %d, read %q (%v)", k, v, got, err)
		}
		return lost < 10
	})
	slots, err := cc2.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	owner := ""
	for _, s := range slots {
		if s.Start == 0 {
			owner = s.Nodes[0].Addr
		}
	}
	if !strings.Contains(strings.Join(addrs[3:], " "), owner) || owner == "" {
		t.Fatalf("CLUSTER SLOTS: slot 0 served by %q, want a node of s1 (%v): %+v", owner, addrs[3:], slots)
	}
	info, err := "", error(nil)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if info, err = cc2.ClusterInfo(ctx).Result(); err == nil && strings.Contains(info, "cluster_current_epoch:2") {
			break
		}
	}
	if err != nil || !strings.Contains(info, "cluster_current_epoch:2") {
		t.Errorf("CLUSTER INFO after the migration: %q, %v; want epoch 2", info, err)
	}
	if left := keysIn(t, ctx, nodes[0], 0, moved); len(left) > 0 {
		t.Fatalf("s0 still holds %d keys of the moved slots: %v", len(left), left[:min(5, len(left))])
	}
	if got := len(keysIn(t, ctx, nodes[0], 1, moved)); got == 0 {
		t.Fatal("s1 holds no key of the moved slots")
	}

	// A write of a moved slot reaches s0 as if routed by a stale map (the
	// node's own map check skipped): s0's log refuses it (the slot is
	// gone), so s1's value stands.
	n1 := nodes[0]
	s := n1.shards["default"]
	k := keys[0]
	for _, x := range keys {
		if shard.InRanges(moved, shard.KeySlot(x)) {
			k = x
			break
		}
	}
	before, _ := cc2.Get(ctx, k).Result()
	resp, err := n1.doGuarded(ctx, s, "default#s0", automaton.Request{ID: automaton.RequestID{Client: 42, Seq: 1}, Op: service.Op{Kind: "set", Key: k, Args: [][]byte{[]byte("stale")}}})
	if err != nil || !strings.HasPrefix(resp.Result.Err, "MOVED ") {
		t.Fatalf("a write routed to s0 by a stale map: %+v, %v; want MOVED", resp.Result, err)
	}
	if after, _ := cc2.Get(ctx, k).Result(); after != before {
		t.Fatalf("%s changed from %q to %q", k, before, after)
	}
	// A node still holding the map from before the flip (it reads the
	// placement namespace every placementPoll) sends a cluster client's
	// read of a moved key to s0, whose log refuses it (gone): before
	// answering MOVED it reads the placement map, finds the flip, and
	// serves the read through s1 instead of sending the client back.
	newest := s.view()
	s.cur.Store(initialView(s.groups))
	aware := gateway.WithClusterMode(ctx, gateway.ClusterMode{Aware: true})
	resp, err = n1.doSharded(aware, "default", automaton.Request{ID: automaton.RequestID{Client: 43, Seq: 1}, Op: service.Op{Kind: "get", Key: k}})
	if err != nil || resp.Result.IsErr() || string(resp.Result.Bytes) != before {
		t.Fatalf("a read at a node holding the map from before the flip: %+v, %v; want %q", resp.Result, err, before)
	}
	if got := s.view().epoch; got < newest.epoch {
		t.Fatalf("epoch %d after the read, want at least %d", got, newest.epoch)
	}
	// Without the guard (the node's own, unchecked path) the same write is
	// applied by s0, which no longer owns the slot: what the guard stops.
	resp, err = n1.do(internalCtx(ctx), "default#s0", automaton.Request{ID: automaton.RequestID{Client: 42, Seq: 2}, Op: service.Op{Kind: "set", Key: k, Args: [][]byte{[]byte("stale")}}})
	if err != nil || resp.Result.IsErr() {
		t.Fatalf("unguarded write: %+v, %v", resp.Result, err)
	}
	if left := keysIn(t, ctx, n1, 0, moved); len(left) != 1 || left[0] != k {
		t.Fatalf("s0 holds %v after the unguarded write, want [%s]", left, k)
	}
}

// Pause holds the copy still, resume lets it go on, and cancel before the
// hand-off leaves every key in the source and none in the destination.
func TestMigrateControl(t *testing.T) {
	_, nodes, addrs := migrationCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rs := []shard.Range{{First: 2000, Last: 3999}}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs[:1]})
	defer cc.Close()
	var keys []string
	for i := 0; len(keys) < 600; i++ {
		if k := fmt.Sprintf("c%d", i); shard.InRanges(rs, shard.KeySlot(k)) {
			keys = append(keys, k)
			if err := cc.Set(ctx, k, "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	admin := redis.NewClient(&redis.Options{Addr: addrs[4]})
	defer admin.Close()
	// Rate 100: the pause below lands after the first saved page (about
	// 240 keys) with the other 360, 3.6 s of copying, still to go. (At
	// 200, 1.8 s: a pause the driver saw 1.5 s late found the copy over.)
	if err := admin.Do(ctx, "cluster", "migrate", "s0", "s1", "2000-3999", "rate", "100").Err(); err != nil {
		t.Fatal(err)
	}
	st := waitPhase(t, ctx, admin, "copy")
	for ctx.Err() == nil {
		if st, _ = migStatus(ctx, admin); st["keys_copied"] != "0" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The driver (on the placement leader, whichever node that is now)
	// sees the pause at its next read of the placement namespace, after
	// the action it is doing; it saves that action's progress, then holds
	// still (node.drive.held counts its holds). The test waits for those
	// holds, not for time: a loaded machine can take seconds over the
	// read and the in-flight import and save (1 s sleeps failed there).
	// A pause the driver ignored ends the copy: caught as a phase past it.
	held := func() (h int64) {
		for _, n := range nodes {
			h += n.drive.held.Load()
		}
		return h
	}
	h0 := held()
	if err := admin.Do(ctx, "cluster", "migration", "pause").Err(); err != nil {
		t.Fatal(err)
	}
	waitHeld := func(want int64) {
		t.Helper()
		for held() < want {
			st, err := migStatus(ctx, admin)
			if err == nil && st["phase"] != "copy" {
				t.Fatalf("paused, yet the copy went on to %s: %v", st["phase"], st)
			}
			if ctx.Err() != nil {
				t.Fatalf("the driver never held still for the pause (%d holds): %v, %v", held()-h0, st, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitHeld(h0 + 1)
	a, err := migStatus(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	// Ten more holds: the driver has looked at the pause again and
	// waited at least 1 s of its own time, copying nothing.
	waitHeld(held() + 10)
	b, err := migStatus(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if a["keys_copied"] != b["keys_copied"] || a["phase"] != "copy" || b["phase"] != "copy" {
		t.Fatalf("paused, yet the copy went on: %v then %v", a, b)
	}
	t.Logf("paused at %s keys copied, %s left (estimate), %s bytes left", b["keys_copied"], b["keys_left"], b["bytes_left"])
	if err := admin.Do(ctx, "cluster", "migration", "resume").Err(); err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil {
		if st, _ = migStatus(ctx, admin); st["keys_copied"] != b["keys_copied"] {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := admin.Do(ctx, "cluster", "migration", "cancel").Err(); err != nil {
		t.Fatal(err)
	}
	st = waitPhase(t, ctx, admin, "canceled")
	t.Logf("canceled: %v", st)
	if st["epoch"] != "1" {
		t.Fatalf("a cancelled migration changed the map: epoch %s", st["epoch"])
	}
	if got := len(keysIn(t, ctx, nodes[0], 0, rs)); got != len(keys) {
		t.Fatalf("s0 holds %d of the %d keys after the cancel", got, len(keys))
	}
	if got := keysIn(t, ctx, nodes[0], 1, rs); len(got) != 0 {
		t.Fatalf("s1 still holds %d keys after the cancel", len(got))
	}
	for _, k := range keys[:50] {
		if err := cc.Set(ctx, k, "after", 0).Err(); err != nil {
			t.Fatalf("write after the cancel: %v", err)
		}
	}
	var e error
	if e = admin.Do(ctx, "cluster", "migration", "pause").Err(); e == nil || !errors.Is(e, e) {
		t.Fatal("pause of a finished migration was accepted")
	}
}

// The placement namespace's leader stops during the copy: its driver
// stops with it, the new placement leader's driver takes over (a new
// token, fencing the old one) and finishes from the saved record, and
// every acknowledged write reads back.
func TestMigratePlacementLeaderStops(t *testing.T) {
	cfg, nodes, addrs := migrationCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rs := []shard.Range{{First: 0, Last: 2999}}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16, ClusterStateReloadInterval: time.Second})
	defer cc.Close()
	var keys []string
	for i := 0; len(keys) < 300; i++ {
		if k := fmt.Sprintf("p%d", i); shard.InRanges(rs, shard.KeySlot(k)) {
			keys = append(keys, k)
			if err := cc.Set(ctx, k, "0", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	pg, _ := cfg.PlacementGroup()
	leader := -1
	for ctx.Err() == nil && leader < 0 {
		for i, n := range nodes {
			if n.leadsPlacement() {
				leader = i
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	admin := redis.NewClient(&redis.Options{Addr: addrs[(leader+1)%len(addrs)]})
	defer admin.Close()
	// The copy saves its record after each scan page (about 90 of the 300
	// keys here) and the admin node reads it every placementPoll, so the
	// record shows a copy under way only between its first page and its
	// last: at 50 keys/s at least 4 s, waited after the page's import
	// whatever the load. (At 150 keys/s it was 1.4 s, and a test that did
	// not see it under -race at load 30 waited for it until its context
	// ended.) A catch-up pass is still the copy (keys move while the
	// source serves); a later phase fails at once.
	if err := admin.Do(ctx, "cluster", "migrate", "s0", "s1", "0-2999", "rate", "50").Err(); err != nil {
		t.Fatal(err)
	}
	for {
		st, err := migStatus(ctx, admin)
		if err == nil && (st["phase"] == "copy" && st["keys_copied"] != "0" || st["phase"] == "catchup") {
			t.Logf("stopping the placement leader at %s, %s keys copied", st["phase"], st["keys_copied"])
			break
		}
		if err == nil && st["phase"] != "import" && st["phase"] != "migrate" && st["phase"] != "copy" {
			t.Fatalf("the copy ended before the test saw it under way: %v", st)
		}
		if ctx.Err() != nil {
			t.Fatalf("the copy did not start: %v, %v", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Writes continue meanwhile, through whichever nodes are up.
	var acked sync.Map
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for seq := 1; !stop.Load(); seq++ {
			k := keys[seq%len(keys)]
			if cc.Set(ctx, k, strconv.Itoa(seq), 0).Err() == nil {
				acked.Store(k, seq)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	t.Logf("stopping n%d, the placement leader (members %v)", leader+1, pg.Nodes)
	stopped := time.Now()
	nodes[leader].Close()
	// Lift the rate limit (the hot keys written meanwhile are copied again
	// each pass).
	for {
		err := admin.Do(ctx, "cluster", "migration", "rate", "0").Err()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			st, serr := migStatus(context.Background(), admin)
			t.Fatalf("CLUSTER MIGRATION RATE 0 failed for %v after the stop, last: %v; status %v %v", time.Since(stopped).Round(time.Millisecond), err, st, serr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("rate lifted %v after the stop", time.Since(stopped).Round(time.Millisecond))
	st := waitPhase(t, ctx, admin, "done")
	t.Logf("done %v after the stop", time.Since(stopped).Round(time.Millisecond))
	stop.Store(true)
	wg.Wait()
	t.Logf("status: %v", st)
	if tok, _ := strconv.Atoi(st["driver_token"]); tok < 2 {
		t.Fatalf("driver token %d: no second driver took over", tok)
	}
	acked.Range(func(k, v any) bool {
		got, err := cc.Get(ctx, k.(string)).Result()
		// A node that has not yet read the flipped map (it polls the
		// placement namespace) may answer MOVED back to the node that sent
		// the client there, until it reads it: go-redis gives up after
		// MaxRedirects and returns the MOVED. That is routing catching up,
		// not data: retry it for a while (the clean-clone CI at ab440d8
		// saw it under -race). Since a node reads the map before it
		// answers MOVED (consultPlacement) this needs the placement
		// namespace unreachable at that moment, as here while its leader
		// is being replaced. A value older than the acknowledged one
		// still fails at once.
		for deadline := time.Now().Add(10 * time.Second); err != nil && strings.Contains(err.Error(), "MOVED") && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			got, err = cc.Get(ctx, k.(string)).Result()
		}
		if n, _ := strconv.Atoi(got); err != nil || n < v.(int) {
			t.Errorf("key %s: acknowledged %d, read %q (%v)", k, v, got, err)
		}
		return true
	})
	if left := keysIn(t, ctx, nodes[(leader+1)%len(nodes)], 0, rs); len(left) > 0 {
		t.Fatalf("s0 still holds %d keys of the moved slots", len(left))
	}
}
