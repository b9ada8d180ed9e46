package esds

import "github.com/synod-dev/synod/automaton"

// Scenarios implements automaton.ScenarioDeclarer: a counter namespace with
// strict operations and prev sets (seed 000's test series), where the
// broken variants show, with pinned seeds.
func (p protocol) Scenarios() []automaton.Scenario {
	args := []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "all", "--service", "counter", "--strict", "0.5", "--prev", "0.2"}
	seeds := "1-2"
	if p.earlyStrict || p.maxLabel || p.dupLabel {
		seeds = "1-3"
	}
	return []automaton.Scenario{{Name: "counter, strict and prev", Args: args, Seeds: seeds}}
}
