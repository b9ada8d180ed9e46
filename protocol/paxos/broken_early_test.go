package paxos_test

import (
	"testing"

	"github.com/synod-dev/synod/protocol/paxos"
	"github.com/synod-dev/synod/sim"
)

// runEarly simulates proto under the scenario that catches
// paxos-broken-earlyack and reports whether seed failed (an invariant
// violated or the history not linearizable), with what failed and the
// replay command.
func runEarly(t *testing.T, proto string, seed int64) (bool, string) {
	t.Helper()
	cfg := sim.Config{Protocol: proto, Nodes: 3, Clients: 4, Ops: 300, Seed: seed,
		Faults: "crash", Fsync: "uniform:5ms:40ms"}
	r, err := sim.Run(cfg)
	if err != nil {
		return true, err.Error() + "\nreplay: " + cfg.Command()
	}
	switch {
	case r.Invariant != "":
		return true, r.Invariant + "\nreplay: " + cfg.Command()
	case r.Violation:
		return true, "history not linearizable\nreplay: " + cfg.Command()
	}
	return false, cfg.Command()
}

// An acceptor that sends its phase 2b early (before its acceptance is
// durable) lets a crash erase a vote the leader counted: the simulator
// catches it on the pinned seeds, and paxos, whose leader sends only its
// 2a early, passes the same runs.
func TestBrokenEarlyAckCaught(t *testing.T) {
	for _, seed := range []int64{6, 64} {
		if failed, how := runEarly(t, paxos.BrokenEarlyAck, seed); !failed {
			t.Errorf("%s passed seed %d: nothing catches it any more\nreplay: %s", paxos.BrokenEarlyAck, seed, how)
		} else {
			t.Logf("%s caught at seed %d: %.300s", paxos.BrokenEarlyAck, seed, how)
		}
		if failed, how := runEarly(t, "paxos", seed); failed {
			t.Errorf("paxos failed seed %d: %s", seed, how)
		}
	}
}
