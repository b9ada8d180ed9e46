package sim

import (
	"github.com/synod-dev/synod/automaton"
)

// Invariants (automaton/invariant.go). When the protocol states invariants,
// the simulator checks them after every step of every node, passing the
// automata of the nodes that are up. The first violation ends the run as a
// violation (Result.Invariant, Result.Violation) with the seed and the
// command that replays it; the history checker is not run then, because the
// invariant already names the first wrong state, usually long before a
// client could see it.

// checkInvariants runs the protocol's invariant checker after n stepped.
func (s *simulator) checkInvariants(n *node) {
	if s.inv == nil || s.invErr != "" {
		return
	}
	up := make(map[automaton.NodeID]automaton.Automaton, len(s.nodes))
	for _, m := range s.nodes {
		if m.up && m.a != nil {
			up[m.id] = m.a
		}
	}
	s.invChecked++
	if err := s.inv.Check(n.id, up); err != nil {
		s.invErr = "after a step of " + string(n.id) + " at " + s.now.String() + ": " + err.Error()
		s.tracef("INVARIANT VIOLATED %s", s.invErr)
	}
}
