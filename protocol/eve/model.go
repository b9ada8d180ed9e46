package eve

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Model implements automaton.ModelDeclarer (issue 20). eve and its other
// variants use the default model; eve-broken-ownstate shows only when a
// replica is outvoted, so it declares CommissionModel.
func (p protocol) Model() automaton.ModelConfig {
	if !p.ownState {
		return automaton.ModelConfig{}
	}
	return CommissionModel()
}

// CommissionModel: one client writes once at n1; n2's executions are
// corrupted (param commission=n2, a commission failure, seed 003 §2.2), so
// its token disagrees with n1's and n3's and the verifiers commit their
// end state; one timer firing (quiet:1: a verifier's retransmission or
// wait for tokens may be needed; without timers a correct run can stall
// quiet, which the bounded eventually property reports); nodes drain
// their inboxes from the highest-numbered one (mc's bynode network).
// eve-broken-ownstate: n2 applies the committed slot with its own run
// instead of a state transfer (committed-state-matches-token), in 18
// events and 2,333 states; at eve's 100-200 states/s that is 10-20 s,
// beyond CI's time (mc/ci_test.go lists it).
func CommissionModel() automaton.ModelConfig {
	return automaton.ModelConfig{
		Nodes:   3,
		Clients: 1,
		Scripts: [][]service.Op{{{Kind: "set", Key: "x", Args: [][]byte{[]byte("1")}}}},
		Params:  map[string]string{"commission": "n2"},
		Target:  "first",
		Network: "lossless,unordered,bynode",
		Timers:  "quiet:1",
		Depth:   20,
	}
}
