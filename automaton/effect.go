package automaton

import (
	"math/rand"
	"time"

	"github.com/synod-dev/synod/internal/registry"
)

// Effects: work an automaton may not do itself.
//
// Protocol code is pure: no I/O, no goroutines, no clock. Some protocols
// still need such work done as part of their algorithm: Eve's replicas
// execute a batch on a worker pool (the Eve/Adam thesis), the durability proxies of
// the Grid Services thesis chapter IV write a request's updates to a SQL database, Adam's
// replicas call another namespace. An automaton asks for it with an Effect
// output naming a registered Executor kind; the runtime carries it out and
// answers, in a later step, with an EffectDone input. The automaton stays a
// deterministic function of its inputs: what the executor did reaches it
// only as EffectDone.
//
// The rules every runtime keeps (sim, harness, node):
//
//   - An Effect leaves like a Send: after every Persist emitted before it is
//     durable, in emission order with the step's other outputs.
//   - EffectDone never arrives within the step that emitted the Effect, and
//     arrives at most once per Effect.
//   - A crash (or stop) loses the pending effects of the incarnation: a
//     restarted automaton never receives EffectDone for an earlier
//     incarnation's Effect, and the executor instances of the incarnation
//     are closed. Whatever an executor already did outside (a committed SQL
//     transaction) stays done; the protocol's recovery must account for it.
//   - Executor instances are created lazily, one per (node incarnation,
//     namespace, kind), with that namespace's parameters.
//   - In simulation Execute runs synchronously, in the event loop, and must
//     be a deterministic function of its payload and ExecEnv.Rand; a result
//     that implements CostedResult is delivered after Cost() of virtual
//     time (otherwise at once, as the next event). Live runtimes call
//     Execute on goroutines of their own, several at a time, and deliver
//     EffectDone when it returns.
//
// Ownership: the Payload (and anything reachable from it) belongs to the
// runtime from the step that emits the Effect until the step that receives
// its EffectDone; the automaton must neither read nor write it meanwhile.
// This is how a batch's state can be executed on in parallel without a
// copy, like a buffer handed to a device.

// EffectID names one effect within one automaton incarnation; the automaton
// chooses it (a counter).
type EffectID uint64

// Effect asks the runtime to carry out work of a registered kind.
type Effect struct {
	ID      EffectID
	Kind    string // names a registered Executor (RegisterExecutor)
	Payload any
}

// EffectDone is the runtime's answer to Effect ID.
type EffectDone struct {
	ID     EffectID
	Result any
	Err    error
}

func (Effect) isOutput()    {}
func (EffectDone) isInput() {}

// ExecEnv is what an executor instance learns about where it runs.
type ExecEnv struct {
	Self      NodeID
	Namespace string
	// Params are the namespace's protocol parameters (the cluster file's).
	Params map[string]string
	// DataDir is the node's data directory ("" in simulation).
	DataDir   string
	Simulated bool
	// Run names the run the executor belongs to: unique per simulated run
	// within a process ("sim-<n>-seed-<seed>"), the cluster's name live.
	// An executor that models a component outliving crashes (a simulated
	// database shared by a namespace's nodes) keys its state by Run and
	// Namespace, so that runs in one process do not share it.
	Run string
	// Rand is deterministic in simulation (derived from the run's seed, the
	// node, the incarnation and the kind); use it for any modelled
	// nondeterminism, such as the interleaving of conflicting operations.
	Rand *rand.Rand
	// WorkPerMs is how many iterations of cpuwork.Work make a millisecond
	// of CPU on this machine, measured once per process by the live
	// runtime (cpuwork.Calibrate); 0 in simulation, where modelled work is
	// virtual time.
	WorkPerMs float64
}

// Executor carries out effects of one kind for one automaton instance.
type Executor interface {
	// Execute runs one effect. It must not touch the automaton. Live
	// runtimes may call it from several goroutines at once.
	Execute(payload any) (result any, err error)
	// Close releases the executor's resources (connections, workers) when
	// its incarnation stops or crashes.
	Close() error
}

// CostedResult may be implemented by an effect's result: the simulator
// delivers EffectDone Cost() of virtual time after the effect was carried
// out, modelling its execution time (the makespan of a parallel batch on C
// virtual cores, a database round trip). Live runtimes ignore it.
type CostedResult interface{ Cost() time.Duration }

// NewExecutor creates an executor instance.
type NewExecutor func(env ExecEnv) (Executor, error)

var executors = registry.New[NewExecutor]("effect executor")

// RegisterExecutor makes an executor kind available; call it from init, in
// the package that defines the kind.
func RegisterExecutor(kind string, f NewExecutor) { executors.Register(kind, f) }

// LookupExecutor returns the constructor registered for kind.
func LookupExecutor(kind string) (NewExecutor, error) { return executors.Lookup(kind) }

// ExecutorKinds lists the registered executor kinds, sorted.
func ExecutorKinds() []string { return executors.Names() }

// Executors holds one incarnation's executor instances, created on first
// use; runtimes keep one per (node incarnation, namespace). It is not safe
// for concurrent use: the runtime calls For from the automaton's loop.
type Executors struct {
	env ExecEnv
	// rand derives each kind's ExecEnv.Rand (deterministic streams in
	// simulation, seeded by the operating system live).
	rand func(kind string) *rand.Rand
	m    map[string]Executor
}

// NewExecutors returns an empty set for env; randFor gives each kind its
// random source.
func NewExecutors(env ExecEnv, randFor func(kind string) *rand.Rand) *Executors {
	return &Executors{env: env, rand: randFor, m: map[string]Executor{}}
}

// For returns the instance for kind, creating it on first use.
func (x *Executors) For(kind string) (Executor, error) {
	if e := x.m[kind]; e != nil {
		return e, nil
	}
	f, err := LookupExecutor(kind)
	if err != nil {
		return nil, err
	}
	env := x.env
	env.Rand = x.rand(kind)
	e, err := f(env)
	if err != nil {
		return nil, err
	}
	x.m[kind] = e
	return e, nil
}

// Close closes every instance and forgets them; it returns the first error.
func (x *Executors) Close() error {
	var first error
	for k, e := range x.m {
		if err := e.Close(); err != nil && first == nil {
			first = err
		}
		delete(x.m, k)
	}
	return first
}
