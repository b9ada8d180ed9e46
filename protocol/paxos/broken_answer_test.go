package paxos_test

import (
	"testing"

	"github.com/synod-dev/synod/protocol/paxos"
	"github.com/synod-dev/synod/sim"
)

// An answer positioned below its own instance leaves before the leader's
// acceptance of that instance is durable: the simulator catches the lost
// write on the pinned seed (broken_answer.go), and paxos, whose answers
// are positioned at their instance, passes the same run.
func TestBrokenAnswerEarlyCaught(t *testing.T) {
	run := func(proto string) (bool, string) {
		cfg := sim.Config{Protocol: proto, Nodes: 3, Clients: 8, Ops: 500, Seed: 90,
			Faults: "crash", Fsync: "uniform:20ms:80ms"}
		r, err := sim.Run(cfg)
		switch {
		case err != nil:
			return true, err.Error() + "\nreplay: " + cfg.Command()
		case r.Invariant != "":
			return true, r.Invariant + "\nreplay: " + cfg.Command()
		case r.Violation:
			return true, "history not linearizable\nreplay: " + cfg.Command()
		}
		return false, cfg.Command()
	}
	if failed, how := run(paxos.BrokenAnswerEarly); !failed {
		t.Errorf("%s passed seed 90: nothing catches it any more\nreplay: %s", paxos.BrokenAnswerEarly, how)
	} else {
		t.Logf("%s caught at seed 90: %.300s", paxos.BrokenAnswerEarly, how)
	}
	if failed, how := run("paxos"); failed {
		t.Errorf("paxos failed seed 90: %s", how)
	}
}

// Marking every answer relayed (the leader's own answers too) lets an
// answer leave before the leader's acceptance is durable: the simulator
// catches the lost write on the pinned seeds, and paxos, which marks only
// the answers a follower relays from its leader's ForwardReply, passes the
// same runs.
func TestBrokenRelayAllCaught(t *testing.T) {
	for _, seed := range []int64{129, 135} {
		cfg := sim.Config{Protocol: paxos.BrokenRelayAll, Nodes: 3, Clients: 8, Ops: 500, Seed: seed,
			Faults: "crash", Fsync: "uniform:20ms:80ms"}
		for _, proto := range []string{paxos.BrokenRelayAll, "paxos"} {
			cfg.Protocol = proto
			r, err := sim.Run(cfg)
			failed := err != nil || r.Invariant != "" || r.Violation
			if failed != (proto == paxos.BrokenRelayAll) {
				t.Errorf("%s at seed %d: failed %v (err %v)\nreplay: %s", proto, seed, failed, err, cfg.Command())
			}
		}
	}
}
