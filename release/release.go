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
// emission order serves every output but positioned answers (below): an
// output leaves as soon as its requirement is durable and every output
// emitted before it in that queue has left (Runtime.Release). Nothing leaves after Fail (a failed commit: nobody
// knows what is on disk), and a crash (Crash) drops what is held.
//
// # Positioned answers
//
// A Respond with UpTo > 0 (automaton.Respond) is a positioned answer: its
// requirement is the last Persist emitted before it whose Pos is in
// [1, UpTo] (0 if none: it waits for nothing), not the last Persist
// emitted before it. Records being durable in emission order, it still
// waits for every record emitted before that one; what it may skip are
// the records emitted after the last of its positioned records: records
// of later positions (a Multi-Paxos leader's acceptances of later
// instances) and records without a position. It is held apart from the
// emission-order queue and leaves as soon as its requirement is durable,
// overtaking held outputs emitted before it (nothing in the contract
// orders releases beyond durability: messages may be reordered anyway,
// and answers go to different clients). For an Early Send emitted after
// it, it counts as an output that waits for every record before it, so
// the Early rule, and every argument resting on it, is unchanged.
//
// Why this is the rule and not another (etcd-io/raft, for comparison):
// with AsyncStorageWrites a raft leader's own log append becomes a
// message to its storage thread, and the entries count toward the
// commit index only when that thread answers MsgStorageAppendResp after
// the fsync: the leader's vote counts once durable, and the application of
// committed entries (and so the answer to a client) waits only for the
// commit index, not for later entries' fsyncs. The synchronous Ready loop
// instead persists everything in a Ready (MustSync) before the messages of
// that Ready leave and before the next Ready's committed entries are
// applied. Synod's contract counts a Multi-Paxos leader's vote at once
// (its Accept is Early) and makes every output that rests on it wait for
// it, which is the synchronous discipline; the positioned answer keeps
// that (the answer still waits for the leader's acceptances up to its
// instance) and drops only the wait for later positions, which is what
// raft's asynchronous writes gain for the answer, without turning the
// runtime's durability report into an input of the automaton. The
// protocol states what an answer rests on; the interpreter, shared by
// every runtime, enforces it.
//
// # Relayed answers
//
// A Respond with Relayed set (automaton.Respond) relays another node's
// answer: its requirement is 0 (it rests on no record of this node), so
// it leaves at once, held apart like a positioned answer and overtaking
// held outputs emitted before it; for an Early Send emitted after it, it
// counts as an output that waits for every record before it. Multi-Paxos's
// follower answering with its leader's ForwardReply is the case: the
// leader sent it under the full rule, after the instance was chosen by
// durable acceptances, and the follower's own acceptance record of that
// instance, still syncing, is not needed for it (issue 28: one client's
// put through a follower waited for that sync).
//
// A Send with Relayed set (automaton.Send) is held the same way: it relays
// what another party gave this node (Multi-Paxos's follower forwarding its
// client's request to the leader) and rests on no record of this node.
//
// # Unpinned positions
//
// An Unpin output (automaton.Unpin) with Pos p says this node's records
// positioned at p are no longer needed by its positioned answers at p: a
// positioned answer with UpTo == p, held now or emitted later, requires
// only the last Persist emitted before it whose Pos is in [1, p-1] (or
// what it required already, if that is less), and leaves as soon as that
// is durable. Nothing else changes: answers at other positions, and the
// Early rule (an Early Send emitted after such an answer still waits for
// every record before the answer). Multi-Paxos's leader emits it once a
// majority of acceptors other than itself durably accepted instance p, so
// its answer leaves on whichever quorum is durable first: its own vote
// with one follower's, or two followers' without its own (protocol/paxos,
// package doc, "The leader's own acceptance against the followers'"). The
// interpreter remembers the last few positions unpinned (an answer emitted
// after them is positioned at one of them only when its instance executed
// late); forgetting one only makes an answer wait for what it waited for
// before.
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
	"cmp"
	"fmt"
	"slices"

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

// held is an output waiting for the Persist numbered need; at numbers the
// outputs held in emission order.
type held struct {
	o    automaton.Output
	need uint64
	at   uint64
}

