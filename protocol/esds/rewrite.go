package esds

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// The paced rewrite of record "s" (issue 28, session 51; package doc,
// "The stable state without its snapshot"). On a large state's delta
// path (collectEveryTick) the collection that rewrites "s" encoded the
// whole snapshot in its step: 10,000 keys of 100 bytes, a 1.3 MB record,
// 8-15 ms of one step in process (~7 ms live), in which this replica
// answered nothing: the longest ESDS step at 64 clients. Now, for a KV
// state, that collection takes a copy of the stable state (KVState.Clone:
// a copy of the key map, values shared) and writes "g" as on the delta
// path; each later tick encodes about snapChunk bytes of the copy's
// snapshot (service.SnapshotWriter); the tick that encodes the last part
// writes "s" (the copy's snapshot, and the stable-state fields as they
// were when the copy was taken), then "g" (the fields as they are now),
// in one step, and only then are the kept records the new snapshot holds
// (labels at most the copy's) queued for deletion (dropStale, from the
// next tick on); the ones collected later stay kept for "g". Until that
// step the old "s", "g" and every kept record stand as before, so a
// crash at any point restores the same stable state (store.go restore:
// "s"'s snapshot, then the kept operations above its label up to "g"'s).
// The ESDS thesis §6.1 is silent on how the stable state is kept.
// Other services (small states) rewrite "s" in one step as before.

// rewrite is a rewrite of "s" under way.
type rewrite struct {
	w *service.SnapshotWriter // over a copy of the stable state
	// base: the label of the last operation in the copy (stableMax when
	// it was taken); fields: "s"'s fields after the snapshot as they were
	// then (encodeStableFields).
	base   Label
	fields []byte
	// idx: how many records were kept (uncompacted) when the copy was
	// taken; they were all collected before it.
	idx int
}

// recHead is the room a paced snapshot is encoded after: record "s"'s
// header (stableHeader.Record, one byte) and the snapshot's length (a
// uvarint, at most 10 bytes).
const recHead = 11

// keptRec is a record kept for "g" (uncompacted): its key and its
// operation's label, which decides whether a new "s" holds it.
type keptRec struct {
	key   string
	label Label
}

// snapChunk is about the snapshot bytes a tick encodes (a variable for
// the tests that pace small states).
var snapChunk = 64 << 10

// brokenPacedKeep (tests only, TestBrokenPacedKeepCaught): 1 drops,
// at the end of a paced rewrite, every kept record, also those collected
// after the copy was taken, which the new "s" does not hold.
var brokenPacedKeep int

// startRewrite starts a paced rewrite of "s" when the stable state is a
// KV, and reports whether it did.
func (a *ESDS) startRewrite() bool {
	kv, ok := a.stable.(*service.KVState)
	if !ok {
		return false
	}
	view := kv.Clone().(*service.KVState)
	// The snapshot is encoded after room for the record's header and its
	// length (rewriteStep): record "s" is then the writer's buffer, not
	// a 1.3 MB copy of it.
	rw := &rewrite{w: view.SnapshotWriter(&a.stableOrder, make([]byte, recHead)), base: a.stableMax, idx: len(a.uncompacted)}
	var e wire.Encoder
	a.encodeStableFields(&e)
	rw.fields = e.B
	a.rw = rw
	deltaUse.pacedStarts.Add(1)
	return true
}

// rewriteStep encodes the next part of the rewrite's snapshot and, when
// it is complete, writes "s" and "g" and queues the deletes of the kept
// records the new "s" holds.
func (a *ESDS) rewriteStep() {
	rw := a.rw
	if !rw.w.Next(snapChunk) {
		deltaUse.pacedParts.Add(1)
		return
	}
	buf := rw.w.Bytes()
	snap := buf[recHead:]
	a.snapLen = len(snap)
	// Record "s" as marshalStable writes it: the header and the
	// snapshot's length, right before the snapshot, then the fields.
	h := stableHeader.Record(recHead)
	h.Uvarint(uint64(len(snap)))
	start := recHead - len(h.B)
	copy(buf[start:], h.B)
	e := wire.Encoder{B: append(buf[start:], rw.fields...)}
	a.encodeGone(&e, true)
	a.persists = append(a.persists,
		automaton.Persist{Key: recStable, Value: e.B},
		automaton.Persist{Key: recStableDelta, Value: a.marshalStable(false)})
	a.deltaWritten = true
	// The records kept when the copy was taken were collected before it:
	// "s" holds them (labels at most base), and they go to the stale
	// queue whole, as one segment. Of those collected since, the ones
	// labelled at most base were applied before the copy: "s" holds them
	// too; the others stay kept for "g".
	old, since := a.uncompacted[:rw.idx:rw.idx], a.uncompacted[rw.idx:]
	if brokenPacedKeep == 1 {
		old, since = a.uncompacted, nil
	}
	var keep, drop []keptRec
	for _, k := range since {
		if !rw.base.Set || rw.base.Less(k.label) {
			keep = append(keep, k) // collected after the copy: not in "s"
		} else {
			drop = append(drop, k)
		}
	}
	a.queueStale(old)
	a.queueStale(drop)
	a.uncompacted = keep
	a.rw = nil
	deltaUse.pacedEnds.Add(1)
}
