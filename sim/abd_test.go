package sim_test

import (
	"testing"

	_ "github.com/synod-dev/synod/protocol/abd"
	"github.com/synod-dev/synod/sim"
)

// ABD must be linearizable under every fault the simulator injects.
func TestABDLinearizableUnderFaults(t *testing.T) {
	seeds := int64(40)
	if testing.Short() {
		seeds = 10
	}
	ops, unknown := 0, 0
	for seed := int64(1); seed <= seeds; seed++ {
		cfg := sim.Config{Protocol: "abd", Nodes: 5, Clients: 8, Ops: 300, Seed: seed, Faults: "all"}
		r, err := sim.Run(cfg)
		if err != nil {
			t.Fatalf("%v\nreplay: %s", err, cfg.Command())
		}
		if r.Violation {
			t.Errorf("seed %d: %s\nreplay: %s", seed, r.Check, cfg.Command())
		} else if r.Check.Result != "ok" {
			t.Errorf("seed %d: check undecided: %s\nreplay: %s", seed, r.Check, cfg.Command())
		}
		if r.Ops != 300 || r.Completed < 250 {
			t.Errorf("seed %d: %d ops, %d completed: the run made too little progress\nreplay: %s", seed, r.Ops, r.Completed, cfg.Command())
		}
		ops += r.Ops
		unknown += r.Unknown
	}
	t.Logf("%d seeds, %d ops, %d unknown", seeds, ops, unknown)
}

// The same seed replays to the same digest with a real protocol, too.
func TestABDReplay(t *testing.T) {
	cfg := sim.Config{Protocol: "abd", Nodes: 5, Clients: 8, Ops: 300, Seed: 99, Faults: "all", Latency: "pareto:1ms:1.5", NoCheck: true}
	a, err := sim.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sim.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != b.Digest || a.Stats != b.Stats {
		t.Fatalf("seed 99 replayed differently: %s %v vs %s %v", a.Digest, a.Stats, b.Digest, b.Stats)
	}
}

// The deliberately broken ABD variants must be caught within a bounded seed
// range. The workloads make the bugs likely: one key, many clients, mostly
// reads, and lossy links with a wide latency spread, so that a write often
// reaches only some replicas for a while (retransmissions every 50ms).
func TestABDBrokenVariantsCaught(t *testing.T) {
	for _, proto := range []string{"abd-broken-nowriteback", "abd-broken-nowriterid"} {
		t.Run(proto, func(t *testing.T) {
			const maxSeed = 40
			for seed := int64(1); seed <= maxSeed; seed++ {
				cfg := sim.Config{Protocol: proto, Nodes: 3, Clients: 10, Ops: 300, Seed: seed, Keys: 1,
					Mix: "get:6,set:3,exists:1", Latency: "uniform:1ms:10ms", Loss: 0.2}
				r, err := sim.Run(cfg)
				if err != nil {
					t.Fatalf("%v\nreplay: %s", err, cfg.Command())
				}
				if r.Violation {
					t.Logf("caught at seed %d (digest %s): %.200s…\nreplay: %s", seed, r.Digest, r.Check, cfg.Command())
					return
				}
			}
			t.Errorf("%s: no violation in seeds 1-%d", proto, maxSeed)
		})
	}
}
