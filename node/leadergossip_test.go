package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

// groupLeader is the leader every running member of group agrees on (""
// while they do not agree or know none).
func groupLeader(nodes []*Node, group string, skip map[int]bool) automaton.NodeID {
	var id automaton.NodeID
	for i, n := range nodes {
		l := n.loop(group)
		if l == nil || skip[i] {
			continue
		}
		p := l.leader.Load()
		if p == nil || *p == "" || (id != "" && *p != id) {
			return ""
		}
		id = *p
	}
	return id
}

// namedMaster is the master n's CLUSTER SLOTS names for group ("" when n
// does not know the group's leader).
func namedMaster(n *Node, group string) automaton.NodeID {
	shards, _ := n.ClusterShards("default")
	for _, s := range shards {
		if s.Name == group && s.LeaderKnown {
			return automaton.NodeID(s.Nodes[0].ID)
		}
	}
	return ""
}

// Leader gossip (leadergossip.go): a node that does not replicate a shard,
// and has forwarded nothing to it, names the shard's leader as its master;
// after the leader is stopped, it names the new one within a bound. Without
// the gossip n1 would know no leader of s1 (LeaderKnown false), and after
// the stop it would name the shard's first live node, a follower or not.
func TestNonMemberLearnsShardLeader(t *testing.T) {
	ns := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv", Shards: []config.Shard{
		{Name: "s0", Slots: "0-8191", Nodes: []string{"n1", "n2", "n3"}},
		{Name: "s1", Slots: "8192-16383", Nodes: []string{"n4", "n5", "n6"}},
	}}
	cfg, ls := mkCluster(t, 6, config.Memory, ns)
	var nodes []*Node
	for i, l := range ls {
		nodes = append(nodes, startNode(t, cfg, fmt.Sprintf("n%d", i+1), l, Options{}))
	}
	const g = "default#s1"
	var lead automaton.NodeID
	eventually(t, "s1 elects a leader", func() bool { lead = groupLeader(nodes, g, nil); return lead != "" })
	eventually(t, "non-members name s1's leader", func() bool {
		for _, n := range nodes[:3] {
			if namedMaster(n, g) != lead {
				return false
			}
		}
		return true
	})

	li := int(lead[1] - '1')
	nodes[li].Close()
	var next automaton.NodeID
	deadline := time.Now().Add(30 * time.Second)
	for next = groupLeader(nodes, g, map[int]bool{li: true}); next == "" || next == lead; next = groupLeader(nodes, g, map[int]bool{li: true}) {
		if time.Now().After(deadline) {
			t.Fatalf("s1 elected no new leader after %s stopped", lead)
		}
		time.Sleep(5 * time.Millisecond)
	}
	elected := time.Now()
	// The bound: a nudged gossip round (leaderGossipNudge) or, if that
	// message is lost, the next periodic one; generous for a loaded
	// machine.
	const bound = 3 * time.Second
	for _, n := range nodes[:3] {
		for namedMaster(n, g) != next {
			if time.Since(elected) > bound {
				shards, _ := n.ClusterShards("default")
				t.Fatalf("%s still names %q as s1's master %s after %s was elected (shards %+v)", n.ID(), namedMaster(n, g), bound, next, shards)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	t.Logf("%s stopped, %s elected; non-members named it %s after the election", lead, next, time.Since(elected).Round(time.Millisecond))
	// And MOVED (SlotLocal) sends a cluster client of n1 to the new leader.
	if local, addr := nodes[0].SlotLocal("default", 9000); local || addr != cfg.Nodes[int(next[1]-'1')].Client {
		t.Fatalf("n1's MOVED for slot 9000 names %q (local %v), want %s's address", addr, local, next)
	}
}

// A leader claim with a lower term than the fresh one held is ignored (a
// deposed leader that has not noticed yet); a stale one is replaced; the
// same node refreshes its own.
func TestLeaderHintOrder(t *testing.T) {
	n := &Node{}
	n.fwd.hint = map[string]leaderHint{}
	t0 := time.Now()
	n.noteHint("g", "n2", 5, true, t0)
	n.noteHint("g", "n1", 4, true, t0.Add(time.Millisecond))
	if h := n.fwd.hint["g"]; h.id != "n2" || h.term != 5 {
		t.Fatalf("a lower-term claim replaced a fresh one: %+v", h)
	}
	n.noteHint("g", "n3", 6, true, t0.Add(2*time.Millisecond))
	if h := n.fwd.hint["g"]; h.id != "n3" {
		t.Fatalf("a higher-term claim was ignored: %+v", h)
	}
	n.noteHint("g", "n1", 4, true, t0.Add(leaderHintTTL+3*time.Millisecond))
	if h := n.fwd.hint["g"]; h.id != "n1" {
		t.Fatalf("a claim did not replace a stale one: %+v", h)
	}
	n.noteHint("g", "n1", 0, false, t0.Add(leaderHintTTL+4*time.Millisecond))
	if h := n.fwd.hint["g"]; h.id != "n1" || h.term != 4 {
		t.Fatalf("a forwarded answer naming the same leader lost its term: %+v", h)
	}
}