// posSeq is a positioned record: its position and its number.
type posSeq struct{ pos, seq uint64 }

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
	// queue[head:] are the outputs held, oldest first, but for the
	// positioned answers held, which are in loose (emission order).
	queue []held
	head  int
	loose []held
	// at numbers the outputs offered (held.at).
	at uint64
	// pos is the frontier of positioned records (Persist.Pos): increasing
	// in both position and number, a record dropped once a later one has
	// a position no higher; posFloor bounds the number of the records
	// dropped from its front once durable (needUpTo).
	pos      []posSeq
	posFloor uint64
	// offered is the highest requirement of an output offered in the
	// emission-order queue, offeredLoose of a positioned or relayed answer
	// released (Exposed: the answers still held count at their current
	// requirement, which an Unpin may have lowered).
	offered, offeredLoose uint64
	// unpinned holds the last positions unpinned (Unpin), oldest first, at
	// most maxUnpinned.
	unpinned []uint64
	// early: an Early Send was offered since the last TakeEarly.
	// tailLoose: an Early Send or a positioned answer was offered after
	// the last output that waits for every record before it (Exposed).
	early, tailLoose bool
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
	// v is o's value; o (the interface the automaton boxed) is what is
	// passed on, so that no output is boxed again.
	switch v := o.(type) {
	case automaton.Persist:
		if v.Key == "" {
			return violation(o, "persisted a record with an empty key")
		}
		r.seq++
		if v.Pos > 0 {
			r.notePos(v.Pos, r.seq)
		}
		rt.Persist(r.seq, v)
	case automaton.Send:
		if v.To == r.cfg.Self {
			return violation(o, "sent a message to itself (the contract forbids sends to self)")
		}
		if r.cfg.Known != nil && !r.cfg.Known(v.To) {
			return violation(o, "sent to unknown node %q", v.To)
		}
		if v.Relayed {
			// Rests on no record of this node: as a relayed answer.
			r.need, r.tailLoose = r.seq, true
			r.offerLoose(o, 0, rt)
			return nil
		}
		if v.Early {
			r.early, r.tailLoose = true, true
			r.offer(o, r.need, rt)
			return nil
		}
		r.waitAll(o, rt)
	case automaton.Respond:
		if r.cfg.Flaw == FlawRespondUndurable {
			r.offer(o, r.durable, rt) // wrong: the answer waits only for what is durable already
			return nil
		}
		if v.UpTo > 0 || v.Relayed {
			// A positioned or relayed answer: an Early Send after it waits
			// for every record before it, as after any waiting output.
			need := uint64(0) // relayed: no record of this node
			if !v.Relayed {
				need = r.needUpTo(v.UpTo)
				if len(r.unpinned) > 0 && slices.Contains(r.unpinned, v.UpTo) {
					need = min(need, r.needUpTo(v.UpTo-1))
				}
			}
			r.need, r.tailLoose = r.seq, true
			r.offerLoose(o, need, rt)
			return nil
		}
		r.waitAll(o, rt)
	case automaton.Effect, automaton.Announce:
		r.waitAll(o, rt)
	case automaton.Unpin:
		r.unpin(v.Pos, rt)
	case automaton.SetTimer:
		if v.After < 0 {
			return violation(o, "set timer %d with negative duration %v", v.ID, v.After)
		}
		rt.SetTimer(v)
	case automaton.CancelTimer:
		rt.CancelTimer(v.ID)
	case automaton.Members:
		rt.Members(v)
	case nil:
		return violation(o, "emitted a nil output")
	default:
		return violation(o, "emitted an unknown output %T", o)
	}
	return nil
}

// waitAll offers an output that waits for every Persist emitted before it.
func (r *Interp) waitAll(o automaton.Output, rt Runtime) {
	r.need, r.tailLoose = r.seq, false
	r.offer(o, r.seq, rt)
}

// offer releases o at once if nothing emitted before it waits and its
// requirement is durable, and otherwise holds it.
func (r *Interp) offer(o automaton.Output, need uint64, rt Runtime) {
	r.at++
	r.offered = max(r.offered, need)
	if r.head == len(r.queue) && need <= r.durable && !r.failed {
		rt.Release(o)
		return
	}
	r.queue = append(r.queue, held{o: o, need: need, at: r.at})
}

// offerLoose releases a positioned answer at once if its requirement is
// durable, whatever waits before it, and otherwise holds it apart.
func (r *Interp) offerLoose(o automaton.Output, need uint64, rt Runtime) {
	r.at++
	if need <= r.durable && !r.failed {
		r.offeredLoose = max(r.offeredLoose, need)
		rt.Release(o)
		return
	}
	r.loose = append(r.loose, held{o: o, need: need, at: r.at})
}

// maxUnpinned bounds the positions unpinned that the interpreter
// remembers for answers emitted after their Unpin.
const maxUnpinned = 8

