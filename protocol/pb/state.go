package pb

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

var _ automaton.StateReporter = (*PB)(nil)

// ServiceState implements automaton.StateReporter. A node reports its
// state only when every entry it applied is known to be on every member
// (applied <= stable, or the primary's committed count): an entry beyond
// that may be lost in a fail-over and its index reused by the next primary
// for another request, which is not a divergence. Committed prefixes must
// agree on every node and across views; that is what the simulator checks.
func (a *PB) ServiceState() (uint64, service.State) {
	if a.m == nil || a.role == roleJoining || a.role == roleRecovering {
		return 0, nil
	}
	known := a.stable
	if a.role == rolePrimary {
		known = a.committed
	}
	if a.m.applied > known {
		return 0, nil
	}
	return a.m.applied, a.m.st
}
