package node

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
	"github.com/synod-dev/synod/shard/txn"
)

// A request spanning groups counts in the placement's load at each group
// it spans and at each key's slot, and by group and pair (crossgroup.go;
// session 48). Before, routeOnce handed it to crossShard uncounted: s1
// and s2 below would have counted 0 and the slots nothing.
func TestCountCrossGroups(t *testing.T) {
	groups := []config.Group{{}, {}, {}}
	s := &shardedNS{svc: service.KV{}, groups: groups, ops: make([]atomic.Uint64, 3), sl: new(slotLoad), cross: newCrossCounts(3)}
	set := func(k string) service.Op { return service.Op{Kind: "set", Key: k, Args: [][]byte{[]byte("v")}} }
	// An MSET over s0 and s2 (k1 twice in s0), then a MULTI over all three.
	s.countCross([]txn.Part{{Group: 0, Ops: []service.Op{set("k1"), set("k1")}}, {Group: 2, Ops: []service.Op{set("k2")}}}, nil)
	s.countCross([]txn.Part{{Group: 1, Ops: []service.Op{set("k3")}}, {Group: 0, Ops: []service.Op{set("k1")}}, {Group: 2, Ops: []service.Op{set("k2")}}}, nil)
	// A computed RENAME over s1 and s2: its keys once each, whatever reads
	// its parts hold.
	dump := func(k string) service.Op { return service.Op{Kind: "dump", Key: k} }
	s.countCross([]txn.Part{{Group: 1, Ops: []service.Op{dump("k3"), dump("k3")}}, {Group: 2, Ops: []service.Op{dump("k4")}}},
		&computed{keys: [][]string{{"k3"}, {"k4"}}})
	c := s.cross
	if r, cm := c.requests.Load(), c.computed.Load(); r != 3 || cm != 1 {
		t.Fatalf("requests %d computed %d, want 3 and 1", r, cm)
	}
	for g, want := range []uint64{2, 2, 3} {
		if got := c.byGroup[g].Load(); got != want {
			t.Errorf("group %d spanned by %d, want %d", g, got, want)
		}
		if got := s.ops[g].Load(); got != want {
			t.Errorf("group %d's placement load %d, want %d", g, got, want)
		}
	}
	for p, want := range map[[2]int]uint64{{0, 1}: 1, {0, 2}: 2, {1, 2}: 2} {
		if got := c.pairs[p[0]*3+p[1]].Load(); got != want {
			t.Errorf("pair %v counted %d, want %d", p, got, want)
		}
	}
	for k, want := range map[string]uint64{"k1": 3, "k2": 2, "k3": 2, "k4": 1} {
		if got := s.sl.count[shard.KeySlot(k)].Load(); got != want {
			t.Errorf("slot of %s counted %d, want %d", k, got, want)
		}
	}
}

// Requests spanning groups are shown (INFO crossgroup, INFO shards'
// cross=, the metrics): on 6 in-process nodes, s0 on n1-n3 and s1 on
// n4-n6, through n1: an MSET over both groups, a MULTI/EXEC over both, a
// RENAME from s0 to s1 (computed) count 3 requests, 1 computed, 3 at the
// pair s0+s1 and at each group; a SET and an MSET inside s0 count
// nothing. Fails without the counting (no crossgroup section; cross=0).
func TestCrossGroupRequestsShown(t *testing.T) {
	cfg, nodes, addrs := migrationCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ks := keysOfGroups(cfg, "x", 2)
	a, a2, b := ks[0][0], ks[0][1], ks[1][0]
	cl := redis.NewClient(&redis.Options{Addr: addrs[0]})
	defer cl.Close()
	if err := cl.Set(ctx, a, "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl.MSet(ctx, a, "1", a2, "2").Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl.MSet(ctx, a, "1", b, "2").Err(); err != nil {
		t.Fatalf("MSET across groups: %v", err)
	}
	if _, err := cl.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, a)
		p.Incr(ctx, b)
		return nil
	}); err != nil {
		t.Fatalf("MULTI/EXEC across groups: %v", err)
	}
	if err := cl.Rename(ctx, a2, ks[1][1]).Err(); err != nil {
		t.Fatalf("RENAME across groups: %v", err)
	}
	info, err := cl.Info(ctx, "crossgroup").Result()
	if err != nil || !strings.Contains(info, "default:requests=3,computed=1,s0+s1=3") {
		t.Fatalf("INFO crossgroup: %q %v", info, err)
	}
	sh := nodes[0].shardsInfo()
	for _, g := range []string{"default#s0", "default#s1"} {
		if !strings.Contains(sh[g]+",", ",cross=3,") {
			t.Errorf("INFO shards %s: %q, want cross=3", g, sh[g])
		}
	}
	mfs, err := nodes[0].m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "synod_cross_group_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			lab := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" || l.GetName() == "group" {
					lab = l.GetValue()
				}
			}
			got[fmt.Sprintf("%s/%s", mf.GetName(), lab)] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"synod_cross_group_requests_total/all": 3, "synod_cross_group_requests_total/computed": 1,
		"synod_cross_group_participations_total/s0": 3, "synod_cross_group_participations_total/s1": 3}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("metric %s = %v, want %v (all: %v)", k, got[k], w, got)
		}
	}
}
