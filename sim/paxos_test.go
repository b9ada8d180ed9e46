package sim_test

import (
	"strings"
	"testing"
	"time"

	_ "github.com/synod-dev/synod/protocol/paxos"
	"github.com/synod-dev/synod/sim"
)

// Multi-Paxos must be linearizable under every fault the simulator injects,
// with 3 and 5 nodes; odd seeds add base loss, duplication and reordering.
// Clients retry with the same request id at other nodes (IdempotentRetry), so
// a write applied twice would show up as a stale value.
func TestPaxosLinearizableUnderFaults(t *testing.T) {
	seeds := int64(30)
	if testing.Short() {
		seeds = 6
	}
	for _, nodes := range []int{3, 5} {
		ops, unknown, retries := 0, 0, 0
		for seed := int64(1); seed <= seeds; seed++ {
			cfg := sim.Config{Protocol: "paxos", Nodes: nodes, Clients: 8, Ops: 300, Seed: seed, Faults: "all"}
			if seed%2 == 1 {
				cfg.Loss, cfg.Dup, cfg.ReorderFrac = 0.02, 0.05, 0.1
			}
			r, err := sim.Run(cfg)
			if err != nil {
				t.Fatalf("%v\nreplay: %s", err, cfg.Command())
			}
			if r.Violation || r.Check.Result != "ok" {
				t.Errorf("seed %d: %s\nreplay: %s", seed, r.Check, cfg.Command())
			}
			if r.Ops != 300 || r.Completed < 290 {
				t.Errorf("seed %d: %d ops, %d completed\nreplay: %s", seed, r.Ops, r.Completed, cfg.Command())
			}
			ops += r.Ops
			unknown += r.Unknown
			retries += r.Stats.Retries
		}
		t.Logf("%d nodes: %d seeds, %d ops, %d unknown, %d client retries", nodes, seeds, ops, unknown, retries)
	}
}

func TestPaxosReplay(t *testing.T) {
	cfg := sim.Config{Protocol: "paxos", Nodes: 5, Clients: 8, Ops: 300, Seed: 7, Faults: "all", Latency: "pareto:1ms:1.5", NoCheck: true}
	a, err := sim.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sim.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != b.Digest || a.Stats != b.Stats {
		t.Fatalf("seed 7 replayed differently: %s vs %s", a.Digest, b.Digest)
	}
}

// The broken variant whose new leaders ignore the values reported in phase 1
// must be caught. The workload makes it likely: one key, few clients (so that
// a chosen write's commit notice waits for the next heartbeat), slow
// heartbeats, think times long enough that the next Accept does not carry
// the commit notice at once (the leader sends it before its own fsync), and
// leader crashes.
func TestPaxosBrokenSkipPhase1Caught(t *testing.T) {
	const maxSeed = 20
	for seed := int64(1); seed <= maxSeed; seed++ {
		cfg := sim.Config{Protocol: "paxos-broken-skipphase1values", Nodes: 3, Clients: 3, Ops: 300, Seed: seed,
			Keys: 1, Mix: "get:5,set:5", Faults: "crash", Think: "uniform:10ms:50ms", Params: map[string]string{"heartbeat": "100ms"}}
		r, err := sim.Run(cfg)
		if err != nil {
			t.Fatalf("%v\nreplay: %s", err, cfg.Command())
		}
		if r.Violation {
			t.Logf("caught at seed %d: %.160s…\nreplay: %s", seed, r.Check, cfg.Command())
			return
		}
	}
	t.Errorf("no violation in seeds 1-%d", maxSeed)
}

// Liveness: after every fault heals, Multi-Paxos completes every operation
// within the bound.
func TestPaxosLiveness(t *testing.T) {
	seeds := int64(6)
	if testing.Short() {
		seeds = 2
	}
	for seed := int64(1); seed <= seeds; seed++ {
		cfg := sim.Config{Protocol: "paxos", Nodes: 3 + 2*int(seed%2), Clients: 8, Ops: 3000, Seed: seed, Faults: "all",
			Liveness: 3 * time.Second, LivenessBound: 2 * time.Second}
		r, err := sim.Run(cfg)
		if err != nil {
			t.Fatalf("%v\nreplay: %s", err, cfg.Command())
		}
		if r.Liveness != "" || r.Violation {
			t.Errorf("seed %d: %s %s\nreplay: %s", seed, r.Liveness, r.Check, cfg.Command())
		}
	}
}

// The liveness check catches a protocol that stays safe but stops: with
// "paxos-broken-stickyleader" followers never elect anyone but the first
// leader they heard, so a crash of that leader stalls the cluster for good.
func TestLivenessCatchesStickyLeader(t *testing.T) {
	for seed := int64(1); seed <= 10; seed++ {
		cfg := sim.Config{Protocol: "paxos-broken-stickyleader", Nodes: 3, Clients: 4, Ops: 600, Seed: seed, Faults: "crash",
			Liveness: 3 * time.Second, LivenessBound: 2 * time.Second, DrainTime: 5 * time.Second}
		r, err := sim.Run(cfg)
		if err != nil {
			t.Fatalf("%v\nreplay: %s", err, cfg.Command())
		}
		if r.Violation {
			t.Fatalf("seed %d: the sticky-leader variant is safe, yet: %s\nreplay: %s", seed, r.Check, cfg.Command())
		}
		if r.Liveness != "" {
			if !strings.Contains(r.Liveness, "did not complete") {
				t.Fatalf("unexpected liveness report: %s", r.Liveness)
			}
			t.Logf("caught at seed %d: %s\nreplay: %s", seed, r.Liveness, cfg.Command())
			return
		}
	}
	t.Error("no liveness failure in seeds 1-10")
}

// A liveness run whose workload ends before heal+bound is reported as vacuous.
func TestLivenessVacuous(t *testing.T) {
	cfg := sim.Config{Protocol: "paxos", Nodes: 3, Clients: 2, Ops: 20, Seed: 1, Liveness: 10 * time.Second}
	r, err := sim.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Liveness, "vacuous") {
		t.Fatalf("want a vacuous-check report, got %q", r.Liveness)
	}
	if !strings.Contains(cfg.Command(), "--liveness 10s") {
		t.Fatalf("replay command lacks --liveness: %s", cfg.Command())
	}
}
