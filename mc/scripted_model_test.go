package mc

import (
	"strings"
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

// TestCommissionModel: eve's commission model (protocol/eve.
// CommissionModel: n2's runs corrupted; n1's election, the batch and the
// runs of n1 and n3 as the scripted prefix) catches eve-broken-ownstate;
// eve in the same model, every state within the counterexample's depth,
// shows no violation, and its write completes after the prefix.
func TestCommissionModel(t *testing.T) {
	bad := caught(t, "eve-broken-ownstate", "committed state matches its token")
	pre := bad.Violation.Prefix
	ok := clean(t, "eve", "eve-broken-ownstate", len(bad.Violation.Events)-pre, 0)
	if !ok.Complete || !ok.Sometimes[0].Reached || len(ok.Sometimes[0].Witness) <= pre {
		t.Fatalf("eve in the commission model: complete %v, write completes %v after %d events (prefix %d)",
			ok.Complete, ok.Sometimes[0].Reached, len(ok.Sometimes[0].Witness), pre)
	}
}

// TestLeaderCrashModel: eve's leader-crash model (protocol/eve.
// LeaderCrashModel: slot 1 decided by n1 and heard by n3, n1 crashed, n2
// standing, all as the scripted prefix) catches eve-broken-norecovery;
// eve in the same model, every state within the counterexample's depth
// (the new leader's phase 1, its decision and what n3 hears of it), shows
// no violation. The write was answered in the prefix (n1 decided slot 1),
// so the search's non-vacuity is its depth: every state reaches the level
// at which the variant fails.
func TestLeaderCrashModel(t *testing.T) {
	bad := caught(t, "eve-broken-norecovery", "one decision per slot")
	pre := bad.Violation.Prefix
	depth := len(bad.Violation.Events) - pre
	ok := clean(t, "eve", "eve-broken-norecovery", depth, 0)
	if !ok.Complete || ok.Depth < depth || pre != len(automaton.ModelOf("eve-broken-norecovery").Prefix) {
		t.Fatalf("eve in the leader-crash model: complete %v, depth %d of %d, prefix %d", ok.Complete, ok.Depth, depth, pre)
	}
}

// TestDeadLeaderModel: in paxos's dead-leader model (protocol/paxos.
// DeadLeaderModel: n1 elected, then crashed, client 2's write waiting at
// n2, all as the scripted prefix; four timer firings in all; the model
// requires progress "a write completes") paxos exhausts the model and
// answers the write after the prefix, while paxos-broken-stickyleader
// exhausts it with the write never answered: a progress violation
// (progress.go), which replays by searching again from the prefix.
// Without the requirement, the same search reports no violation: the
// bounded eventually does not judge these paths (a crash happened, n1's
// restart stays enabled, the timer budget ends them).
func TestDeadLeaderModel(t *testing.T) {
	cfg := NewConfig("paxos-broken-stickyleader")
	stuck, err := Check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pre := len(cfg.Model.Prefix)
	if stuck.Violation == nil || !strings.HasPrefix(stuck.Violation.Violation, progressPrefix) || stuck.Frontier != 0 || stuck.Sometimes[0].Reached {
		t.Fatalf("paxos-broken-stickyleader in its model: violation %v, frontier %d, write completes %v",
			stuck.Violation, stuck.Frontier, stuck.Sometimes[0].Reached)
	}
	if len(stuck.Violation.Events) != pre {
		t.Fatalf("the progress counterexample holds %d events, want the prefix's %d", len(stuck.Violation.Events), pre)
	}
	if why, err := stuck.Violation.Replay(); err != nil || why != stuck.Violation.Violation {
		t.Fatalf("replay: %q %v, want %q", why, err, stuck.Violation.Violation)
	}
	replaySaved(t, stuck.Violation) // saved and loaded, it replays the same
	noReq := cfg
	noReq.Model.Progress = nil
	if r, err := Check(noReq); err != nil || r.Violation != nil || !r.Complete {
		t.Fatalf("without the progress requirement: %v %v", r.Violation, err)
	}
	ok := clean(t, "paxos", "paxos-broken-stickyleader", cfg.Depth, 0)
	if ok.Violation != nil || ok.Frontier != 0 || !ok.Sometimes[0].Reached || len(ok.Sometimes[0].Witness) <= pre {
		t.Fatalf("paxos in the dead-leader model: violation %v, frontier %d, write completes %v after %d events (prefix %d)",
			ok.Violation, ok.Frontier, ok.Sometimes[0].Reached, len(ok.Sometimes[0].Witness), pre)
	}
	t.Logf("paxos-broken-stickyleader: %d states, exhausted, the write never answered; paxos: %d states, answered after %d events", stuck.States, ok.States, len(ok.Sometimes[0].Witness))
}
