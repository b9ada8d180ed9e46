package srregister_test

import (
	"testing"

	"github.com/synod-dev/synod/mc"
	"github.com/synod-dev/synod/mc/stateright/srregister"
)

// TestSameStatesAsStateright: Stateright's own test of its example
// (examples/linearizable-register.rs, can_model_linearizable_register)
// asserts 544 unique states for 2 clients and 2 servers, breadth-first
// and depth-first, linearizable, and a value chosen after 11 deliveries
// (breadth-first).
func TestSameStatesAsStateright(t *testing.T) {
	for _, dfs := range []bool{false, true} {
		res, err := mc.CheckActors(mc.ActorModel{Protocol: srregister.Protocol{}, Servers: 2, Clients: 2, PutCount: 1}, mc.ActorOptions{DFS: dfs})
		if err != nil {
			t.Fatal(err)
		}
		if res.Violation != nil {
			t.Fatalf("dfs %v: not linearizable:\n%s", dfs, res.Violation)
		}
		if !res.Complete || res.States != 544 {
			t.Errorf("dfs %v: %d states (complete %v), Stateright has 544", dfs, res.States, res.Complete)
		}
		if res.ValueChosen == nil {
			t.Fatalf("dfs %v: no value chosen", dfs)
		}
		if !dfs && len(res.ValueChosen.Events) != 11 {
			t.Errorf("value chosen after %d deliveries, Stateright's after 11:\n%s", len(res.ValueChosen.Events), res.ValueChosen)
		}
		t.Logf("dfs %v: %d states, depth %d, %v; value chosen:\n%s", dfs, res.States, res.Depth, res.Elapsed, res.ValueChosen)
	}
}

// TestThreeServersBounded: the comparison's model (3 servers, 2 clients:
// Stateright's `linearizable-register check 2`, 41 M states exhausted)
// stays linearizable over its first 100,000 states.
func TestThreeServersBounded(t *testing.T) {
	res, err := mc.CheckActors(mc.ActorModel{Protocol: srregister.Protocol{}, Servers: 3, Clients: 2, PutCount: 1}, mc.ActorOptions{DFS: true, MaxStates: 100000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Violation != nil {
		t.Fatalf("not linearizable:\n%s", res.Violation)
	}
	if res.States < 100000 {
		t.Fatalf("%d states: the model should not exhaust here", res.States)
	}
}

// TestBrokenCaught: a coordinator that answers gets from its own copy
// returns nil after a write completed without it.
func TestBrokenCaught(t *testing.T) {
	for _, servers := range []int{3} {
		res, err := mc.CheckActors(mc.ActorModel{Protocol: srregister.Protocol{Broken: true}, Servers: servers, Clients: 2, PutCount: 1}, mc.ActorOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Violation == nil {
			t.Fatalf("%d servers: broken variant not caught in %d states", servers, res.States)
		}
		t.Logf("%d servers: caught after %d states, %d deliveries:\n%s", servers, res.States, len(res.Violation.Events), res.Violation)
	}
}
