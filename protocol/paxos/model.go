package paxos

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Model implements automaton.ModelDeclarer (issue 20). paxos and its other
// variants use the default model. paxos-broken-skipphase1values shows
// only across a leader change after an accepted value, so its model is
// LeaderChangeModel: the checker finds the lost write (invariant "one
// value chosen per instance") in 21 events.
func (p protocol) Model() automaton.ModelConfig {
	if !p.skipPhase1Values {
		return automaton.ModelConfig{}
	}
	return LeaderChangeModel()
}

// LeaderChangeModel is the smallest model with a leader change after a
// chosen value: one client writes once at n1 (the first leader); a timer
// budget of 4 is n1's election, then n2's and n3's leader-alive timers
// (stable leader: a follower promises no one else while it hears a
// leader, package doc "Leader election") and one election timeout; the
// nodes drain their inboxes from the highest-numbered one (mc's bynode
// network), which leaves the old leader n1 hearing the new ballot last.
func LeaderChangeModel() automaton.ModelConfig {
	return automaton.ModelConfig{
		Nodes:   3,
		Clients: 1,
		Scripts: [][]service.Op{{{Kind: "set", Key: "x", Args: [][]byte{[]byte("1")}}}},
		Target:  "first",
		Network: "lossless,unordered,bynode",
		Timers:  "quiet:4",
		Depth:   24,
	}
}
