package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

// placeTestNS is the two tests' namespace: one data group s0 on n2, n4,
// n5 of an 8-node cluster whose placement namespace is on n1, n3, n6.
func placeTestNS() config.Namespace {
	return config.Namespace{Name: "default", Protocol: "paxos", Service: "kv", Shards: []config.Shard{
		{Name: "s0", Slots: "0-16383", Nodes: []string{"n2", "n4", "n5"}},
	}, Placement: &config.Placement{DeadAfter: "1s", NoMerge: true}}
}

// memRecord reads mem/<ns> and its version through via.
func memRecord(ctx context.Context, via *Node, ns string) (string, uint64, error) {
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rs, err := via.placementDo(wctx, kvOp("get", "mem/"+ns), kvOp("version", "mem/"+ns))
	if err != nil {
		return "", 0, err
	}
	return string(rs[0].Bytes), uint64(rs[1].Int), nil
}

// leadPlacement makes node to the placement namespace's leader (a
// leadership transfer from the current leader among nodes).
func leadPlacement(ctx context.Context, nodes map[automaton.NodeID]*Node, to automaton.NodeID) error {
	if nodes[to].leadsPlacement() {
		return nil
	}
	for id, n := range nodes {
		if n != nil && n.leadsPlacement() {
			res, err := n.changeMembership(ctx, config.PlacementName, n.nextInternalID(), automaton.LeaderTransfer(to))
			return fmt.Errorf("%s leads; transfer to %s: %v %v", id, to, res, err)
		}
	}
	return fmt.Errorf("no leader")
}

