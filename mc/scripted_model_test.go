package mc

import "testing"

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
