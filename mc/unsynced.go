package mc

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/release"
)

// Crashes before an fsync (Config.CrashBeforeFsync). mc makes a step's
// Persists durable at the end of the step (doc.go), which is what the
// runtimes guarantee for every output that waits for them. Two outputs
// wait for less (package release): a Send marked Early waits only for what
// the last output before it that is not Early waits for
// (automaton.Send.Early), and a positioned answer (automaton.Respond.UpTo)
// only for the positioned records up to its position. A runtime may
// release either before the fsync of the records it does not wait for,
// and a crash may then fall between the two: those records are lost while
// the output is out. With CrashBeforeFsync such a crash is an event
// (EvCrashUnsynced, counted by Crashes) of a node that released such an
// output and left such records.
//
// The window spans steps: a record stays exposed, step after step, until
// an output that waits for it is offered (the interpreter's requirement
// numbers say which: release.Interp.Exposed), as on a runtime whose fsync
// has not come back yet. So a positioned answer that skips records of
// earlier steps (a leader's acceptance of a later instance) exposes them,
// and a broken answer that skips the leader's own acceptance of its
// instance, persisted in the step that proposed it, is explored
// (paxos-broken-answerearly, protocol/paxos AnswerEarlyModel). Each step
// starts its interpreter with the records still exposed, renumbered 1..k
// in emission order (carryUnsynced), so that requirements and exposure
// count them. Losing records that no such output revealed gains nothing
// (it is a crash before they were written): a node with nothing exposed
// whose step offers none of these outputs exposes nothing.

// unsyncedRec undoes one Persist: the record's value before it.
type unsyncedRec struct {
	key string
	pos uint64 // the record's Persist.Pos
	old []byte
	had bool
}

// unsyncedAt is a record's undo and its number in the step.
type unsyncedAt struct {
	seq uint64
	rec unsyncedRec
}

// carryUnsynced hands node i's step interpreter r the records still
// exposed from its earlier steps, numbered 1..k (they are on the node's
// disk already; r only numbers them), and returns k.
func (w *world) carryUnsynced(i int, r *release.Interp) uint64 {
	n := &w.nodes[i]
	if !w.cfg.CrashBeforeFsync || len(n.unsynced) == 0 {
		return 0
	}
	var none noRuntime
	for _, u := range n.unsynced {
		_ = r.Output(automaton.Persist{Key: u.key, Pos: u.pos}, none)
	}
	r.Durable(r.Last(), none)
	return r.Last()
}

// noRuntime does nothing: carryUnsynced's records are written already.
type noRuntime struct{}

func (noRuntime) Persist(uint64, automaton.Persist) {}
func (noRuntime) Release(automaton.Output)          {}
func (noRuntime) SetTimer(automaton.SetTimer)       {}
func (noRuntime) CancelTimer(automaton.TimerID)     {}
func (noRuntime) Members(automaton.Members)         {}

// noteUnsynced records, after node i's step, which of its Persists a crash
// before the fsync would lose while an output that does not wait for them
// is out: the interpreter r that interpreted the step says which
// (release.Interp.Exposed), counting the carried records still exposed
// from earlier steps (numbered 1..carried); undo holds every record of the
// step with its value before it.
func (w *world) noteUnsynced(i int, r *release.Interp, carried uint64, undo []unsyncedAt) {
	n := &w.nodes[i]
	prev := n.unsynced
	n.unsynced = nil
	if !w.cfg.CrashBeforeFsync {
		return
	}
	last, ok := r.Exposed()
	if !ok && carried == 0 {
		return
	}
	var pend []unsyncedRec
	for k, u := range prev {
		if uint64(k+1) > last {
			pend = append(pend, u)
		}
	}
	for _, u := range undo {
		if u.seq > last {
			pend = append(pend, u.rec)
		}
	}
	n.unsynced = pend
}

// loseUnsynced undoes the unsynced Persists, last first.
func (n *nodeState) loseUnsynced() {
	for k := len(n.unsynced) - 1; k >= 0; k-- {
		r := n.unsynced[k]
		n.persist(automaton.Persist{Key: r.key, Value: r.old, Delete: !r.had})
	}
}

// unsyncedHash hashes what a crash before the fsync would undo (0: none).
func unsyncedHash(u []unsyncedRec) uint64 {
	var h uint64
	for k, r := range u {
		x := diskEntryHash(r.key, r.old) + r.pos*0x9e3779b97f4a7c15
		if r.had {
			x++
		}
		h += mix(x + uint64(k+1))
	}
	return h
}
