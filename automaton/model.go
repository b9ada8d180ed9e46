package automaton

import "github.com/synod-dev/synod/service"

// Model checking (issue 20): the small configuration a protocol is checked
// in exhaustively by package mc, and the symmetries the checker may use.
//
// Every protocol has a model without declaring anything: ModelOf returns a
// generic default (3 nodes, 2 clients, one write then one read each on one
// key, timers on). A protocol whose default does not fit (a service other
// than KV, requests that must carry options, a role layout needing more
// nodes, a broken variant that only shows under atomic groups) implements
// ModelDeclarer, in a model.go of its own package.

// ModelConfig is a small checkable configuration of one protocol.
type ModelConfig struct {
	// Nodes is the cluster size (n1..nN).
	Nodes int
	// Clients is the number of closed-loop clients; client c (from 1) sends
	// Scripts[c-1] one request at a time.
	Clients int
	// Scripts holds each client's requests, in order. Empty: the default
	// script (client c: set x "c", then get x).
	Scripts [][]service.Op
	// Requests, when set, turns client c's i-th operation into the request
	// it sends (options, atomic groups); the ID is filled in by the checker.
	Requests func(client, i int, op service.Op) Request
	// Service is the namespace's service ("" is kv).
	Service string
	// Params are namespace parameters for every node.
	Params map[string]string
	// Target says which node client c sends to: "" or "fixed" (node
	// (c-1) mod Nodes + 1), "first" (n1, a leader-based protocol's usual
	// leader), or "any" (a branching choice of the checker).
	Target string
	// Depth is the default search depth (events after the Prefix).
	Depth int
	// Prefix is a scripted start: events described exactly as the checker
	// prints them in a trace ("client 1 sends set x 1 to n1", "n2: timer 3
	// fires", "deliver n2 -> n1: ..."), applied in order from the initial
	// state before the search starts. The search's root is the state after
	// the prefix, so it is a reduction: it covers only the runs that start
	// with these events (say, one election a deep bug needs but does not
	// vary). A prefix event that is not enabled when its turn comes is a
	// configuration error naming it. Counterexamples include the prefix's
	// events, and replaying one applies them.
	Prefix []string
	// Network is the default network model ("" is lossless,unordered; see
	// mc.ParseNetwork: lossy, ordered, duplicating, and bynode: while
	// messages are in flight only those addressed to the highest-numbered
	// node with mail may be delivered, a reduction that may skip real
	// orderings, for finding bugs only; counterexamples are still replayed).
	Network string
	// Timers is the default timer mode ("" is quiet: a timer fires only
	// when no message is in flight; "all": at any moment; "none"), with an
	// optional budget ":N" (e.g. "quiet:4"): at most N timer firings on one
	// path, part of the state; a state quiet only because the budget ran
	// out is not judged by the eventually property.
	Timers string
	// Crashes is the default bound on crashes per path (each crashed node
	// may restart from its records).
	Crashes int
	// CrashBeforeFsync lets a crash fall after a step's Early Send and
	// before the fsync of the records that step persisted (those records
	// are lost). Otherwise every step's records are durable at its end.
	CrashBeforeFsync bool
	// Progress names "sometimes" properties (mc.SomeWrite, mc.SomeRead)
	// the model requires: when the search exhausts the model (no state
	// left unexpanded at the depth bound, no state bound reached) and a
	// named property holds on no path, that is a violation. It is bounded
	// liveness: within the model's timer and crash budgets no run makes
	// that progress (a dead leader never replaced), which the eventually
	// property, judged only on quiet states with budgets left, cannot see.
	Progress []string
	// NoTimers leaves timers out of the enabled events (a protocol whose
	// model terminates without them; fewer states).
	NoTimers bool
	// StatefulEffects names the Effect kinds whose executor keeps state
	// from one effect to the next (a database that outlives node crashes):
	// the checker keeps the log of such effects in the state and re-applies
	// it to a fresh executor before each one. Other kinds get a fresh
	// executor per effect.
	StatefulEffects []string
	// SymmetricNodes asks for symmetry reduction over interchangeable
	// nodes: the checker treats states that differ by a permutation of
	// those nodes' names as one (automaton/modelsym.go). The protocol says
	// which nodes are interchangeable (ModelNodeSymmetry: ABD's nodes that
	// no client sends to, its tags ordering writers by name) and renames
	// node names inside its state, messages and records (ModelNodeRenamer);
	// for a protocol without them it changes nothing.
	SymmetricNodes bool
	// SymmetricClients declares that clients with equal scripts are
	// interchangeable: the checker canonicalises the clients' part of the
	// state (their progress and histories) under permutations of equal
	// scripts. Sound only when the protocol's state does not depend on a
	// client's id other than through request ids it treats opaquely.
	SymmetricClients bool
	// ClientDriven makes every client run its script's operations itself
	// through the protocol's client coordinator (ClientCoordinator, as sim
	// --client-driven does): each phase's request goes to every node with
	// a fresh request id, the nodes' answers feed the coordination, and
	// the operation enters the history once (invoked at its first phase's
	// send, returned when the coordination is done). The coordination's
	// state is part of the checked state. Scripts hold single operations
	// the coordinator runs; client and node symmetry are not applied.
	ClientDriven bool
}

// ModelDeclarer is implemented by protocols (and broken variants) that
// declare their own model-checking configuration.
type ModelDeclarer interface {
	Model() ModelConfig
}

// DefaultModel is the model of a protocol that declares none.
func DefaultModel() ModelConfig {
	return ModelConfig{Nodes: 3, Clients: 2, Depth: 14}
}

// ModelOf returns the named protocol's model: its declared one with unset
// fields taken from DefaultModel, or DefaultModel itself.
func ModelOf(name string) ModelConfig {
	d := DefaultModel()
	caps, err := capsOf(name)
	if err != nil || caps.Model == nil {
		return d
	}
	c := caps.Model()
	if c.Nodes == 0 {
		c.Nodes = d.Nodes
	}
	if c.Clients == 0 && len(c.Scripts) == 0 {
		c.Clients = d.Clients
	}
	if c.Clients == 0 {
		c.Clients = len(c.Scripts)
	}
	if c.Depth == 0 {
		c.Depth = d.Depth
	}
	return c
}

// Snapshotter is implemented by automata that copy themselves: the copy
// must behave exactly as the original would from now on, and share nothing
// mutable with it. The model checker then expands a state by copying it
// instead of replaying the events that led to it from a fresh instance
// (package mc's generic copier is used otherwise, and replay verifies every
// counterexample either way).
type Snapshotter interface {
	Snapshot() Automaton
}