// The placement leader decides on a members view it has just read, never
// on a stale one (placer.go decide; replace.go writeMembers; session 46).
// Two groups, s0 on n2, n4, n5 and s1 on n6, n7, n8. n6, a member of
// #placement, has its background placement reads of the data namespace
// paused throughout (Options.holdPoll, a test seam): its view of the
// groups' members stays the cluster file's, as a restarted node's is
// until its first successful placement read. While n1 leads #placement,
// n2 and then n8 stop and are replaced (by n1 and n3: one member of each
// group, so that each keeps two of three up). Then n6 is made the
// placement leader. n2 and n8 being down, a decision on its stale view
// replaces n2 again and rewrites mem/default from that view (dropping s1's
// n3 and its former member n8). The leader must
// instead read the record before deciding and find nothing to do: after
// 5 passes of its decision loop (dead_after is 1 s, a pass a second) the
// record must be unchanged. Last, a members write derived from an older
// version is refused (the compare-and-set).
//
// On the old code (no read before the decision, unconditional writes):
// FAIL, the record becomes "0:n4,n5,n1!n2 1:n6,n7,n8".
func TestPlacementDecidesOnFreshMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("two replacements and a placement leader with a stale view on 8 nodes")
	}
	ns := placeTestNS()
	ns.Shards = []config.Shard{
		{Name: "s0", Slots: "0-8191", Nodes: []string{"n2", "n4", "n5"}},
		{Name: "s1", Slots: "8192-16383", Nodes: []string{"n6", "n7", "n8"}},
	}
	cfg, ls := mkCluster(t, 8, config.Memory, ns)
	if g, _ := cfg.PlacementGroup(); !slices.Equal(g.Nodes, []automaton.NodeID{"n1", "n3", "n6"}) {
		t.Fatalf("placement group on %v", g.Nodes)
	}
	hold := new(atomic.Bool)
	hold.Store(true)
	nodes := map[automaton.NodeID]*Node{}
	for i, l := range ls {
		id := automaton.NodeID(fmt.Sprintf("n%d", i+1))
		opts := Options{}
		if id == "n6" {
			opts.holdPoll = hold
		}
		nodes[id] = startNode(t, cfg, string(id), l, opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	pp := placeProbe{t, ctx}
	eventually := pp.eventually
	eventually("a first placement write", 30*time.Second, func() error { return pp.write(nodes["n2"], "start") })
	eventually("n1 leads #placement", 30*time.Second, func() error { return leadPlacement(ctx, nodes, "n1") })

	// n2 (of s0), then n8 (of s1), stop and are replaced by the leader n1.
	var rec string
	var ver uint64
	for gi, x := range []automaton.NodeID{"n2", "n8"} {
		nodes[x].Close()
		nodes[x] = nil
		eventually(string(x)+" replaced", 60*time.Second, func() error {
			var err error
			rec, ver, err = memRecord(ctx, nodes["n1"], "default")
			if err != nil {
				return err
			}
			mr, err := parseMembersRecord(rec, nodes["n1"].shards["default"].groups)
			if err != nil || mr.leaving[gi] != "" || !slices.Contains(mr.former[gi], x) || len(mr.members[gi]) != 3 {
				return fmt.Errorf("record %q (%v); decision log:\n%s", rec, err, nodes["n1"].placementLog(ctx, nodes["n1"].shards["default"], 20))
			}
			return nil
		})
	}
	t.Logf("n2 and n8 replaced: record %q (version %d)", rec, ver)
	s6 := nodes["n6"].shards["default"]
	// (n6 may have read the record before it existed, leading #placement
	// at the start.)
	if v := s6.view(); v.memRead && v.memVer >= ver || !slices.Equal(s6.membersIn(v, 0), []automaton.NodeID{"n2", "n4", "n5"}) ||
		!slices.Equal(s6.membersIn(v, 1), []automaton.NodeID{"n6", "n7", "n8"}) {
		t.Fatalf("n6's view: s0 %v, s1 %v (read %v, version %d); the test wants the cluster file's", s6.membersIn(v, 0), s6.membersIn(v, 1), v.memRead, v.memVer)
	}

	// n6 leads #placement with its background reads still paused.
	eventually("n6 leads #placement", 60*time.Second, func() error { return leadPlacement(ctx, nodes, "n6") })
	p := nodes["n6"].placerFor("default")
	from := p.passes.Load()
	eventually("5 decision passes at n6", 60*time.Second, func() error {
		if !nodes["n6"].leadsPlacement() {
			return leadPlacement(ctx, nodes, "n6")
		}
		if k := p.passes.Load() - from; k < 5 || p.replacing.Load() {
			return fmt.Errorf("%d passes, replacing %v", k, p.replacing.Load())
		}
		return nil
	})
	got, gotVer, err := memRecord(ctx, nodes["n1"], "default")
	if err != nil || got != rec || gotVer != ver {
		log := nodes["n1"].placementLog(ctx, nodes["n1"].shards["default"], placeLogLen)
		t.Fatalf("members record %q version %d (%v) after n6 led, want %q version %d; log:\n%s", got, gotVer, err, rec, ver, log)
	}
	for gi := range 2 {
		if m := s6.members(gi); !slices.Equal(m, nodes["n1"].shards["default"].members(gi)) {
			t.Fatalf("n6 routes group %d to %v after its decisions' reads", gi, m)
		}
	}

	// A members write derived from an older read is refused.
	if _, err := nodes["n6"].writeMembers(ctx, s6, ver-1, "0:n2,n4,n5 1:n6,n7,n8"); err == nil || !strings.Contains(err.Error(), "changed since it was read") {
		t.Fatalf("a members write from version %d (record at %d): %v", ver-1, ver, err)
	}
	if got, _, _ := memRecord(ctx, nodes["n1"], "default"); got != rec {
		t.Fatalf("members record %q after a refused write, want %q", got, rec)
	}
	hold.Store(false)
}

// Each node stores the members records it reads (placemembers.go; session
// 46): after a whole-cluster stop, a node added to a data group at run
// time restarts its replica without reading placement. s0 on n2, n4, n5;
// n2 stops and is replaced by n1. Every node stops; only n1 and n4 (a
// majority of s0's current members n4, n5, n1, but one of #placement's
// three members) restart, so no placement read can succeed. s0 must take
// writes through n4 and n1, and n1 must route by the stored record; once
// #placement has a majority again (n3 back), the record is unchanged.
//
// On the old code (records of data groups not stored): FAIL, n1 does not
// start s0 and s0 has one replica up of three.
func TestPlacementMembersStoredForRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("a replacement and a whole-cluster restart of 8 nodes")
	}
	cfg, ls := mkCluster(t, 8, config.Fsync, placeTestNS())
	nodes := startNodes(t, cfg, ls)
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	pp := placeProbe{t, ctx}
	eventually := pp.eventually
	set := func(via *Node, k, v string) error { _, err := dataDo(ctx, via, kvOp("set", k, v)); return err }
	get := func(via *Node, k string) (string, error) { return dataDo(ctx, via, kvOp("get", k)) }
	eventually("a first write", 30*time.Second, func() error { return set(nodes["n4"], "a", "1") })
	nodes["n2"].Close()
	want := []automaton.NodeID{"n4", "n5", "n1"}
	live := []automaton.NodeID{"n1", "n3", "n4", "n5", "n6", "n7", "n8"}
	eventually("n2 replaced by n1, every node routing by the record", 60*time.Second, func() error {
		for _, id := range live {
			if m := nodes[id].shards["default"].members(0); !slices.Equal(m, want) {
				return fmt.Errorf("%s routes s0 to %v", id, m)
			}
		}
		return nil
	})
	rec, _, err := memRecord(ctx, nodes["n1"], "default")
	if err != nil {
		t.Fatal(err)
	}
	eventually("a write after the replacement", 30*time.Second, func() error { return set(nodes["n1"], "b", "2") })
	t.Logf("n2 replaced: record %q", rec)

	for _, id := range live {
		nodes[id].Close()
	}
	for _, id := range []automaton.NodeID{"n1", "n4"} {
		nodes[id] = startNode(t, cfg, string(id), relisten(t, cfg, string(id)), Options{})
	}
	for _, id := range []automaton.NodeID{"n4", "n1"} {
		eventually("a write to s0 through "+string(id)+" with #placement down", 60*time.Second, func() error {
			return set(nodes[id], "c"+string(id), string(id))
		})
	}
	for k, v := range map[string]string{"a": "1", "b": "2", "cn4": "n4", "cn1": "n1"} {
		if got, err := get(nodes["n1"], k); err != nil || got != v {
			t.Fatalf("GET %s through n1 = %q %v, want %q", k, got, err, v)
		}
	}
	if m := nodes["n1"].shards["default"].members(0); !slices.Equal(m, want) {
		t.Fatalf("n1 restarted routes s0 to %v, want %v (the stored record)", m, want)
	}
	if v := nodes["n1"].shards["default"].view(); v.memRead {
		t.Fatal("n1 read the members record: the test wants #placement down")
	}

	// #placement back (n3 with n1: a majority; one port to take again,
	// which another process may have taken meanwhile): the record is the
	// one written before the stop.
	nodes["n3"] = startNode(t, cfg, "n3", relisten(t, cfg, "n3"), Options{})
	eventually("a placement write", 60*time.Second, func() error { return pp.write(nodes["n1"], "back") })
	if got, _, err := memRecord(ctx, nodes["n3"], "default"); err != nil || got != rec {
		t.Fatalf("members record after the restart %q (%v), want %q", got, err, rec)
	}
}
