// Package automaton defines the contract every Synod protocol role obeys.
//
// A role (an ABD coordinator and replica, a Paxos acceptor, an ESDS front end, ...)
// is written as an I/O automaton in the sense of the ESDS thesis, chapter 2.1: a state
// machine that takes one input action at a time and emits output actions. The
// mapping to a program follows the ESDS thesis, chapter 3: every input action of the
// composition becomes one call of Step, and every output action becomes one value
// in the slice Step returns.
//
// # The contract
//
// Inputs, delivered one at a time by a runtime:
//
//   - Start: the first input after creation or after a crash, carrying every
//     record the role persisted (and the runtime made durable) before the crash.
//   - ClientRequest: a request from a client, identified by (client, sequence).
//   - ClientBatch: several client requests at once, for protocols that
//     declare BatchStepper (capability.go); the same as stepping each.
//   - PeerMessage: an encoded message from another node's automaton of the same
//     namespace.
//   - TimerFired: a timer the automaton set earlier and has not cancelled.
//
// Outputs, returned in order from Step:
//
//   - Send: an encoded message to a peer. Delivery is not guaranteed: the
//     network may lose, duplicate, delay or reorder it.
//   - Respond: the answer to a ClientRequest.
//   - Persist: write (or delete) one record in the role's durable store.
//   - SetTimer / CancelTimer: ask for a TimerFired after a duration.
//
// The durability rule (the etcd raft "Ready" discipline): a runtime makes every
// Persist record durable before it releases any Send or Respond that the same
// Step, or any later Step, emitted after it. Runtimes may hold outputs back longer
// (to batch fsyncs: group commit) but never release them earlier.
// The one exception is a Send marked Early, which waits only for what the
// last output before it that is not Early waits for (Send.Early says when a
// protocol may mark one).
//
// Protocol code is pure. Step never reads the clock, starts a goroutine, touches
// a socket or file, or uses global randomness. The only randomness a role may use
// is Config.Rand, seeded by the runtime (from the simulation seed, or from the
// operating system in the live runtime). Because of this, the simulator can run a
// whole cluster from one seed and replay it exactly.
//
// Step must not retain the Input's byte slices beyond the call unless it copies
// them, and the runtime must not modify slices in outputs it has received.
// A ClientRequest's operation arguments are the exception: the runtime hands
// them over as the automaton's own (the node copies them out of the caller's
// buffers, the simulator clones every request it delivers) and never modifies
// them afterwards, so an automaton may keep them (a pending request, the batch
// a Multi-Paxos leader proposes and executes, a stored value). Copies of an
// automaton's state may share them (the model checker's), so neither the
// automaton nor its service changes them in place.
package automaton

import (
	"cmp"
	"fmt"
	"math/rand"
	"slices"
	"time"

	"github.com/synod-dev/synod/service"
)

// NodeID names a node in the cluster configuration, for example "n1".
type NodeID string

// RequestID identifies a client request. Client ids are chosen at random by
// clients (64 bits); Seq increases by one per request of that client. A retry of
// the same request carries the same RequestID.
type RequestID struct {
	Client uint64
	Seq    uint64
}

func (r RequestID) String() string { return fmt.Sprintf("%x:%d", r.Client, r.Seq) }

// ReadMode selects how a read is served, per request. Every protocol documents
// which modes it offers; a protocol answers a mode it does not offer with an
// error, except that a protocol may serve any of the linearizable modes
// (ReadDefault, ReadLog, ReadQuorum, ReadLease) by its own linearizable read.
type ReadMode uint8

const (
	// ReadDefault is the protocol's own linearizable read.
	ReadDefault ReadMode = iota
	// ReadRegular skips the steps that make a read linearizable (ABD: no
	// write-back). It may return a value older than a previously returned one.
	ReadRegular
	// ReadLocal answers from the contacted replica's state alone (may be stale).
	ReadLocal
	// ReadLog orders the read through the replicated log (state machine
	// protocols): linearizable, at the cost of a log write.
	ReadLog
	// ReadQuorum: the leader answers after a majority confirms it still leads:
	// linearizable, no log write.
	ReadQuorum
	// ReadLease: the leader answers under a time lease, with no message at all;
	// linearizable while clock drift stays within the protocol's stated bound.
	ReadLease
)

var readModeNames = []string{"linearizable", "regular", "local", "log", "quorum", "lease"}

// ParseReadMode parses a read mode name ("default" means "linearizable").
func ParseReadMode(s string) (ReadMode, error) {
	if s == "" || s == "default" {
		return ReadDefault, nil
	}
	for i, n := range readModeNames {
		if s == n {
			return ReadMode(i), nil
		}
	}
	return 0, fmt.Errorf("unknown read mode %q (want one of %v)", s, readModeNames)
}

