package esds

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// With gossip off, replicas send nothing: each answers non-strict operations
// from its own operations only, and nothing becomes stable (strict
// operations wait for ever).
func TestGossipOffKeepsReplicasApart(t *testing.T) {
	c := newCluster(t, "esds", 2, service.Counter{}, map[string]string{"gossip": "off"})
	r1 := c.request("n1", opts("", false), "add", "5")
	r2 := c.request("n2", opts("", false), "add", "2")
	r3 := c.request("n2", opts("", true), "add", "1")
	c.settle(20)
	if c.Pending() != 0 {
		t.Fatalf("%d messages queued with gossip off", c.Pending())
	}
	if v := c.mustAnswer(r1); v.Int != 5 {
		t.Errorf("n1's add = %v, want 5", v)
	}
	if v := c.mustAnswer(r2); v.Int != 2 {
		t.Errorf("n2's add = %v, want 2 (it never heard of n1's)", v)
	}
	if _, ok := c.answer(r3); ok {
		t.Error("strict add answered although nothing can become stable without gossip")
	}
	// The same load with gossip on converges and answers the strict add.
	c = newCluster(t, "esds", 2, service.Counter{}, nil)
	c.request("n1", opts("", false), "add", "5")
	r3 = c.request("n2", opts("", true), "add", "1")
	c.settle(20)
	if v := c.mustAnswer(r3); v.Int != 6 && v.Int != 1 {
		t.Errorf("strict add = %v", v)
	}
}

// values=recompute gives the same values as the memoised tentative state,
// and re-applies the non-stable operations for each response (counted with
// a service whose Apply counts calls).
func TestValuesRecomputeSameValuesMoreApplies(t *testing.T) {
	run := func(values string) ([]int64, int) {
		svc := &countingSvc{}
		c := newCluster(t, "esds", 2, svc, map[string]string{"values": values, "gossip": "off"})
		var ids []automaton.RequestID
		for i := 1; i <= 20; i++ {
			ids = append(ids, c.request("n1", opts("", false), "add", "1"))
		}
		var vals []int64
		for _, r := range ids {
			vals = append(vals, c.mustAnswer(r).Int)
		}
		return vals, svc.applies
	}
	memo, nMemo := run("memo")
	rec, nRec := run("recompute")
	for i := range memo {
		if memo[i] != rec[i] || memo[i] != int64(i+1) {
			t.Fatalf("values differ: memo %v, recompute %v", memo, rec)
		}
	}
	// 20 non-stable operations: memo applies each once, recompute re-applies
	// the k earlier ones for the k-th (20*21/2 = 210).
	if nMemo != 20 || nRec != 210 {
		t.Errorf("applies: memo %d (want 20), recompute %d (want 210)", nMemo, nRec)
	}
	if _, err := (protocol{Capabilities: capabilities("esds", optParams, "")}).New(automaton.Config{Self: "n1", Nodes: []automaton.NodeID{"n1"}, Service: service.Counter{},
		Params: map[string]string{"values": "lazy"}}); err == nil {
		t.Error("values=lazy accepted")
	}
}

type countingSvc struct {
	service.Counter
	applies int
}

func (s *countingSvc) NewState() service.State { return &countingState{s.Counter.NewState(), s} }

type countingState struct {
	service.State
	s *countingSvc
}

func (c *countingState) Apply(op service.Op) service.Result { c.s.applies++; return c.State.Apply(op) }
