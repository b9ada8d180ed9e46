// Package release is the one interpreter of the automaton contract
// (package automaton): it takes the outputs of an automaton's steps, one at
// a time and in emission order, and decides what is persisted in which
// order, what may be released and when, and which outputs break the
// contract. Every runtime drives it with its own I/O: the live node
// (node/loop.go: real disk through its committer, real sockets), the
// simulator (sim/node.go: a simulated disk with an unsynced buffer, fsync
// latency and crashes), the model checker (mc/world.go: every step ends
// with an fsync) and the test harness (harness/cluster.go: the same). So
// the simulator's fsync, crash and power-loss faults exercise the very code
// that decides what a live node acknowledges.
//
// # What it decides
//
// Numbering: every Persist gets the next sequence number of its
// incarnation (1, 2, ...), and the runtime is told to append it to its log
// of records (Runtime.Persist). The runtime makes records durable in
// emission order (a prefix at a time: the WAL's and Pebble's batches,
// the simulator's fsync of its buffer) and reports the number of the last
// durable one (Interp.Durable).
//
// The durability rule (etcd raft's Ready discipline, package automaton):
// every Send, Respond, Effect and Announce waits for the Persist numbered by the last
// Persist emitted before it, in its own step or any earlier one: its
// requirement. A Send marked Early (automaton.Send.Early) adds no
// requirement of its own: it requires what the last output before it that
// was not Early required, so it may leave before the records of its own
// step are durable. Requirements grow with emission order, so one queue in
// emission order serves every output: an output leaves as soon as its
// requirement is durable and every output emitted before it has left
// (Runtime.Release). Nothing leaves after Fail (a failed commit: nobody
// knows what is on disk), and a crash (Crash) drops what is held.
//
// Timers and membership carry no durability requirement: SetTimer,
// CancelTimer and Members go to the runtime at once.
//
// Contract checks (Violation): a Send to the automaton's own node or to a
// node the runtime does not know (Config.Known), a Persist with an empty
// key, a SetTimer with a negative duration, a nil or unknown output. The
// interpreter refuses the output (nothing of it reaches the runtime) and
// returns the violation; what happens next is the runtime's policy: the
// simulator, the harness and the model checker fail the run, a live node
// logs, counts and goes on.
//
// # Concurrency
//
// An Interp is not safe for concurrent use. The live node steps on its loop
// goroutine and reports durability from its committer, so it calls both
// under one mutex (node/loop.go rmu), which is also held while outputs are
// released, so that they leave in emission order whichever goroutine
// releases them.
package release

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
)

// Runtime is the I/O a runtime does on the interpreter's decisions. The
// interpreter calls it synchronously, in emission order.
type Runtime interface {
	// Persist appends record seq (numbered from 1 per incarnation) to the
	// runtime's records that are not durable yet. The runtime must make
	// them durable in this order and report it with Interp.Durable.
	Persist(seq uint64, p automaton.Persist)
	// Release lets a Send, Respond or Effect leave now.
	Release(o automaton.Output)
	// SetTimer arms (or re-arms) a timer; the duration is not negative.
	SetTimer(t automaton.SetTimer)
	// CancelTimer cancels a timer if it is set.
	CancelTimer(id automaton.TimerID)
	// Members reports a membership-aware automaton's peers.
	Members(m automaton.Members)
}

// Config describes the automaton whose outputs an Interp interprets.
type Config struct {
	// Self is the automaton's node: a Send to it breaks the contract.
	Self automaton.NodeID
	// Known, when set, tells whether a Send's destination is a node the
	// runtime knows; nil accepts every destination but Self (a live node
	// with dynamic membership leaves unknown peers to its transport).
	Known func(automaton.NodeID) bool
	// Flaw, when set, makes the interpreter deliberately wrong. Only tests
	// set it, to show that a check catches a wrong interpreter (flaw.go).
	Flaw Flaw
}

// held is an output waiting for the Persist numbered need.
type held struct {
	o    automaton.Output
	need uint64
}

