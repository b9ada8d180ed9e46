package node

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

// Every original member of the placement namespace is replaced and down;
// the cluster still finds #placement after restarts (placemembers.go).
// Seven nodes with fsync, #placement on n1, n3, n5, one data group s0 on
// n2, n4, n6 (so the victims' stops touch no data group). n7 stops first
// and stays down throughout. Then n1, n3, n5 stop one at a time (the
// placement leader last) and each is replaced, by n2, n4 and n6. Then:
//
//  1. n2, n4 and n6, now the whole placement namespace, stop together and
//     restart: the namespace must take a write again. None of them is a
//     cluster-file member of #placement, so without the stored members
//     record none starts its replica (and every node routes to n1, n3, n5,
//     all down): the namespace stays down.
//  2. n7 restarts: it read no members record before it stopped, so it
//     knows only n1, n3, n5; it must reach the namespace (the leader's
//     gossip claim) and come to route by the current members.
func TestPlacementFoundAfterEveryMemberReplaced(t *testing.T) {
	if testing.Short() {
		t.Skip("three replacements and two restarts of a 7-node cluster")
	}
	ns := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv", Shards: []config.Shard{
		{Name: "s0", Slots: "0-16383", Nodes: []string{"n2", "n4", "n6"}},
	}, Placement: &config.Placement{DeadAfter: "1s", NoMerge: true}}
	cfg, ls := mkCluster(t, 7, config.Fsync, ns)
	orig := []automaton.NodeID{"n1", "n3", "n5"}
	if g, _ := cfg.PlacementGroup(); !slices.Equal(g.Nodes, orig) {
		t.Fatalf("placement group on %v", g.Nodes)
	}
	nodes := map[automaton.NodeID]*Node{}
	for i, l := range ls {
		id := automaton.NodeID(fmt.Sprintf("n%d", i+1))
		nodes[id] = startNode(t, cfg, string(id), l, Options{})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	write := func(via *Node, v string) error {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := via.placementDo(wctx, kvOp("set", "test/k", v)); err != nil {
			return err
		}
		rs, err := via.placementDo(wctx, kvOp("get", "test/k"))
		if err == nil && string(rs[0].Bytes) != v {
			err = fmt.Errorf("read back %q, want %q", rs[0].Bytes, v)
		}
		return err
	}
	eventually := func(what string, limit time.Duration, f func() error) {
		t.Helper()
		deadline := time.Now().Add(limit)
		var err error
		for ctx.Err() == nil && time.Now().Before(deadline) {
			if err = f(); err == nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("%s: %v", what, err)
	}
	eventually("a first placement write", 30*time.Second, func() error { return write(nodes["n2"], "start") })
	nodes["n7"].Close()
	down := map[automaton.NodeID]bool{"n7": true}
	live := func() []*Node {
		var out []*Node
		for id, n := range nodes {
			if !down[id] {
				out = append(out, n)
			}
		}
		return out
	}
	membersAt := func(n *Node) []automaton.NodeID { return n.shards[config.PlacementName].members(0) }
	for range orig {
		// The victim: an original member still up, one that does not lead
		// while there is one.
		var x automaton.NodeID
		for _, id := range orig {
			if !down[id] && (x == "" || nodes[x].leadsPlacement()) {
				x = id
			}
		}
		nodes[x].Close()
		down[x] = true
		eventually(fmt.Sprintf("%s replaced", x), 60*time.Second, func() error {
			want := membersAt(live()[0])
			for _, n := range live() {
				if m := membersAt(n); len(m) != 3 || slices.Contains(m, x) || !slices.Equal(m, want) {
					return fmt.Errorf("%s routes #placement to %v", n.id, m)
				}
			}
			return nil
		})
		t.Logf("%s stopped and replaced: members %v", x, membersAt(live()[0]))
	}
	members := membersAt(live()[0])
	for _, m := range members {
		if slices.Contains(orig, m) || down[m] {
			t.Fatalf("members %v after replacing n1, n3, n5", members)
		}
	}
	eventually("a placement write with every original member down", 30*time.Second, func() error {
		return write(nodes[members[0]], "replaced")
	})

	// 1. The whole placement namespace stops and restarts.
	for _, m := range members {
		nodes[m].Close()
	}
	for _, m := range members {
		nodes[m] = startNode(t, cfg, string(m), relisten(t, cfg, string(m)), Options{})
	}
	eventually("a placement write after its members restarted", 60*time.Second, func() error {
		return write(nodes[members[0]], "restarted")
	})
	t.Logf("after restarting %v: the placement namespace takes writes", members)

	// 2. n7, down since before the first replacement, restarts.
	nodes["n7"] = startNode(t, cfg, "n7", relisten(t, cfg, "n7"), Options{})
	delete(down, "n7")
	eventually("a placement write through n7", 60*time.Second, func() error { return write(nodes["n7"], "n7") })
	eventually("n7 routes by the current members", 30*time.Second, func() error {
		if m := membersAt(nodes["n7"]); !slices.Equal(m, members) {
			return fmt.Errorf("n7 routes #placement to %v, want %v", m, members)
		}
		return nil
	})
}
