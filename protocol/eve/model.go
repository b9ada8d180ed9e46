package eve

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Model implements automaton.ModelDeclarer (issue 20). eve and its other
// variants use the default model; eve-broken-ownstate shows only when a
// replica is outvoted, so it declares CommissionModel, and
// eve-broken-norecovery only after the verifier leader's crash, so it
// declares LeaderCrashModel.
func (p protocol) Model() automaton.ModelConfig {
	switch {
	case p.ownState:
		return CommissionModel()
	case p.noRecovery:
		return LeaderCrashModel()
	}
	return automaton.ModelConfig{}
}

// CommissionModel: one client writes once at n1; n2's executions are
// corrupted (param commission=n2, a commission failure, the Eve/Adam thesis §2.2), so
// its token disagrees with n1's and n3's and the verifiers commit their
// end state; one timer firing (quiet:1: a verifier's retransmission or
// wait for tokens may be needed; without timers a correct run can stall
// quiet, which the bounded eventually property reports); nodes drain
// their inboxes from the highest-numbered one (mc's bynode network).
// The scripted prefix (mc's ModelConfig.Prefix) is n1's phase 1 with n3
// and the batch of slot 1 sent to n2 and n3, and the runs of n1 and n3
// (their tokens agree; n1's reaches n2 and n3). The search starts with
// n2's corrupted run still pending and chooses when it ends against the
// tokens, the acceptance and the decision.
// eve-broken-ownstate: n2 applies the committed slot with its own run
// instead of a state transfer (committed-state-matches-token), in 18
// events (8 after the prefix) and 62 states; from the initial state
// (--no-prefix) 2,333 states, 10-20 s at eve's 100-200 states/s (each
// state copies and hashes a replica's service states by reflection),
// beyond CI's time. eve in the same model, every state within 8 events
// after the prefix, shows no violation and answers the write (mc's
// TestCommissionModel). The prefix is a reduction: the search covers
// only runs in which n1's and n3's runs end first.
func CommissionModel() automaton.ModelConfig {
	return automaton.ModelConfig{
		Nodes:   3,
		Clients: 1,
		Scripts: oneWrite(),
		Params:  map[string]string{"commission": "n2"},
		Target:  "first",
		Network: "lossless,unordered,bynode",
		Timers:  "quiet:1",
		Depth:   12,
		Prefix:  slotOneRuns(),
	}
}

// LeaderCrashModel: one client writes once at n1, the first verifier
// leader; one crash; four timer firings at any moment (all:4), all of
// them n2's suspicion of the leader in the prefix; nodes drain their
// inboxes from the highest-numbered one (mc's bynode network). The
// scripted prefix (mc's ModelConfig.Prefix) is slot 1's commit: n1's
// phase 1 with n3, the batch, the runs of n1 and n3, their tokens, n1's
// Accept (1,1) taken by n3 and n2, n3's Accepted, n1's decision and its
// Decide heard by n3; then n1 crashes (its Decide to n2 still in flight),
// and n2, hearing no decision for four ticks, stands with ballot (2,2).
// eve-broken-norecovery: n3 promises (reporting slot 1 decided), but the
// broken leader ignores what phase 1 reports and decides slot 1 afresh
// from the tokens it holds (its own run's included: tokens=3), which n3
// hears while it knows n1's decision (tokens=2): "one decision per slot",
// 29 events, 8 after the prefix, 331 states. eve in the same model, every
// state within 8 events after the prefix, shows no violation (mc's
// TestLeaderCrashModel; the write was answered by n1 in the prefix). The
// prefix is a reduction: the search covers only runs in which n1 decided
// slot 1 and crashed before n2 heard it; from the initial state
// (--no-prefix, depth 30) it was not reached in 5,000 states (level 6,
// 53 s at 94 states/s).
func LeaderCrashModel() automaton.ModelConfig {
	return automaton.ModelConfig{
		Nodes:   3,
		Clients: 1,
		Scripts: oneWrite(),
		Target:  "first",
		Network: "lossless,unordered,bynode",
		Timers:  "all:4",
		Crashes: 1,
		Depth:   12,
		Prefix: append(slotOneRuns(),
			`deliver n3 -> n2: token slot=1 n3 end=bd68d7a6`,
			`deliver n3 -> n1: token slot=1 n3 end=bd68d7a6`,
			`deliver n1 -> n3: accept (1,1) commit slot=1 epoch=0 end=bd68d7a6 tokens=2`,
			`deliver n1 -> n2: accept (1,1) commit slot=1 epoch=0 end=bd68d7a6 tokens=2`,
			`deliver n3 -> n1: accepted slot=1 epoch=0 ballot=(1,1) ok=true`,
			`deliver n1 -> n3: decide (0,0) commit slot=1 epoch=0 end=bd68d7a6 tokens=2`,
			`n1 crashes`,
			`n2: timer 1 fires`,
			`n2: timer 1 fires`,
			`n2: timer 1 fires`,
			`n2: timer 1 fires`,
		),
	}
}

// slotOneRuns is the start both models script: client 1's write at n1,
// n1's phase 1 with n3, the batch of slot 1 sent to n2 and n3, and the
// runs of n1 and n3, n1's token reaching both (n2's run still pending).
func slotOneRuns() []string {
	return []string{
		`client 1 sends set x "1" to n1`,
		`deliver n1 -> n3: prepare slot=0 epoch=0 ballot=(1,1) ok=false`,
		`deliver n1 -> n3: batch slot=1 epoch=0 n=1`,
		`deliver n1 -> n2: prepare slot=0 epoch=0 ballot=(1,1) ok=false`,
		`deliver n1 -> n2: batch slot=1 epoch=0 n=1`,
		`deliver n3 -> n1: promise slot=0 epoch=0 ballot=(1,1) ok=true`,
		`n1: effect 1 (eve.exec) is carried out`,
		`deliver n1 -> n3: token slot=1 n1 end=bd68d7a6`,
		`deliver n1 -> n2: token slot=1 n1 end=bd68d7a6`,
		`n3: effect 1 (eve.exec) is carried out`,
	}
}

// oneWrite: client 1 writes x once.
func oneWrite() [][]service.Op {
	return [][]service.Op{{{Kind: "set", Key: "x", Args: [][]byte{[]byte("1")}}}}
}
