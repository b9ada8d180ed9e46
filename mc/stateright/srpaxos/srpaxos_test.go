package srpaxos_test

import (
	"testing"

	"github.com/synod-dev/synod/mc"
	"github.com/synod-dev/synod/mc/stateright/srpaxos"
)

func model(p srpaxos.Protocol, clients int) mc.ActorModel {
	return mc.ActorModel{Protocol: p, Servers: 3, Clients: clients, PutCount: 1}
}

// TestSameStatesAsStateright: Stateright's own test of its example
// (examples/paxos.rs, can_model_paxos) asserts 16,668 unique states for 2
// clients and 3 servers, breadth-first and depth-first, linearizable, and
// a value chosen after 8 deliveries (breadth-first).
func TestSameStatesAsStateright(t *testing.T) {
	for _, dfs := range []bool{false, true} {
		res, err := mc.CheckActors(model(srpaxos.Protocol{}, 2), mc.ActorOptions{DFS: dfs})
		if err != nil {
			t.Fatal(err)
		}
		if res.Violation != nil {
			t.Fatalf("dfs %v: not linearizable:\n%s", dfs, res.Violation)
		}
		if !res.Complete || res.States != 16668 {
			t.Errorf("dfs %v: %d states (complete %v), Stateright has 16,668", dfs, res.States, res.Complete)
		}
		if res.ValueChosen == nil {
			t.Fatalf("dfs %v: no value chosen", dfs)
		}
		if !dfs && len(res.ValueChosen.Events) != 8 {
			t.Errorf("value chosen after %d deliveries, Stateright's after 8:\n%s", len(res.ValueChosen.Events), res.ValueChosen)
		}
		t.Logf("dfs %v: %d states, depth %d, %v; value chosen:\n%s", dfs, res.States, res.Depth, res.Elapsed, res.ValueChosen)
	}
}

// TestBrokenCaught: the leader that ignores the promises' proposals
// chooses two values; the history shows it.
func TestBrokenCaught(t *testing.T) {
	res, err := mc.CheckActors(model(srpaxos.Protocol{Broken: true}, 2), mc.ActorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Violation == nil {
		t.Fatalf("broken variant not caught in %d states", res.States)
	}
	t.Logf("caught after %d states, %d deliveries:\n%s", res.States, len(res.Violation.Events), res.Violation)
}
