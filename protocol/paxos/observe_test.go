package paxos

import (
	"slices"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// The observe hook reports a write's instance learned at the leader from a
// quorum of acceptances, with the write's request id, and at the followers
// from the next commit notice, once; an unknown recorder name is refused.
func TestObserveLearned(t *testing.T) {
	rec := NewRecorder("paxos-observe-test")
	defer DropRecorder("paxos-observe-test")
	type seen struct {
		node automaton.NodeID
		how  How
	}
	learned := map[automaton.RequestID][]seen{}
	insts := map[automaton.RequestID]uint64{}
	rec.OnEvent = func(e Event) {
		for _, id := range e.Reqs {
			learned[id] = append(learned[id], seen{e.Node, e.How})
			if i, ok := insts[id]; ok && i != e.Inst {
				t.Errorf("%v reported at instance %d and %d", id, i, e.Inst)
			}
			insts[id] = e.Inst
		}
	}
	c := newCluster(t, 3, "kv", map[string]string{"observe": "paxos-observe-test"})
	c.elect("n1")
	id := automaton.RequestID{Client: 7, Seq: 1}
	if _, ok := c.do("n1", id, set("k", "v"), automaton.ReadDefault); !ok {
		t.Fatal("no answer")
	}
	if got := learned[id]; !slices.Equal(got, []seen{{"n1", ByQuorum}}) {
		t.Fatalf("after the write: %v, want the leader by quorum only", got)
	}
	c.tickAll() // the heartbeat carries the commit index
	got := learned[id]
	slices.SortFunc(got, func(a, b seen) int { return int(a.node[1]) - int(b.node[1]) })
	if want := []seen{{"n1", ByQuorum}, {"n2", ByCommit}, {"n3", ByCommit}}; !slices.Equal(got, want) {
		t.Fatalf("after a heartbeat: %v, want %v", got, want)
	}
	c.tickAll() // learned already: no more events
	if n := len(learned[id]); n != 3 {
		t.Fatalf("after a second heartbeat: %d events, want still 3", n)
	}

	s, _ := service.Lookup("kv")
	if _, err := (protocol{}).New(automaton.Config{Self: "n1", Nodes: []automaton.NodeID{"n1"}, Service: s,
		Rand: c.node("n1").cfg.Rand, Params: map[string]string{"observe": "nobody"}}); err == nil {
		t.Fatal("observe=nobody accepted")
	}
}
