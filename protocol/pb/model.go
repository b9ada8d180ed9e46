package pb

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Model implements automaton.ModelDeclarer (issue 20). pb and
// pb-broken-replyfirst use the default model (3 nodes, 2 clients each
// writing then reading, quiet timers). pb-broken-nodedup's bug needs a
// forwarded write delivered twice (III.B check_previous_requests is what
// it drops), so its model is the smallest one where that happens: a
// primary and one backup, a single write sent to the backup (which
// forwards it), a duplicating network, no timers (no fail-over is
// needed). The checker finds the double execution in 6 events.
func (p protocol) Model() automaton.ModelConfig {
	if !p.noDedup {
		return automaton.ModelConfig{}
	}
	return DuplicateForwardModel()
}

// DuplicateForwardModel is pb-broken-nodedup's model: n1 primary, n2
// backup; client 2 writes once at n2; forwards may be duplicated.
func DuplicateForwardModel() automaton.ModelConfig {
	return automaton.ModelConfig{
		Nodes:   2,
		Clients: 2,
		Scripts: [][]service.Op{{}, {{Kind: "set", Key: "x", Args: [][]byte{[]byte("2")}}}},
		Network: "duplicating",
		Timers:  "none",
		Depth:   10,
	}
}