// unpin applies an Unpin of position p: the positioned answers at p held
// now wait only for the positioned records up to p-1 (if that is less),
// and leave if those are durable; p is remembered for answers at p
// emitted later.
func (r *Interp) unpin(p uint64, rt Runtime) {
	if p == 0 {
		return
	}
	if len(r.unpinned) == maxUnpinned {
		r.unpinned = append(r.unpinned[:0], r.unpinned[1:]...)
	}
	r.unpinned = append(r.unpinned, p)
	if len(r.loose) == 0 {
		return
	}
	need := r.needUpTo(p - 1)
	for k := range r.loose {
		h := &r.loose[k]
		if a, ok := h.o.(automaton.Respond); ok && a.UpTo == p && !a.Relayed && need < h.need {
			h.need = need
		}
	}
	if !r.failed {
		r.releaseLoose(rt)
	}
}

// releaseLoose releases, in emission order, the positioned and relayed
// answers held whose requirement is durable.
func (r *Interp) releaseLoose(rt Runtime) {
	k := 0
	for _, h := range r.loose {
		if h.need <= r.durable {
			r.offeredLoose = max(r.offeredLoose, h.need)
			rt.Release(h.o)
			continue
		}
		r.loose[k] = h
		k++
	}
	clear(r.loose[k:])
	r.loose = r.loose[:k]
}

// notePos adds the positioned record seq at position p to the frontier:
// the records it supersedes (a position at least p, so every answer that
// would wait for them waits for it) leave it.
func (r *Interp) notePos(p, seq uint64) {
	k := len(r.pos)
	for k > 0 && r.pos[k-1].pos >= p {
		k--
	}
	r.pos = append(r.pos[:k], posSeq{p, seq})
}

// needUpTo is the requirement of a positioned answer with UpTo u: the
// number of the last positioned record emitted with a position in [1, u]
// (0: none). Records dropped from the front of the frontier once durable
// count as posFloor (durable, so the answer's release is the same).
func (r *Interp) needUpTo(u uint64) uint64 {
	lo, hi := 0, len(r.pos) // the first entry with a position above u
	for lo < hi {
		m := (lo + hi) / 2
		if r.pos[m].pos <= u {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return min(r.posFloor, r.seq)
	}
	return r.pos[lo-1].seq
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
		h := r.queue[r.head]
		r.queue[r.head] = held{}
		r.head++
		rt.Release(h.o)
	}
	if len(r.loose) > 0 {
		r.releaseLoose(rt)
	}
	if len(r.pos) >= 1024 && r.pos[len(r.pos)/2].seq <= r.durable {
		// Bound the frontier: its durable front half answers as posFloor.
		n := len(r.pos) / 2
		r.posFloor = max(r.posFloor, r.pos[n-1].seq)
		r.pos = append(r.pos[:0], r.pos[n:]...)
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
	for _, h := range r.held() {
		lost = append(lost, h.o)
	}
	*r = Interp{cfg: r.cfg}
	return lost
}

// held returns the outputs held in emission order.
func (r *Interp) held() []held {
	hs := append([]held(nil), r.queue[r.head:]...)
	if len(r.loose) > 0 {
		hs = append(hs, r.loose...)
		slices.SortFunc(hs, func(a, b held) int { return cmp.Compare(a.at, b.at) })
	}
	return hs
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
func (r *Interp) Waiting() bool { return r.head < len(r.queue) || len(r.loose) > 0 }

// Held is the number of outputs held.
func (r *Interp) Held() int { return len(r.queue) - r.head + len(r.loose) }

// Waiter is an output held and the number of the Persist it waits for.
type Waiter struct {
	Output automaton.Output
	Need   uint64
}

// Pending returns the outputs held, oldest first (for tests and traces).
func (r *Interp) Pending() []Waiter {
	out := make([]Waiter, 0, r.Held())
	for _, h := range r.held() {
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

// Exposed reports what a crash between the release of an output that does
// not wait for every record before it (an Early Send, a positioned answer)
// and the fsync of the records it does not wait for could lose while that
// output is out: when such an output was offered after the last output
// that waits for every record before it, ok is true, last is the highest
// requirement of the outputs offered (a positioned answer's as an Unpin
// left it), and the records numbered after last are exactly those (the
// model checker makes them its crash-before-fsync event, mc/unsynced.go).
func (r *Interp) Exposed() (last uint64, ok bool) {
	last = max(r.offered, r.offeredLoose)
	for _, h := range r.loose {
		last = max(last, h.need)
	}
	return last, r.tailLoose && r.seq > last
}
