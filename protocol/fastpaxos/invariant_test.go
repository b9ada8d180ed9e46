package fastpaxos

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// TestCheckerCountsVoteOverwrittenInStep: a vote an acceptor casts and
// overwrites within one step (a leader's own fast vote, then its recovery
// vote, when its learner sees the collision) left as a phase 2b, so the
// checker counts it. Here it completes a fast quorum for x, and a classic
// quorum later chooses y at the recovery round: two values chosen. A
// checker that judged only the state after each step saw two votes for x
// and missed the double choice (issue 29).
func TestCheckerCountsVoteOverwrittenInStep(t *testing.T) {
	nodes := []automaton.NodeID{"n1", "n2", "n3", "n4"}
	up := map[automaton.NodeID]automaton.Automaton{}
	for _, id := range nodes {
		a, err := protocol{Capabilities: capabilities(Name, "")}.New(automaton.Config{Self: id, Nodes: nodes, Service: service.KV{}, Rand: newRand()})
		if err != nil {
			t.Fatal(err)
		}
		a.Step(automaton.Start{})
		up[id] = a
	}
	fp := func(id automaton.NodeID) *FastPaxos { return up[id].(*FastPaxos) }
	val := func(k string) []byte {
		return encodeValue(automaton.Request{ID: automaton.RequestID{Client: 1, Seq: uint64(k[0])}, Op: service.Op{Kind: "set", Key: k}})
	}
	x, y := val("x"), val("y")
	fast := Ballot{Round: 1, Node: 2} // n1's fast round
	rec := recoveryOf(fast)
	c := newChecker()
	for _, id := range nodes {
		if err := c.Check(id, up); err != nil {
			t.Fatal(err)
		}
	}
	// step casts the votes in order, leaving the last one per instance.
	step := func(id automaton.NodeID, votes ...cast) error {
		a := fp(id)
		a.cast, a.touched = a.cast[:0], a.touched[:0]
		for _, v := range votes {
			a.insts[v.i] = &inst{rnd: v.bal, vrnd: v.bal, vval: v.val}
			a.touched = append(a.touched, v.i)
			a.cast = append(a.cast, v)
		}
		return c.Check(id, up)
	}
	for _, id := range []automaton.NodeID{"n2", "n3"} {
		if err := step(id, cast{1, fast, x}); err != nil {
			t.Fatal(err)
		}
	}
	// n1 votes x in the fast round and y in the recovery round in one step.
	if err := step("n1", cast{1, fast, x}, cast{1, rec, y}); err != nil {
		t.Fatal(err)
	}
	if err := step("n4", cast{1, rec, y}); err != nil {
		t.Fatal(err)
	}
	err := step("n2", cast{1, rec, y})
	if err == nil || !strings.Contains(err.Error(), "two values chosen") {
		t.Fatalf("y chosen at the recovery round after x at the fast round (n1's overwritten vote included): %v, want two values chosen", err)
	}
}
