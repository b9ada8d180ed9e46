package sim_test

import (
	"testing"
	"time"

	_ "github.com/synod-dev/synod/protocol/abd"
	"github.com/synod-dev/synod/sim"
)

// ABD's opt-in peer_pipeline (protocol/abd/pipeline.go: while several
// round groups are in flight, a phase message to a peer that owes an
// answer waits for it) is linearizable under every fault, keeps the
// broken variants caught, and sends fewer peer messages per operation
// than the same workload without it. The parameter is off by default, so
// nothing else in CI runs it.
func TestABDPeerPipelineUnderFaults(t *testing.T) {
	pipe := map[string]string{"peer_pipeline": "true"}
	seeds := int64(8)
	if testing.Short() {
		seeds = 3
	}
	for seed := int64(1); seed <= seeds; seed++ {
		cfg := sim.Config{Protocol: "abd", Nodes: 5, Clients: 24, Ops: 400, Seed: seed, Faults: "all",
			Keys: 4, BatchWindow: 2 * time.Millisecond, Params: pipe}
		runABDUnderFaults(t, cfg)
	}

	per := func(on bool) float64 {
		cfg := sim.Config{Protocol: "abd", Nodes: 3, Clients: 64, Ops: 2000, Seed: 1, Faults: "none",
			Keys: 10000, Think: "constant:0s", Latency: "uniform:10us:50us", ClientLatency: "uniform:20us:100us",
			BatchWindow: 20 * time.Microsecond}
		if on {
			cfg.Params = pipe
		}
		r, err := sim.Run(cfg)
		if err != nil {
			t.Fatalf("%v\nreplay: %s", err, cfg.Command())
		}
		if r.Violation {
			t.Fatalf("%v\nreplay: %s", r.Check, cfg.Command())
		}
		t.Logf("peer_pipeline=%v: %d messages, %d completed", on, r.Stats.MsgsSent, r.Completed)
		return float64(r.Stats.MsgsSent) / float64(r.Completed)
	}
	// docs/costs/s50-abd50.md: 2.23 -> 1.59 messages per operation (seeds
	// 1-2, 4000 operations); the bound leaves room for the seed's shape.
	if off, on := per(false), per(true); on > 0.85*off {
		t.Errorf("peer_pipeline: %.2f peer messages per operation, off %.2f: want at most 0.85x", on, off)
	}

	for _, proto := range []string{"abd-broken-nowriteback", "abd-broken-nowriterid"} {
		caught := false
		for seed := int64(1); seed <= 40 && !caught; seed++ {
			cfg := sim.Config{Protocol: proto, Nodes: 3, Clients: 10, Ops: 300, Seed: seed, Keys: 1,
				Mix: "get:6,set:3,exists:1", Latency: "uniform:1ms:10ms", Loss: 0.2, BatchWindow: 2 * time.Millisecond, Params: pipe}
			r, err := sim.Run(cfg)
			if err != nil {
				t.Fatalf("%v\nreplay: %s", err, cfg.Command())
			}
			if r.Violation || r.Invariant != "" {
				caught = true
				t.Logf("%s caught at seed %d\nreplay: %s", proto, seed, cfg.Command())
			}
		}
		if !caught {
			t.Errorf("%s with peer_pipeline: no violation in seeds 1-40", proto)
		}
	}
}
