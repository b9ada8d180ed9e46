package paxos

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

var _ automaton.StateReporter = (*Paxos)(nil)

// ServiceState implements automaton.StateReporter: the number of log
// instances this replica has executed (a.executed; a snapshot installed by
// catch-up counts as executing up to its index) and the state machine's
// service state after them. Every replica executes the same chosen values
// in instance order with the Env logged beside each command, so replicas at
// the same instance hold equal states (package doc, "Phase 2, commit and
// execution").
func (a *Paxos) ServiceState() (uint64, service.State) {
	if a.sm == nil {
		return 0, nil
	}
	return a.executed, a.sm.st
}