// Interp interprets the outputs of one automaton, incarnation after
// incarnation (Crash starts the next).
type Interp struct {
	cfg Config
	// seq numbers the last Persist emitted (0: none); durable is the
	// number of the last durable one.
	seq, durable uint64
	// need is the requirement of the last output that was not an Early
	// Send: what an Early Send requires.
	need uint64
	// queue[head:] are the outputs held, oldest first.
	queue []held
	head  int
	// early: an Early Send was offered since the last TakeEarly.
	// tailEarly: an Early Send was offered after the last output that was
	// not one (EarlyExposed).
	early, tailEarly bool
	// failed: storage failed (Fail); nothing is released any more.
	failed bool
}

// New returns an interpreter for an automaton that has emitted nothing yet.
func New(cfg Config) *Interp { return &Interp{cfg: cfg} }

// Violation is an output that breaks the contract.
type Violation struct {
	Output automaton.Output
	Reason string
}

func (v *Violation) Error() string { return v.Reason }

func violation(o automaton.Output, format string, args ...any) *Violation {
	return &Violation{Output: o, Reason: fmt.Sprintf(format, args...)}
}

// Step interprets one step's outputs in order. It stops at the first
// output that breaks the contract and returns it (the outputs before it
// have been carried out, the ones after it are not looked at).
func (r *Interp) Step(outs []automaton.Output, rt Runtime) error {
	for _, o := range outs {
		if err := r.Output(o, rt); err != nil {
			return err
		}
	}
	return nil
}

// Output interprets one output. A *Violation is returned for an output
// that breaks the contract; nothing of it reaches the runtime.
func (r *Interp) Output(o automaton.Output, rt Runtime) error {
	switch o := o.(type) {
	case automaton.Persist:
		if o.Key == "" {
			return violation(o, "persisted a record with an empty key")
		}
		r.seq++
		rt.Persist(r.seq, o)
	case automaton.Send:
		if o.To == r.cfg.Self {
			return violation(o, "sent a message to itself (the contract forbids sends to self)")
		}
		if r.cfg.Known != nil && !r.cfg.Known(o.To) {
			return violation(o, "sent to unknown node %q", o.To)
		}
		if o.Early {
			r.early, r.tailEarly = true, true
			r.offer(o, r.need, rt)
			return nil
		}
		r.waitAll(o, rt)
	case automaton.Respond:
		if r.cfg.Flaw == FlawRespondUndurable {
			r.offer(o, r.durable, rt) // wrong: the answer waits only for what is durable already
			return nil
		}
		r.waitAll(o, rt)
	case automaton.Effect, automaton.Announce:
		r.waitAll(o, rt)
	case automaton.SetTimer:
		if o.After < 0 {
			return violation(o, "set timer %d with negative duration %v", o.ID, o.After)
		}
		rt.SetTimer(o)
	case automaton.CancelTimer:
		rt.CancelTimer(o.ID)
	case automaton.Members:
		rt.Members(o)
	case nil:
		return violation(o, "emitted a nil output")
	default:
		return violation(o, "emitted an unknown output %T", o)
	}
	return nil
}

// waitAll offers an output that waits for every Persist emitted before it.
func (r *Interp) waitAll(o automaton.Output, rt Runtime) {
	r.need, r.tailEarly = r.seq, false
	r.offer(o, r.seq, rt)
}

// offer releases o at once if nothing emitted before it waits and its
// requirement is durable, and otherwise holds it.
func (r *Interp) offer(o automaton.Output, need uint64, rt Runtime) {
	if r.head == len(r.queue) && need <= r.durable && !r.failed {
		rt.Release(o)
		return
	}
	r.queue = append(r.queue, held{o: o, need: need})
}

// Durable records that every Persist up to number d is durable, and
// releases, in emission order, the held outputs that require nothing later.
// After Fail it does nothing.
func (r *Interp) Durable(d uint64, rt Runtime) {
	r.Synced(d)
	r.ReleaseReady(rt)
}

