package automaton

import "github.com/synod-dev/synod/service"

// State reporting, for the simulator's convergence checks (issue 9 items 4
// and 5).
//
// A state machine protocol keeps a replica of the service state on some or
// all of its nodes. Replicas that executed the same prefix of the agreed
// order must hold equal states, and a nondeterministic service
// (service.Nondeterministic) is where a protocol most easily breaks that:
// a replica that applies a command with its own environment rather than
// the agreed one diverges without any client noticing at once. The
// simulator therefore asks each automaton that implements StateReporter for
// its state after its steps and compares the service.StateHash of replicas
// that report the same applied count (sim/converge.go).

// StateReporter is implemented by automata that hold a replica of the
// service state.
type StateReporter interface {
	// ServiceState returns the number of commands (or log instances: a
	// protocol picks one unit and keeps it) this replica has executed, and
	// the service state after exactly those. Two replicas of a correct
	// protocol that report the same count hold states with equal
	// service.StateHash. st is nil when the automaton holds no replica at the
	// moment (a forwarder, a node not yet started); the caller only reads st
	// and must not keep it past the automaton's next step.
	ServiceState() (applied uint64, st service.State)
}

// PlacementReporter is implemented by automata that keep copies of their
// objects on some nodes only (Orca's primary-copy runtime, the Orca paper §3):
// Placement describes, for each object this node holds a copy of, where
// the object's copies are as far as this node knows ("primary=n1
// copies=n1,n3 version=4 migrations=1" at the primary, "secondary
// version=4" elsewhere; a description starting "primary=" marks a primary
// copy, which the metric synod_orca_copies counts). The runtime calls it on the automaton's goroutine
// and shows it in INFO and `synod cluster status`.
type PlacementReporter interface {
	Placement() map[string]string
}
