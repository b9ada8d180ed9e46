package mc

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/release"
)

// Crashes before an fsync (Config.CrashBeforeFsync). mc makes a step's
// Persists durable at the end of the step (doc.go), which is what the
// runtimes guarantee for every output that waits for them. A Send marked
// Early waits only for what the last output before it that is not Early
// waits for (automaton.Send.Early), so the runtime may release it before
// the step's fsync, and a crash may then fall between the two: the
// records persisted after the step's last waiting output (before or after
// the Early Send) are lost while the Early message is out. With
// CrashBeforeFsync such a crash is an event (EvCrashUnsynced, counted by
// Crashes) of a node whose last step released an Early Send and left
// such records, enabled until the node
// steps again (its next step starts after the fsync: a bound of the model,
// which a runtime with slow fsyncs may exceed). Steps without an Early
// Send gain nothing: losing records that no output
// revealed is a crash before the step.

// unsyncedRec undoes one Persist: the record's value before it.
type unsyncedRec struct {
	key string
	old []byte
	had bool
}

// unsyncedAt is a record's undo and its number in the step.
type unsyncedAt struct {
	seq uint64
	rec unsyncedRec
}

// noteUnsynced records, after node i's step, which of its Persists a crash
// before the fsync would lose while an Early Send is out: the interpreter
// r that interpreted the step says which (release.Interp.EarlyExposed);
// undo holds every record of the step with its value before it.
func (w *world) noteUnsynced(i int, r *release.Interp, undo []unsyncedAt) {
	n := &w.nodes[i]
	n.unsynced = nil
	if !w.cfg.CrashBeforeFsync {
		return
	}
	last, ok := r.EarlyExposed()
	if !ok {
		return
	}
	var pend []unsyncedRec
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
		x := diskEntryHash(r.key, r.old)
		if r.had {
			x++
		}
		h += mix(x + uint64(k+1))
	}
	return h
}
