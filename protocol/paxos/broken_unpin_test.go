package paxos_test

import (
	"testing"

	"github.com/synod-dev/synod/protocol/paxos"
	"github.com/synod-dev/synod/sim"
)

// TestBrokenUnpinOneCaught: paxos-broken-unpinone, whose leader unpins an
// instance on its own unsynced vote and one follower's acceptance, loses
// an acknowledged write under crashes with slow fsyncs, which the
// linearizability check catches on the pinned seeds; paxos, which unpins
// only on a majority of the other acceptors' durable acceptances, passes
// the same runs.
func TestBrokenUnpinOneCaught(t *testing.T) {
	for _, seed := range []int64{23, 44} {
		for _, proto := range []string{paxos.BrokenUnpinOne, "paxos"} {
			cfg := sim.Config{Protocol: proto, Nodes: 3, Clients: 2, Ops: 300, Seed: seed,
				Faults: "crash", Fsync: "uniform:20ms:80ms"}
			r, err := sim.Run(cfg)
			failed := err != nil || r.Invariant != "" || r.Violation
			switch {
			case proto == "paxos" && failed:
				t.Errorf("paxos failed seed %d\nreplay: %s", seed, cfg.Command())
			case proto != "paxos" && !failed:
				t.Errorf("%s passed seed %d: nothing catches it any more\nreplay: %s", proto, seed, cfg.Command())
			case failed:
				t.Logf("%s caught at seed %d", proto, seed)
			}
		}
	}
}
