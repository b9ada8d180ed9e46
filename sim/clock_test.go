package sim_test

import (
	"testing"
	"time"

	_ "github.com/synod-dev/synod/protocol/paxos"
	_ "github.com/synod-dev/synod/protocol/pbpaxos"
	"github.com/synod-dev/synod/sim"
)

// Offsets are within the bound, differ between nodes, and depend only on
// the seed and the node.
func TestClockOffset(t *testing.T) {
	skew := 3 * time.Second
	seen := map[int64]bool{}
	for i := range 5 {
		o := sim.ClockOffset(7, i, skew)
		if o < -int64(skew) || o > int64(skew) {
			t.Fatalf("node %d offset %v outside ±%v", i, time.Duration(o), skew)
		}
		if o != sim.ClockOffset(7, i, skew) {
			t.Fatal("offset not a function of (seed, node)")
		}
		seen[o] = true
	}
	if len(seen) < 4 {
		t.Fatalf("offsets barely differ: %v", seen)
	}
	if sim.ClockOffset(7, 0, 0) != 0 {
		t.Fatal("offset without skew")
	}
}

// The log-based protocols stay linearizable and their replicas converge
// when every node's clock is off by up to 5 s (KV writes carry the
// leader's time in the log: protocol/paxos/expiry.go).
func TestLogProtocolsUnderClockSkew(t *testing.T) {
	for _, proto := range []string{"paxos", "pbpaxos"} {
		for seed := int64(1); seed <= 3; seed++ {
			cfg := sim.Config{Protocol: proto, Nodes: 3, Clients: 4, Ops: 200, Seed: seed, Faults: "all", ClockSkew: 5 * time.Second}
			r, err := sim.Run(cfg)
			if err != nil {
				t.Fatalf("%v\nreplay: %s", err, cfg.Command())
			}
			if r.Violation || r.Check.Result != "ok" {
				t.Errorf("%s seed %d: %s\nreplay: %s", proto, seed, r.Check, cfg.Command())
			}
		}
	}
}
