package node

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
)

// A live split by load cuts where the load divides (split46): the setup of
// TestPlacementSplitsIntoNewGroup (s0 owns 0-1023 on n1-n3, s1 the rest on
// n4-n6, s2 unplaced), but the load is on 200 keys of slots 0-63 only. The
// nodes report their busiest slots (slotload.go) and the placement leader
// cuts s0 by them: the slots moved to s2 start inside 1-63, and each side
// keeps between a quarter and three quarters of the hot keys. Before the
// per-slot reports the leader had only per-group counts and cut at the
// median slot (512-1023 moved: none of the load).
func TestPlacementSplitCutsByLoad(t *testing.T) {
	c := startSplitCluster(t, &config.Placement{SplitOps: 40, NoMerge: true, Cooldown: "1s", Rate: 5000, BalanceOps: -1})
	ctx, plain := c.ctx, c.plain
	var hot []string
	for i := 0; len(hot) < 200; i++ {
		if k := fmt.Sprintf("k%d", i); shard.KeySlot(k) < 64 {
			hot = append(hot, k)
		}
	}
	// The load is even over the hot keys at every moment (each writer sets
	// then reads all its 50 keys per round, in one pipeline each), so
	// that the keys divide the load whenever the leader decides (with
	// startHotLoad's one key after another, a decision in its first
	// second sees only the keys written so far).
	load := &hotLoad{acked: map[string]string{}}
	for w := 0; w < 4; w++ {
		load.wg.Add(1)
		go func(keys []string) {
			defer load.wg.Done()
			for i := 0; !load.halt.Load() && ctx.Err() == nil; i++ {
				v := fmt.Sprint(i)
				pipe := plain.Pipeline()
				sets := make([]*redis.StatusCmd, len(keys))
				for j, k := range keys {
					sets[j] = pipe.Set(ctx, k, v, 0)
				}
				pipe.Exec(ctx) // each command's own error is checked
				var ok []string
				load.mu.Lock()
				for j, k := range keys {
					if sets[j].Err() == nil {
						load.acked[k] = v
						ok = append(ok, k)
					} else {
						load.errs.Add(1)
					}
				}
				load.mu.Unlock()
				pipe = plain.Pipeline()
				gets := make([]*redis.StringCmd, len(ok))
				for j, k := range ok {
					gets[j] = pipe.Get(ctx, k)
				}
				pipe.Exec(ctx)
				for j, k := range ok {
					if got, err := gets[j].Result(); err == nil && got != v {
						t.Errorf("read %s = %q after acknowledged %q", k, got, v)
					}
				}
				time.Sleep(5 * time.Millisecond)
			}
		}(hot[w*50 : w*50+50])
	}
	c.waitSplit()
	acked, errs := load.stop()
	_, v, log := c.split(t)
	t.Logf("%d keys acknowledged, %d errors", len(acked), errs)
	cut, below := cutInside(t, v, hot, 0, 63)
	if !strings.Contains(log, "a cut by load (") {
		t.Fatalf("the decision does not say it cut by load:\n%s", log)
	}
	t.Logf("cut at slot %d: %d hot keys stay in s0, %d moved to s2", cut, below, len(hot)-below)
	readBack(ctx, t, plain, acked, func() {})
}

// combineSlotLoad sums the nodes' reported slots and spreads each group's
// reported rest over its slots no report names; the summary keeps the top
// slots and sums the others by group.
func TestCombineSlotLoad(t *testing.T) {
	groups := [][]shard.Range{{{First: 0, Last: 3}}, {{First: 4, Last: shard.Slots - 1}}}
	if w := combineSlotLoad([]string{"", " "}, groups); w != nil {
		t.Fatalf("no report: %v, want nil (the median cut)", w[:8])
	}
	w := combineSlotLoad([]string{" 1:6.00 5:2.00 g0:3.00", " 1:2.00 bad 9:x g0:1.00 g7:5"}, groups)
	if w[1] != 8 || w[0] != 4.0/3 || w[2] != 4.0/3 || w[3] != 4.0/3 || w[5] != 2 || w[4] != 0 || w[6] != 0 {
		t.Fatalf("weights %v", w[:8])
	}
	var sl slotLoad
	var owner [shard.Slots]int16
	for i := range owner {
		owner[i] = int16(i % 2)
	}
	for i := 0; i < slotLoadTop+3; i++ {
		sl.count[i].Add(uint64(1000 + i))
	}
	sum := sl.slotSummary(1, &owner)
	f := strings.Fields(sum)
	if len(f) != slotLoadTop+2 || f[0] != "3:501.50" || f[slotLoadTop] != "g0:1001.00" || f[slotLoadTop+1] != "g1:500.50" {
		t.Fatalf("summary: %d fields, %v ... %v", len(f), f[:2], f[slotLoadTop-1:])
	}
}

