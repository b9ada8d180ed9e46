package paxos

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/sim"
)

// TestCrashUnchoosesLeadersOwnVote: in this run a leader (n2) learns
// instance 245 chosen from one follower's acceptance and its own, whose
// record is not yet durable; it crashes losing that record (and every
// output that depended on the choice), and a later leader chooses another
// value for 245, rightly: only one durable vote held the first. The
// invariant "one value chosen per instance" must not fire (it did before
// the checker learnt from the simulator which records a crash lost), while
// TestSkipPhase1ValuesTripsChosenInvariant shows it still fires when the
// first choice was durable.
func TestCrashUnchoosesLeadersOwnVote(t *testing.T) {
	cfg, seeds, err := sim.ParseArgs(strings.Fields("--protocol paxos --nodes 3 --clients 4 --ops 300 --faults all --latency uniform:1ms:5ms --nested --seeds 10"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed = seeds[0]
	r, err := sim.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Violation {
		t.Fatalf("%s%s\n%s", r.Invariant, r.Divergence, cfg.Command())
	}
	if r.Stats.Crashes == 0 {
		t.Fatal("the run crashed no node: the scenario no longer exercises a lost own vote")
	}
}
