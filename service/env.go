package service

import (
	"math/rand/v2"

	"github.com/synod-dev/synod/wire"
)

// Nondeterministic services (the Grid Services thesis chapters I and III.C.1: a service whose answers
// depend on more than its state and the request, such as the Matchmaker's
// random choice of a machine).
//
// A service declares Nondeterministic() true. Its states implement
// EnvApplier: ApplyEnv reads time and randomness from an explicit Env and
// from nowhere else, so that replaying an operation with the same Env gives
// the same state and answer. The runtime observes an Env when a request
// arrives (Request.Env: virtual time and the simulation's randomness in the
// simulator, the clock and the operating system's randomness live) and the
// protocol decides what the replicas agree on:
//
//   - the resulting state (primary-backup, PB-Paxos: one replica applies,
//     the others install its state or delta), or
//   - the environment one replica chose (Eve's mixer, Multi-Paxos whose
//     leader puts the Env into the log entry beside the command).
//
// A protocol that would let replicas apply independently (ABD, ESDS, the
// blocking protocol) is refused such a service at configuration time
// (automaton.CheckService).

// Env is the environment of one operation: what a nondeterministic service
// may observe besides its state and the operation.
type Env struct {
	// Time is the wall-clock time, in nanoseconds since the Unix epoch (or
	// virtual time in simulation), at which the environment was observed.
	Time int64
	// Seed seeds the operation's random source (Rand).
	Seed uint64
}

// Rand returns the operation's random source: the same Env gives the same
// sequence of numbers on every replica.
func (e Env) Rand() *rand.Rand {
	return rand.New(rand.NewPCG(e.Seed, uint64(e.Time)^0x9e3779b97f4a7c15))
}

// For returns the Env of the i-th operation of an atomic group, so that
// operations of one group draw different numbers.
func (e Env) For(i int) Env {
	if i == 0 {
		return e
	}
	return Env{Time: e.Time, Seed: e.Seed ^ (uint64(i) * 0xbf58476d1ce4e5b9)}
}

// EncodeEnv appends e's binary form.
func EncodeEnv(w *wire.Encoder, e Env) {
	w.Varint(e.Time)
	w.Uvarint(e.Seed)
}

// DecodeEnv reads an Env written by EncodeEnv.
func DecodeEnv(d *wire.Decoder) Env { return Env{Time: d.Varint(), Seed: d.Uvarint()} }

// NondeterministicService is implemented by services whose operations read
// an environment.
type NondeterministicService interface {
	Nondeterministic() bool
}

// IsNondeterministic reports whether svc declares itself nondeterministic.
func IsNondeterministic(svc Service) bool {
	n, ok := svc.(NondeterministicService)
	return ok && n.Nondeterministic()
}

// EnvApplier is implemented by the states of nondeterministic services.
type EnvApplier interface {
	// ApplyEnv performs op in environment env. It must be a pure function
	// of (state, op, env).
	ApplyEnv(op Op, env Env) Result
}

// ApplyEnv applies op to st in env: through EnvApplier when st has it,
// through Apply otherwise (deterministic services ignore the environment).
func ApplyEnv(st State, op Op, env Env) Result {
	if a, ok := st.(EnvApplier); ok {
		return a.ApplyEnv(op, env)
	}
	return st.Apply(op)
}
