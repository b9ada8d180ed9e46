package node

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
)

// gauge reads metric name{namespace=ns[, leader=leader]} from n's registry.
func metricValue(t *testing.T, n *Node, name, ns, leader string) (float64, bool) {
	t.Helper()
	mfs, err := n.m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] != ns || (leader != "" && labels["leader"] != leader) {
				continue
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue(), true
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// TestLeaderMetrics: once a paxos namespace has a leader, exactly one node
// reports itself leader (synod_is_leader), every node names it
// (synod_leader{leader=...}) and counted at least one change.
func TestLeaderMetrics(t *testing.T) {
	nodes := startPaxos(t, 3)
	if r := do(t, nodes[0], "default", req("set", "k", "v")); r.IsErr() {
		t.Fatalf("set: %v", r)
	}
	var leader automaton.NodeID
	eventually(t, "every node's metrics name one leader", func() bool {
		id, _, _ := nodes[0].Leader("default")
		if id == "" {
			return false
		}
		leader = id
		leaders := 0.0
		for _, n := range nodes {
			v, _ := metricValue(t, n, "synod_is_leader", "default", "")
			leaders += v
			if named, ok := metricValue(t, n, "synod_leader", "default", string(id)); !ok || named != 1 {
				return false
			}
			if c, ok := metricValue(t, n, "synod_leader_changes_total", "default", ""); !ok || c < 1 {
				return false
			}
		}
		return leaders == 1
	})
	t.Logf("leader %s", leader)
}
