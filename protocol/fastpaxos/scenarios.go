package fastpaxos

import "github.com/synod-dev/synod/automaton"

// Scenarios implements automaton.ScenarioDeclarer: the 4-node (t = 1)
// cluster of seed 002 V.C under faults besides the suite's 3-node
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
			Args: []string{"--nodes", "4", "--clients", "4", "--ops", "200", "--faults", "loss,reorder"}, Seeds: "1-2"}}
	}
	return []automaton.Scenario{
		{Name: "4 nodes (t=1) with faults", Args: []string{"--nodes", "4", "--clients", "4", "--ops", "300", "--faults", "all"}, Seeds: "1-6"},
	}
}
