package gateway

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/shard"
)

// CLUSTER NODES with overlapping groups (shardks49): n5 follows s1 (listed
// first) and leads s2. It is a master with s2's slots, every slot is
// listed once under its group's leader, and a node leading nothing is a
// replica of its first group's leader. Before, the first role found won:
// n5 was s1's replica and s2's slots were listed nowhere.
func TestClusterNodesLeaderAndFollower(t *testing.T) {
	nd := func(ids ...string) []ClusterNode {
		var out []ClusterNode
		for _, id := range ids {
			out = append(out, ClusterNode{ID: id, Client: "127.0.0.1:1"})
		}
		return out
	}
	shards := []ClusterShard{
		{Name: "s0", Slots: []shard.Range{{First: 0, Last: 5460}}, Nodes: nd("n1", "n2", "n3")},
		{Name: "s1", Slots: []shard.Range{{First: 5461, Last: 10922}}, Nodes: nd("n4", "n5", "n6")},
		{Name: "s2", Slots: []shard.Range{{First: 10923, Last: 16383}}, Nodes: nd("n5", "n1", "n6")},
	}
	text := clusterNodes("c", "n1", nd("n1", "n2", "n3", "n4", "n5", "n6"), shards)
	line := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(l)
		id := f[1][strings.Index(f[1], ",")+1:] // host:port@cport,<synod id>
		line[id] = f
	}
	want := map[string]string{ // node -> flags, master, slots
		"n1": "myself,master - 0-5460",
		"n2": "slave " + clusterNodeID("c", "n1"),
		"n3": "slave " + clusterNodeID("c", "n1"),
		"n4": "master - 5461-10922",
		"n5": "master - 10923-16383",
		"n6": "slave " + clusterNodeID("c", "n4"),
	}
	for id, w := range want {
		f := line[id]
		if len(f) < 8 {
			t.Fatalf("no line for %s:\n%s", id, text)
		}
		got := strings.Join(append([]string{f[2], f[3]}, f[8:]...), " ")
		if got != w {
			t.Errorf("%s: %q, want %q\n%s", id, got, w, text)
		}
	}
}
