package mc

import "github.com/synod-dev/synod/automaton"

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

// noteUnsynced records, before node i applies outs, which of their
// Persists a crash before the fsync would lose.
func (w *world) noteUnsynced(i int, outs []automaton.Output) {
	n := &w.nodes[i]
	n.unsynced = nil
	if !w.cfg.CrashBeforeFsync {
		return
	}
	var pend []unsyncedRec
	early := false
	seen := map[string]unsyncedRec{} // a key persisted twice undoes to its first value
	for _, o := range outs {
		switch o := o.(type) {
		case automaton.Persist:
			r, ok := seen[o.Key]
			if !ok {
				r.old, r.had = n.disk[o.Key]
			}
			pend = append(pend, unsyncedRec{key: o.Key, old: r.old, had: r.had})
			seen[o.Key] = unsyncedRec{key: o.Key, old: o.Value, had: !o.Delete}
		case automaton.Send:
			if !o.Early {
				pend, early = nil, false
			} else {
				early = true
			}
		case automaton.Respond, automaton.Effect:
			pend, early = nil, false
		}
	}
	if early && len(pend) > 0 {
		n.unsynced = pend
	}
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