func (m ReadMode) String() string {
	if int(m) < len(readModeNames) {
		return readModeNames[m]
	}
	return fmt.Sprintf("ReadMode(%d)", uint8(m))
}

// Linearizable reports whether the mode promises linearizable reads.
func (m ReadMode) Linearizable() bool {
	return m == ReadDefault || m == ReadLog || m == ReadQuorum || m == ReadLease
}

// Request is one client operation on a namespace, or an atomic group of
// operations, or one step of an interactive transaction (txn.go).
type Request struct {
	ID RequestID
	// Op is the operation; unused when Ops is set.
	Op service.Op
	// Ops, when non-empty, is an atomic group (MULTI/EXEC, per-request
	// atomicity): the operations take effect together, in order, all or
	// none, with nothing interleaved; Response.Results answers each.
	// Protocols whose TxnSupport lacks Atomic refuse it before applying
	// anything.
	Ops []service.Op
	// Txn, when set, makes the request a step of an interactive
	// transaction (txn.go).
	Txn *TxnStep
	// Env is the environment the runtime observed when the request arrived
	// (time, fresh randomness). Only nondeterministic services read it, and
	// only through the protocol, which decides whose environment the
	// replicas use (env.go).
	Env  service.Env
	Opts Options
	// Fanout: the client sent this same request to every replica itself
	// (FanoutProtocol, capability.go). The automaton plays only its own
	// part and may answer Silent. Unset, the contacted node serves the
	// request as usual (it proposes or forwards on the client's behalf).
	Fanout bool
	// Nested marks a request one namespace sends another (call.go): the
	// callee orders it and caches its answer even when it only reads, and
	// answers every copy of its id alike.
	Nested bool
	// Checked: the runtime's edge validated the request against its
	// namespace's service (ValidateRequest), so the protocol does not
	// again (proto.Validating). Never on the wire: a request that crosses
	// it is a peer's forward, which protocols trust, or is checked again.
	Checked bool
	// Unanswered is the lowest sequence number among the client's requests
	// not yet answered to it (its own Seq at most; 0: not told). The
	// client never asks again for the outcome of an id below it, so a
	// protocol's table of outcomes may forget those (the Raft thesis §6.3;
	// Dragonboat's RespondedTo). The gateway knows it per connection, a
	// closed-loop client is its current request.
	Unanswered uint64
}

// Response answers a Request.
type Response struct {
	ID     RequestID
	Result service.Result
	// Results answers an atomic group, one result per operation, when the
	// group was applied; Result is then OK. A refused or aborted group has
	// Result set to the error and no Results.
	Results []service.Result
	// Silent answers a Fanout request at a replica that is not the one to
	// reply (FanoutProtocol): the runtime releases the request and tells
	// the client to wait for another replica's answer. Result is ignored.
	Silent bool
}

// Input is one input action.
type Input interface{ isInput() }

// Start is the first input of every incarnation of a role.
type Start struct {
	// Records holds every durable record, keyed by record key. Empty on first boot.
	Records map[string][]byte
}

// ClientRequest delivers a client's request to the node the client contacted.
type ClientRequest struct{ Req Request }

// ClientBatch delivers several client requests that reached the node
// together (what a runtime found in its inbox in one pass), in arrival
// order, to a protocol that declares BatchStepper. It means what stepping
// each as a ClientRequest, in this order, means: every request is answered
// by its own Respond and keeps its own semantics. The protocol may share
// work among them (ABD: one message per peer carrying many keys' phases).
// Runtimes deliver it only to protocols that declare BatchStepper, and
// only with two requests or more. The Reqs slice belongs to the runtime
// (it may reuse it after the step); each request is the protocol's as a
// ClientRequest's is.
type ClientBatch struct{ Reqs []Request }

// PeerMessage delivers an encoded message sent by From.
type PeerMessage struct {
	From NodeID
	Msg  []byte
}

// TimerFired reports that timer ID, set earlier and not cancelled, expired.
type TimerFired struct{ ID TimerID }

func (Start) isInput()         {}
func (ClientRequest) isInput() {}
func (ClientBatch) isInput()   {}
func (PeerMessage) isInput()   {}
func (TimerFired) isInput()    {}

// TimerID names a timer within one automaton. Setting a timer that is already
// set replaces it.
type TimerID uint64

// Output is one output action.
type Output interface{ isOutput() }

