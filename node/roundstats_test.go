package node

import (
	"context"
	"fmt"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

// TestRoundGroupsMetric: an ABD coordinator's round groups are exported
// (synod_round_group_requests): puts one after another at an idle
// coordinator each begin a group of one on arrival, and a batch of four
// (DoBatch, one client batch) begins one group of four. Without the
// collector (or with ABD not counting its groups) the series is missing
// or its counts differ.
func TestRoundGroupsMetric(t *testing.T) {
	ns := config.Namespace{Name: "default", Protocol: "abd", Service: "kv"}
	cfg, ls := mkCluster(t, 3, config.Memory, ns)
	var nodes []*Node
	for i, n := range cfg.Nodes {
		nodes = append(nodes, startNode(t, cfg, n.ID, ls[i], Options{}))
	}
	c := nodes[0]
	for i := 0; i < 5; i++ {
		do(t, c, "default", req("set", "k", fmt.Sprint(i)))
	}
	rs := []automaton.Request{req("set", "a", "1"), req("set", "b", "1"), req("get", "a"), req("get", "b")}
	if _, errs := c.DoBatch(context.Background(), "default", rs); errs[0] != nil {
		t.Fatal(errs[0])
	}
	mfs, err := c.m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		groups uint64
		reqs   float64
		lone   uint64
	}
	seen := map[string]got{}
	for _, mf := range mfs {
		if mf.GetName() != "synod_round_group_requests" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var start string
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "start" {
					start = lp.GetValue()
				}
			}
			h := m.GetHistogram()
			g := got{groups: h.GetSampleCount(), reqs: h.GetSampleSum()}
			for _, b := range h.GetBucket() {
				if b.GetUpperBound() == 1 {
					g.lone = b.GetCumulativeCount()
				}
			}
			seen[start] = g
		}
	}
	// Nothing else runs at the coordinator: every request found room.
	if want := (got{groups: 6, reqs: 9, lone: 5}); seen["arrival"] != want {
		t.Errorf("groups begun on arrival: %+v, want %+v (five puts alone, one batch of four)", seen["arrival"], want)
	}
	if q := seen["queue"]; q.groups != 0 {
		t.Errorf("groups begun from the queue: %+v, want none", q)
	}
}
