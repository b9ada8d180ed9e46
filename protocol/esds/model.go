package esds

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Model implements automaton.ModelDeclarer (issue 20). esds and its other
// variants use the default model; esds-broken-maxlabel declares
// SentToAllModel.
func (p protocol) Model() automaton.ModelConfig {
	if !p.maxLabel {
		return automaton.ModelConfig{}
	}
	return SentToAllModel()
}

// SentToAllModel: one client writes once at n1, whose front end sends the
// operation to every replica (param send=all, seed 000 §4.2.4's send
// policy), so that two replicas label it (do_it, Fig. 4.2) with labels of
// their own; one gossip round (a timer budget of 1). esds-broken-maxlabel
// merges the gossiped label by maximum: n1's label of the operation goes
// up ("labels only decrease").
func SentToAllModel() automaton.ModelConfig {
	return automaton.ModelConfig{
		Nodes:   3,
		Clients: 1,
		Scripts: [][]service.Op{{{Kind: "set", Key: "x", Args: [][]byte{[]byte("1")}}}},
		Params:  map[string]string{"send": "all"},
		Target:  "first",
		Timers:  "quiet:1",
		Depth:   10,
	}
}