// Send an encoded message to a peer (never to self; runtimes reject that).
type Send struct {
	To  NodeID
	Msg []byte
	// Early marks a message that adds no durability requirement of its
	// own: it depends only on the Persists that the last Send, Respond or
	// Effect emitted before it (in this Step or an earlier one) that is
	// not Early already waits for, and not on the Persists emitted since,
	// its own Step's among them. A runtime releases it as soon as those
	// are durable, so it may leave before the records of its own Step
	// are; it still leaves after every output emitted before it. A crash
	// between its release and the fsync of the later records loses those
	// records but not the message (the simulator models exactly that).
	// Effect has no such flag; a Respond may narrow what it waits for to
	// positioned records (Respond.UpTo), or to nothing when it relays
	// another node's answer (Respond.Relayed).
	//
	// What a protocol must guarantee to set it: nothing the message
	// carries reveals state resting on a record emitted after that last
	// waiting output, which a crash could lose in a way that breaks
	// safety. Multi-Paxos's leader sends its phase 2a Accept early
	// (protocol/paxos, package doc, "Phase 2, commit and execution"): it
	// carries a value the leader has not durably accepted yet, which is
	// harmless because the leader counts its own vote only toward
	// decisions that leave it after the vote's record is durable (every
	// answer, and every commit notice, which the early Accept carries only
	// when an earlier waiting output of its step covers the votes it
	// rests on). An acceptor's 2b must never be early: it reports a vote
	// whose record a crash would erase (paxos-broken-earlyack).
	Early bool
	// Relayed marks a message that relays what another party gave this
	// node and rests on no record of it (package release: its requirement
	// is 0, it is held apart and may leave before outputs emitted earlier
	// that still wait; for an Early Send emitted after it, it counts as an
	// output that waits for everything before it, as a relayed Respond
	// does). What a protocol must guarantee to set it: nothing the message
	// carries depends on a record of this node, durable or not, so a crash
	// that loses every unsynced record leaves it true. Multi-Paxos's
	// follower forwards its client's request to the leader this way
	// (protocol/paxos, package doc, "Clients, forwarding, exactly-once"):
	// it carried the request only after the follower's own earlier records
	// were durable, so one client's next put through a follower waited for
	// the follower's sync of the previous put's acceptance (until session 51).
	Relayed bool
}

// Respond answers a client request.
//
// UpTo, when positive, narrows what the answer waits for (a positioned
// answer; package release, "Positioned answers"): instead of every Persist
// emitted before it, only those emitted before it whose Pos is in
// [1, UpTo] (and, records being durable in emission order, everything
// emitted before the last of those). A runtime releases it as soon as
// those are durable, possibly before outputs emitted earlier that still
// wait. For any Early Send emitted after it, it counts as an output that
// waits for everything before it (the Early rule is unchanged).
//
// What a protocol must guarantee to set it: the answer rests on nothing
// the node persisted except the positioned records up to UpTo; a crash that
// loses every later record (and every record without a position emitted
// after the last of them) leaves the answer true. Multi-Paxos answers the
// commands of instance i with UpTo = i: the answer rests on instances 1..i
// being chosen, and the node's own part in that is its acceptance records
// of those instances (protocol/paxos, package doc, "Positioned answers").
//
// Relayed marks an answer that relays another node's answer (a relayed
// answer; package release): it waits for no record of this node, and a
// runtime releases it at once, possibly before outputs emitted earlier
// that still wait. For any Early Send emitted after it, it counts as an
// output that waits for everything before it (the Early rule is
// unchanged). What a protocol must guarantee to set it: the answer states
// only what the other node stated, and that node stated it under the
// durability rule there, so a crash of this node that loses every record
// it has not synced leaves the answer true. Multi-Paxos's follower relays
// its leader's ForwardReply this way (protocol/paxos, package doc,
// "Positioned answers"); its own acceptance of the instance, still
// syncing, is not what made it chosen when the leader heard another
// follower first (paxos-broken-relayall marks every answer relayed and is
// caught).
type Respond struct {
	Resp    Response
	UpTo    uint64
	Relayed bool
}

// Persist writes Value under Key, or removes Key when Delete is set.
//
// Pos, when positive, is the log position the record belongs to (Multi-
// Paxos: the instance of an acceptance record). Only positioned answers
// (Respond.UpTo) look at it; every other output waits for every record
// emitted before it, positioned or not.
type Persist struct {
	Key    string
	Value  []byte
	Delete bool
	Pos    uint64
}

// SetTimer asks for TimerFired{ID} after After (virtual time in simulation).
//
// Slack, when positive, says the timer may fire up to Slack later than
// After without harm (a periodic tick, never a lease or an election
// timeout: those must fire on time). The node's runtime uses it to fire the
// slack timers of all its groups on a shared grid, so their heartbeats
// leave together and reach each peer in one write (coalesced heartbeats,
// node/loop.go, docs/SHARDING.md). The simulator and the other runtimes
// fire at After, which Slack allows.
type SetTimer struct {
	ID    TimerID
	After time.Duration
	Slack time.Duration
}

