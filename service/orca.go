package service

// Guarded operations (the Orca paper, Orca's shared data-objects; guards come from
// Orca's language papers, the seed's references [10, 12]): an operation
// whose guard is false blocks until a later write makes it true, as a job
// queue's get blocks on an empty queue. A state whose operations may carry
// guards implements GuardedState; a protocol that supports it (orca-bcast,
// orca-primary) holds a request whose guard is false inside the automaton
// and applies it after the first later write that makes the guard true, so
// that no client polls. Protocols that do not know GuardedState apply every
// operation at once, and a guarded operation whose guard is false then
// answers ErrGuardBlocked.

// GuardedState is implemented by states with guarded operations.
type GuardedState interface {
	State
	// Ready reports whether op's guard holds in the current state (true
	// for an operation without a guard). It only reads.
	Ready(op Op) bool
}

// ErrGuardBlocked is the error a guarded operation answers when it was
// applied while its guard did not hold.
const ErrGuardBlocked = "GUARD the operation's guard does not hold"

// Ready reports whether op may run on st now: always, unless st is a
// GuardedState whose guard for op is false.
func Ready(st State, op Op) bool {
	g, ok := st.(GuardedState)
	return !ok || g.Ready(op)
}
