package sim

import (
	"strconv"
	"testing"
	"time"

	_ "github.com/synod-dev/synod/protocol/unreplicated"
	"github.com/synod-dev/synod/release"
)

// The simulator runs the interpreter the live node runs (package release),
// so a wrong interpreter is a wrong node: with one that releases an answer
// before the records emitted before it are durable, a crash before the
// fsync (made slow here, 2-10 ms, to widen the window) loses writes whose
// answers clients saw, and the run's history check says so. The same protocols with the correct interpreter pass the same
// seeds (the correct interpreter of test-leader is also held to zero
// violations by TestBrokenTestProtocolIsCaught, and unreplicated's by the
// conformance suite).
func TestFlawedInterpreterIsCaught(t *testing.T) {
	cfg := Config{Nodes: 3, Clients: 6, Ops: 300, Faults: "crash", Keys: 1, Mix: "get:1,set:1,exists:1",
		Think: "uniform:1ms:10ms", RequestTimeout: 100 * time.Millisecond, Fsync: "uniform:2ms:10ms"}
	for _, proto := range []string{"test-leader", "unreplicated"} {
		cfg.Protocol = proto
		found := map[release.Flaw]int{}
		for _, flaw := range []release.Flaw{release.FlawNone, release.FlawRespondUndurable} {
			cfg.releaseFlaw = flaw
			for seed := int64(1); seed <= 10; seed++ {
				cfg.Seed = seed
				r, err := Run(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if r.Violation {
					found[flaw]++
				}
			}
		}
		t.Logf("%s: violations in 10 seeds: correct interpreter %d, flawed %d", proto, found[release.FlawNone], found[release.FlawRespondUndurable])
		if found[release.FlawNone] != 0 {
			t.Errorf("%s: the correct interpreter failed %d of 10 seeds", proto, found[release.FlawNone])
		}
		if found[release.FlawRespondUndurable] == 0 {
			t.Errorf("%s: an interpreter answering before the fsync was not caught in 10 seeds", proto)
		}
	}
}

// TestFlawedInterpreterPowerLoss: the conformance suite's power-loss
// scenario, on the correct unreplicated protocol, catches the interpreter
// that answers before the fsync: the power loss takes every node's unsynced
// records, acknowledged writes among them (3 of seeds 1-20: only answers
// the server gives its own clients are affected, a forwarder's wait for the
// server's Send). The correct interpreter passes the scenario in the
// conformance suite.
func TestFlawedInterpreterPowerLoss(t *testing.T) {
	caught := 0
	for seed := 1; seed <= 20; seed++ {
		cfg, seeds, err := ParseArgs(append([]string{"--protocol", "unreplicated", "--seeds", strconv.Itoa(seed)}, powerLossArgs...))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Seed = seeds[0]
		cfg.releaseFlaw = release.FlawRespondUndurable
		r, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.Violation {
			caught++
		}
	}
	t.Logf("flawed interpreter caught on %d of seeds 1-20 of the power-loss scenario", caught)
	if caught == 0 {
		t.Error("the power-loss scenario did not catch an interpreter answering before the fsync")
	}
}
