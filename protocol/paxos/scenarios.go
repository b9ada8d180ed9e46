package paxos

import "github.com/synod-dev/synod/automaton"

// Scenarios implements automaton.ScenarioDeclarer: the simulations the
// conformance suite runs besides its standard ones. For a broken variant
// they are the runs that catch it, with pinned seeds (the simulator is
// deterministic, so a pinned seed keeps failing until the code changes; the
// suite fails when none does any more).
func (p protocol) Scenarios() []automaton.Scenario {
	base := []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "all"}
	switch {
	case p.skipPhase1Values:
		return []automaton.Scenario{{Name: "faults", Args: base, Seeds: "3,8,10"}} // 9 of seeds 1-40 since session 51's relayed Forward and unpinned answers moved the schedules (1,6,18 in session 50, 3,10,11 before)
	case p.stickyLeader:
		return []automaton.Scenario{{Name: "liveness after a leader crash",
			Args: []string{"--nodes", "3", "--clients", "4", "--ops", "3000", "--faults", "crash", "--liveness", "5s"}, Seeds: "1"}}
	case p.bootQuorum:
		return []automaton.Scenario{{Name: "two adds",
			Args: []string{"--nodes", "3", "--clients", "4", "--ops", "1200", "--faults", "all", "--membership", "add@1s,add@2s"}, Seeds: "58,107"}} // 8 of seeds 1-160 since session 51's relayed Forward (21,36 in session 49; 2,18,22 before)
	case p.nestedRead:
		return []automaton.Scenario{{Name: "nested requests answered twice",
			Args: []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "none", "--keys", "2", "--nested"}, Seeds: "1-2"}}
	case p.splitGroups:
		return []automaton.Scenario{{Name: "groups under load",
			Args: []string{"--nodes", "3", "--clients", "8", "--ops", "400", "--faults", "none", "--groups", "0.5", "--param", "window=1"}, Seeds: "1-2"}}
	}
	return []automaton.Scenario{
		{Name: "read mode lease", Args: append(append([]string{}, base...), "--read-mode", "lease"), Seeds: "1-2"},
		{Name: "read mode log", Args: append(append([]string{}, base...), "--read-mode", "log"), Seeds: "1-2"},
	}
}