// countSlots allocates nothing (routeOnce's slotBuf is on its stack).
func TestCountSlotAllocs(t *testing.T) {
	s := &shardedNS{sl: new(slotLoad)}
	var b slotBuf
	b.note(shard.KeySlot("k1"))
	if a := testing.AllocsPerRun(100, func() { s.countSlots(&b) }); a != 0 {
		t.Fatalf("%v allocations per count", a)
	}
	if got := s.sl.count[shard.KeySlot("k1")].Load(); got != 101 {
		t.Fatalf("slot of k1 counted %d times, want 101", got)
	}
}

// A routed request counts at each key's slot (split47): an MSET of three
// keys in three slots, an MGET naming one of them twice, a MULTI of a SET
// and a RENAME (a two-key operation); a request of more keys than slotCountKeys
// spreads its count over its first keys' slots, the total kept. Session
// 46 counted each request once at its first key's slot (the MSET's k2
// and k3 not at all, the PFCOUNT's 70 keys as 1).
func TestCountSlotsEachKey(t *testing.T) {
	s := &shardedNS{svc: service.KV{}, sl: new(slotLoad)}
	s.cur.Store(initialView([]config.Group{{Slots: []shard.Range{{First: 0, Last: shard.Slots - 1}}}}))
	route := func(req automaton.Request) {
		t.Helper()
		var b slotBuf
		if _, res, ok := s.routeSlots(req, false, &b); !ok {
			t.Fatalf("%v: %v", req, res)
		}
		s.countSlots(&b)
	}
	b := func(xs ...string) [][]byte {
		var out [][]byte
		for _, x := range xs {
			out = append(out, []byte(x))
		}
		return out
	}
	set := func(k string) service.Op { return service.Op{Kind: "set", Key: k, Args: b("v")} }
	get := func(k string) service.Op { return service.Op{Kind: "get", Key: k} }
	route(automaton.Request{Ops: []service.Op{set("k1"), set("k2"), set("k3")}})                       // MSET k1 v k2 v k3 v
	route(automaton.Request{Ops: []service.Op{get("k2"), get("k3"), get("k2")}})                       // MGET k2 k3 k2
	route(automaton.Request{Ops: []service.Op{set("k3"), {Kind: "rename", Key: "k1", Args: b("k2")}}}) // MULTI SET, RENAME
	want := map[string]uint64{"k1": 2, "k2": 4, "k3": 3}
	for k, w := range want {
		if got := s.sl.count[shard.KeySlot(k)].Load(); got != w {
			t.Errorf("slot of %s counted %d, want %d", k, got, w)
		}
	}
	// 70 keys: 70 counts over the first 32 keys' slots.
	var keys []string
	for i := 0; i < 70; i++ {
		keys = append(keys, fmt.Sprintf("m%d", i))
	}
	s.sl = new(slotLoad)
	route(automaton.Request{Op: service.Op{Kind: "pfcount", Key: keys[0], Args: b(keys[1:]...)}}) // PFCOUNT of 70 keys
	exp := map[int]uint64{}                                                                       // 70 = 32*2 + 6: the first 6 keys count 3
	for i, k := range keys[:slotCountKeys] {
		exp[shard.KeySlot(k)] += 2
		if i < 70%slotCountKeys {
			exp[shard.KeySlot(k)]++
		}
	}
	total := uint64(0)
	for i := range s.sl.count {
		c := s.sl.count[i].Load()
		total += c
		if c != exp[i] {
			t.Errorf("a 70-key request counted %d at slot %d, want %d", c, i, exp[i])
		}
	}
	if total != 70 {
		t.Fatalf("a 70-key request counted %d in all, want 70", total)
	}
}