// Synced records that every Persist up to number d is durable without
// releasing what waits for them: a runtime whose process cannot run now
// (the simulator's paused node, whose disk finishes its fsync) releases
// them later with ReleaseReady. Outputs offered meanwhile behind nothing
// held still leave at once when their records are durable.
func (r *Interp) Synced(d uint64) {
	if r.failed {
		return
	}
	if d > r.seq {
		panic(fmt.Sprintf("release: record %d reported durable, only %d emitted", d, r.seq))
	}
	r.durable = max(r.durable, d)
}

// ReleaseReady releases, in emission order, the held outputs whose records
// are durable.
func (r *Interp) ReleaseReady(rt Runtime) {
	if r.failed {
		return
	}
	for r.head < len(r.queue) && r.queue[r.head].need <= r.durable {
		o := r.queue[r.head].o
		r.queue[r.head] = held{}
		r.head++
		rt.Release(o)
	}
	switch {
	case r.head == len(r.queue):
		r.queue, r.head = r.queue[:0], 0
	case r.head >= 1024 && r.head > len(r.queue)/2:
		n := copy(r.queue, r.queue[r.head:])
		clear(r.queue[n:])
		r.queue, r.head = r.queue[:n], 0
	}
}

// Fail records that the runtime's storage failed: from now on nothing is
// released (a client must not see an answer, nor a peer a message, that
// depends on a record that may be lost). Only Crash leaves that state.
func (r *Interp) Fail() { r.failed = true }

// Failed reports whether Fail was called in this incarnation.
func (r *Interp) Failed() bool { return r.failed }

// Crash ends the incarnation: the held outputs are dropped (returned, in
// emission order) and numbering starts again from 1 for the next
// incarnation, whose durable records the runtime hands to Start.
func (r *Interp) Crash() []automaton.Output {
	var lost []automaton.Output
	for _, h := range r.queue[r.head:] {
		lost = append(lost, h.o)
	}
	*r = Interp{cfg: r.cfg}
	return lost
}

// Last is the number of the last Persist emitted (0: none).
func (r *Interp) Last() uint64 { return r.seq }

// DurableUpTo is the number of the last Persist reported durable.
func (r *Interp) DurableUpTo() uint64 { return r.durable }

// Unsynced reports whether some emitted Persist is not durable yet.
func (r *Interp) Unsynced() bool { return r.seq > r.durable }

// Waiting reports whether some output is held. Outside Synced and Fail, a
// record it needs is then not durable yet: a runtime that holds records
// back (lazy commit) must commit them now.
func (r *Interp) Waiting() bool { return r.head < len(r.queue) }

// Held is the number of outputs held.
func (r *Interp) Held() int { return len(r.queue) - r.head }

// Waiter is an output held and the number of the Persist it waits for.
type Waiter struct {
	Output automaton.Output
	Need   uint64
}

// Pending returns the outputs held, oldest first (for tests and traces).
func (r *Interp) Pending() []Waiter {
	out := make([]Waiter, 0, r.Held())
	for _, h := range r.queue[r.head:] {
		out = append(out, Waiter{h.o, h.need})
	}
	return out
}

// TakeEarly reports whether an Early Send was offered since the last call,
// and forgets it. A runtime that commits lazily commits the records of such
// a step at once: the Early Send began a round in parallel with their
// fsync, and the answers that will need them come back soon.
func (r *Interp) TakeEarly() bool {
	e := r.early
	r.early = false
	return e
}

// EarlyExposed reports what a crash between the release of an Early Send
// and the fsync of the records emitted after the last waiting output could
// lose while the Early Send is out: when an Early Send was offered after
// the last output that waits for every record before it, ok is true and
// the records numbered after last are exactly those (the model checker
// makes them its crash-before-fsync event, mc/unsynced.go).
func (r *Interp) EarlyExposed() (last uint64, ok bool) {
	return r.need, r.tailEarly && r.seq > r.need
}
