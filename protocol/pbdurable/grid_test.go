package pbdurable_test

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability/examples/matchmaker"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/protocol/pbdurable"
	"github.com/synod-dev/synod/service"
)

// drive delivers every message and completes every effect until nothing
// is left.
func drive(c *harness.Cluster) {
	for c.DeliverAll()+c.CompleteEffects() > 0 {
	}
}

// settle fires every node's timers rounds times, driving in between.
func settle(c *harness.Cluster, rounds int) {
	for range rounds {
		c.FireAllNodes()
		drive(c)
	}
}

func op(kind, key string, args ...string) service.Op {
	o := service.Op{Kind: kind, Key: key}
	for _, a := range args {
		o.Args = append(o.Args, []byte(a))
	}
	return o
}

// answer runs o at node at and returns its answer once the cluster
// settled.
func answer(t *testing.T, c *harness.Cluster, at automaton.NodeID, o service.Op) service.Result {
	t.Helper()
	id := c.Request(at, o, automaton.Options{})
	for range 5 {
		drive(c)
		if r, ok := c.Response(id); ok {
			return r
		}
		settle(c, 1)
	}
	t.Fatalf("%v at %s: no answer", o, at)
	return service.Result{}
}

// TestGridMatchmakerMappings: the seed's Matchmaker (service
// gridmatchmaker) under each of its mappings serves the seed's operations
// and survives a crash of the primary, except the queue of the
// reconstructible mapping, which comes back empty (documented loss; its
// accounts are in the database), and both objects of the original.
func TestGridMatchmakerMappings(t *testing.T) {
	for _, tc := range []struct {
		mapping   string
		available int64 // machines left after the fail-over
		balance   int64 // alice's
	}{
		{"pb", 1, 1}, {"pbdb", 1, 1}, {"db", 1, 1}, {"reconstructible", 0, 1}, {"original", 0, 0},
	} {
		t.Run(tc.mapping, func(t *testing.T) {
			c := harness.New(t, harness.Options{Protocol: pbdurable.Name, Nodes: 3, Service: matchmaker.Synod{},
				Params: map[string]string{"mapping": tc.mapping}})
			drive(c)
			if r := answer(t, c, "n1", op("advertise", "m1", "2000", "1024")); r.Type != service.ResultOK {
				t.Fatalf("advertise m1: %v", r)
			}
			answer(t, c, "n1", op("advertise", "m2", "1000", "512"))
			if r := answer(t, c, "n1", op("submit", "alice", "1500", "1000")); string(r.Bytes) != "m1" {
				t.Fatalf("submit: %v, want m1", r)
			}
			if r := answer(t, c, "n1", op("submit", "bob", "4000", "1")); r.Type != service.ResultNil {
				t.Fatalf("submit that nothing fits: %v, want nil", r)
			}
			c.Crash("n1")
			settle(c, 4)
			if r := answer(t, c, "n2", op("balance", "alice")); r.Int != tc.balance {
				t.Errorf("alice's balance after the fail-over: %v, want %d", r, tc.balance)
			}
			if r := answer(t, c, "n2", op("available", "")); r.Int != tc.available {
				t.Errorf("machines after the fail-over: %v, want %d", r, tc.available)
			}
		})
	}
}