// CancelTimer cancels timer ID if it is set.
type CancelTimer struct{ ID TimerID }

// Announce reports the result of an operation the protocol proposed on its
// own behalf, not a client's (active expiry: service.ActiveExpire, whose
// result names the keys it removed), once the operation is decided and
// applied, at the one node that proposed it. No client waits for it: a
// runtime hands it to the namespace's listener if it has one (the node:
// the gateway publishes Redis's "expired" keyspace events,
// gateway/notify.go) and otherwise drops it. Like Respond it waits for
// every Persist emitted before it.
type Announce struct {
	Op     service.Op
	Result service.Result
}

// Unpin tells the runtime that this node's records positioned at Pos
// (Persist.Pos) are no longer needed by its positioned answers at Pos
// (Respond.UpTo == Pos), those held now and those emitted later: such an
// answer waits only for the positioned records in [1, Pos-1] emitted
// before it (and, records being durable in emission order, everything
// emitted before the last of those), or for what it waited for already if
// that is less (package release, "Unpinned positions"). It carries no
// durability requirement and nothing leaves the node for it.
//
// What a protocol must guarantee to emit it: what the answers at Pos state
// about position Pos holds whatever a crash does to this node's records
// there. Multi-Paxos's leader emits it once acceptors other than itself
// that form a majority have durably accepted instance Pos under its ballot
// (each Accepted left after its record was durable), so the instance is
// chosen without the leader's own vote: the Classic Paxos quorum rule, t+1
// of 2t+1 acceptors (protocol/paxos, package doc, "The leader's own
// acceptance against the followers'"). paxos-broken-unpinone emits it on
// one follower's acceptance, with the leader's own still unsynced, and is
// caught.
type Unpin struct{ Pos uint64 }

func (Send) isOutput()        {}
func (Respond) isOutput()     {}
func (Persist) isOutput()     {}
func (SetTimer) isOutput()    {}
func (CancelTimer) isOutput() {}
func (Announce) isOutput()    {}
func (Unpin) isOutput()       {}

// Automaton is one role instance of one namespace on one node.
type Automaton interface {
	// Step performs the input action and returns the output actions in order.
	Step(in Input) []Output
}

// Config is what a runtime hands to a protocol to create a role instance.
type Config struct {
	Self      NodeID
	Nodes     []NodeID // every member, including Self, in configuration order
	Namespace string
	Service   service.Service
	// Params holds protocol-specific settings from the cluster file.
	Params map[string]string
	// Rand is the only source of randomness the automaton may use.
	Rand *rand.Rand
}

// Protocol describes a replication protocol to runtimes, the CLI and the simulator.
// Everything else a protocol offers is declared by optional interfaces
// (capability.go): its consistency model, request options, transactions,
// membership changes, nondeterministic services, invariants, default
// parameters. Code outside the protocol's package asks for capabilities and
// never names a protocol.
type Protocol interface {
	Name() string
	// New creates the role instance for cfg.Self. It returns an error for an
	// invalid configuration (unknown parameter, unsupported service).
	New(cfg Config) (Automaton, error)
	// IdempotentRetry reports whether a request retried with the same RequestID
	// at a different node takes effect at most once. Protocols without a
	// replicated deduplication table (ABD) return false; clients then retry
	// only reads elsewhere and report writes as of unknown outcome.
	IdempotentRetry() bool
}

// Majority returns the size of a majority quorum of n members.
func Majority(n int) int { return n/2 + 1 }

// LeaderReporter is implemented by automata that route requests through one
// distinguished node (paxos: the leader). Leader returns the node this
// replica believes leads now, itself included, or "" when it knows none. It
// is a hint, not a guarantee: the runtime calls it from the loop goroutine
// after each batch of steps and tells clients that ask (SYNOD LEADER), so that
// a client can send to the leader directly and save the forwarding hop; a
// request sent to any other replica is still served (forwarded).
type LeaderReporter interface {
	Leader() NodeID
}

// Less orders request ids by client, then sequence number: protocols that
// collect ids from a map sort them with it, so that their outputs do not
// depend on map order.
func (r RequestID) Less(o RequestID) bool {
	if r.Client != o.Client {
		return r.Client < o.Client
	}
	return r.Seq < o.Seq
}

// SortRequestIDs sorts ids in place by RequestID.Less.
// (slices.SortFunc: no allocation, where sort.Slice's swapper allocated
// and made every caller's slice escape).
func SortRequestIDs(ids []RequestID) {
	slices.SortFunc(ids, func(a, b RequestID) int {
		if c := cmp.Compare(a.Client, b.Client); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
}
