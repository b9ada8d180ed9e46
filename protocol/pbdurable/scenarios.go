package pbdurable

import "github.com/synod-dev/synod/automaton"

// Scenarios implements automaton.ScenarioDeclarer: the conformance suite
// runs the standard ones (kv under the default mapping) besides these.
//
// The seed's Matchmaker (service gridmatchmaker) has no scenario: the
// simulator cannot generate its operations or check its histories (its
// workload and a linearizability model belong to sim/ and check/);
// TestGridMatchmakerMappings and testdata/matchmaker_*.txt cover it. The
// all-or-nothing decision is exercised in simulation by kv under mapping
// pbdb: State replicated, Replies in the database, so every write has an
// update buffer and a transaction.
func (p protocol) Scenarios() []automaton.Scenario {
	crash := []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "crash,dup,reorder,slow"}
	with := func(args []string, more ...string) []string { return append(append([]string{}, args...), more...) }
	switch {
	case p.replyBeforeDB:
		return []automaton.Scenario{
			{Name: "caught by the invariant reply-after-durable",
				Args:  []string{"--nodes", "3", "--clients", "4", "--ops", "50", "--faults", "none", "--service", "counter", "--param", "mapping=db"},
				Seeds: "1"},
		}
	case p.noPrepare:
		return []automaton.Scenario{
			{Name: "caught by the invariant all-or-nothing (kv: State replicated, Replies in the database)",
				Args: with(crash, "--param", "mapping=pbdb"), Seeds: "1-2"},
		}
	}
	counter := with(crash, "--service", "counter")
	return []automaton.Scenario{
		{Name: "Counter in the database (DB) under crashes: a new primary reloads it",
			Args: with(counter, "--param", "mapping=db"), Seeds: "1-3"},
		{Name: "Counter replicated (PB) under crashes: the senior backup takes over",
			Args: with(counter, "--param", "mapping=pb"), Seeds: "1-3"},
		{Name: "kv replicated (PB) under crashes",
			Args: with(crash, "--param", "mapping=pb"), Seeds: "1-4"},
		{Name: "kv state replicated, answers in the database (PB+DB) under crashes: all-or-nothing across the two",
			Args: with(crash, "--param", "mapping=pbdb"), Seeds: "1-6"},
		{Name: "Counter reconstructible: a fail-over loses the value (documented loss, seen by the checker)",
			Args: with(counter, "--param", "mapping=reconstructible"), Seeds: "3-4", ExpectViolation: true},
	}
}
