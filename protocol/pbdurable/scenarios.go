package pbdurable

import "github.com/synod-dev/synod/automaton"

// Scenarios implements automaton.ScenarioDeclarer: the conformance suite
// runs the standard ones (kv under the default mapping) besides these.
func (p protocol) Scenarios() []automaton.Scenario {
	if p.replyBeforeDB {
		return []automaton.Scenario{
			{Name: "caught by the invariant reply-after-durable",
				Args:  []string{"--nodes", "3", "--clients", "4", "--ops", "50", "--faults", "none", "--service", "counter", "--param", "mapping=db"},
				Seeds: "1"},
		}
	}
	crash := []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "crash,dup,reorder,slow", "--service", "counter"}
	return []automaton.Scenario{
		{Name: "Counter in the database (DB) under crashes: a new primary reloads it",
			Args: append(append([]string{}, crash...), "--param", "mapping=db"), Seeds: "1-3"},
		{Name: "Counter replicated (PB) under crashes: the senior backup takes over",
			Args: append(append([]string{}, crash...), "--param", "mapping=pb"), Seeds: "1-3"},
		{Name: "kv replicated (PB) under crashes",
			Args: []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "crash,dup,reorder,slow", "--param", "mapping=pb"}, Seeds: "1-4"},
		{Name: "Counter reconstructible: a fail-over loses the value (documented loss, seen by the checker)",
			Args: append(append([]string{}, crash...), "--param", "mapping=reconstructible"), Seeds: "3-4", ExpectViolation: true},
	}
}
