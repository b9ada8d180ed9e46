package fastpaxos

import "github.com/synod-dev/synod/automaton"

// Scenarios implements automaton.ScenarioDeclarer: the 4-node (t = 1)
// cluster of the Grid Services thesis V.C under faults besides the suite's 3-node
// standard ones; for a broken variant, the runs that catch it.
func (p protocol) Scenarios() []automaton.Scenario {
	switch {
	case p.classicLearn:
		return []automaton.Scenario{{Name: "3 nodes (classic 2, fast 3), no faults",
			Args: []string{"--nodes", "3", "--clients", "4", "--ops", "100", "--faults", "none"}, Seeds: "1"}}
	case p.staleVote:
		return []automaton.Scenario{{Name: "5 nodes, leader changes (crash, partition)",
			Args: []string{"--nodes", "5", "--clients", "4", "--ops", "300", "--faults", "crash,partition"}, Seeds: "1-4"}}
	case p.skipGap:
		return []automaton.Scenario{{Name: "3 nodes, lost votes",
			Args: []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "loss,reorder"}, Seeds: "1"}}
	case p.ignoreRule:
		return []automaton.Scenario{{Name: "4 nodes, collisions under loss",
			Args: []string{"--nodes", "4", "--clients", "4", "--ops", "200", "--faults", "loss,reorder"}, Seeds: "1-2"},
			// The node-proposes path: a leader's own fast vote is cast
			// and overwritten by its recovery vote within one step; the
			// checker counts it (invariant.go) and still sees the
			// double choice.
			{Name: "4 nodes, clients at one node (node proposes), collisions under loss",
				Args: []string{"--nodes", "4", "--clients", "4", "--ops", "300", "--faults", "loss,reorder", "--no-fanout"}, Seeds: "1-2"}}
	}
	return []automaton.Scenario{
		{Name: "4 nodes (t=1) with faults", Args: []string{"--nodes", "4", "--clients", "4", "--ops", "300", "--faults", "all"}, Seeds: "1-6"},
		// Clients at one node (the redis-cli path: the node proposes for
		// them). With 4 or more nodes the leader's collision recovery
		// overwrites its own fast vote within one step; the checker used
		// to miss that vote and fail 19 of 20 seeds of `synod-lab sim
		// --protocol fastpaxos --nodes 4 --no-fanout --faults none` whose
		// histories were linearizable (issue 29).
		{Name: "4 nodes, clients at one node (node proposes)", Args: []string{"--nodes", "4", "--clients", "4", "--ops", "300", "--faults", "none", "--no-fanout"}, Seeds: "1-3"},
		{Name: "4 nodes, clients at one node, faults", Args: []string{"--nodes", "4", "--clients", "4", "--ops", "300", "--faults", "all", "--no-fanout"}, Seeds: "1-4"},
		{Name: "5 nodes, clients at one node, faults", Args: []string{"--nodes", "5", "--clients", "4", "--ops", "300", "--faults", "all", "--no-fanout"}, Seeds: "1-4"},
	}
}
