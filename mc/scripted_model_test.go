package mc

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
)

// TestSequencerCrashModel: orca-bcast's sequencer-crash model
// (protocol/orcabcast.SequencerCrashModel: update 1 delivered by n1, n1
// crashed, client 3's write waiting at n3, all as a scripted prefix)
// catches orca-bcast-broken-norecovery; orca-bcast in the same model, one
// event deeper than the counterexample, shows no violation and answers
// client 3's write through a new sequencer: the prefix's history (client
// 1's write answered) is the first judged, so a second judged history is
// one in which client 3's write returned, the only other operation.
func TestSequencerCrashModel(t *testing.T) {
	bad := caught(t, "orca-bcast-broken-norecovery", "sequencer-ahead")
	ok := clean(t, "orca-bcast", "orca-bcast-broken-norecovery", len(bad.Violation.Events)-bad.Violation.Prefix+1, 0)
	if ok.HistoryChecks < 2 {
		t.Fatalf("orca-bcast in the sequencer-crash model: %d histories judged, client 3's write never answered", ok.HistoryChecks)
	}
}

// TestRecoveryModel: fastpaxos's recovery model (protocol/fastpaxos.
// RecoveryModel: 4 nodes, n4's election and a collision at instance 1 as
// the scripted prefix) catches fastpaxos-broken-recovery; fastpaxos in
// the same model, every state within 5 events more than the
// counterexample's, shows no violation, and a write completes after the
// prefix (the recovery decides the collided instance).
func TestRecoveryModel(t *testing.T) {
	bad := caught(t, "fastpaxos-broken-recovery", "two values chosen")
	pre := bad.Violation.Prefix
	ok := clean(t, "fastpaxos", "fastpaxos-broken-recovery", len(bad.Violation.Events)-pre+5, 0)
	if pre != len(automaton.ModelOf("fastpaxos-broken-recovery").Prefix) || !ok.Complete || !ok.Sometimes[0].Reached || len(ok.Sometimes[0].Witness) <= pre {
		t.Fatalf("fastpaxos in the recovery model: complete %v, write completes %v after %d events (prefix %d)",
			ok.Complete, ok.Sometimes[0].Reached, len(ok.Sometimes[0].Witness), pre)
	}
}
