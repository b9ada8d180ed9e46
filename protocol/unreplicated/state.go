package unreplicated

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

var _ automaton.StateReporter = (*Unreplicated)(nil)

// ServiceState implements automaton.StateReporter: on the server, the
// writes applied (the index of the last write record) and the state after
// them; forwarders hold no state and report nil. With one copy there is
// nothing to diverge from, except the server's own earlier incarnations:
// recovery replays each write record with its recorded Env, so a restarted
// server at the same count holds the same state (for the writes whose
// records were durable; the simulator discards counts only a crashed
// incarnation reported).
func (u *Unreplicated) ServiceState() (uint64, service.State) {
	if !u.isServer || u.st == nil {
		return 0, nil
	}
	return u.applied, u.st
}
