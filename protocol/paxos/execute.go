package paxos

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
)

// Learning and execution: the chosen prefix is executed in instance order,
// and snapshots bound the log (package doc, "Phase 2, commit and execution",
// "Catch-up, snapshots, compaction").

// advance extends the chosen prefix, persists it, executes it in instance
// order, answers waiting requests, and snapshots every snapshot_every
// executed instances.
func (a *Paxos) advance(persist bool) {
	for {
		s := a.log[a.chosenUpTo+1]
		if s == nil || !s.chosen {
			break
		}
		a.chosenUpTo++
	}
	for a.executed < a.chosenUpTo {
		i := a.executed + 1
		s := a.log[i]
		cmds := s.cmds
		if cmds == nil {
			var err error
			if cmds, err = decodeBatch(s.val); err != nil {
				panic(fmt.Sprintf("paxos: instance %d holds a corrupt value: %v", i, err))
			}
		}
		s.cmds = nil // executed once; the slot stays for catch-up
		before := a.sm.conf
		a.answerAt = i
		for _, c := range cmds {
			res, done := a.ownMachine().apply(c, i)
			if !done {
				continue // paxos-broken-splitgroup: more parts to come
			}
			delete(a.inLog, c.ID)
			if p := a.pending[c.ID]; p != nil && p.state != pRead && !a.holdRemoval(p, res, i) {
				a.answer(c.ID, res)
			}
		}
		a.answerAt = 0
		a.executed = i
		a.sinceSnap += len(cmds)
		if a.sm.conf != before {
			a.onConfChange(i)
		}
	}
	// The chosen-prefix record is persisted after the answers above: they
	// depend only on the instances being chosen, which a majority's durable
	// acceptances already guarantee; "c" only spares a restarted replica
	// from learning the prefix again (package doc, "Durability").
	if persist && a.chosenUpTo > a.savedC {
		a.savedC = a.chosenUpTo
		a.persist(recCommit, encodeUint(a.chosenUpTo))
	}
	if persist && a.executed > a.snapIndex && a.sinceSnap >= a.prm.SnapshotEvery {
		a.takeSnapshot()
	}
	if a.role == leader {
		a.serveReads()
	}
}

// takeSnapshot persists the state machine at the executed instance and
// truncates the log (in memory and on disk) behind the previous snapshot, so
// that peers slightly behind can still catch up from the log.
func (a *Paxos) takeSnapshot() {
	prev := a.snapIndex
	a.persist(recSnapshot, a.sm.snapshot(a.executed))
	a.snapIndex = a.executed
	a.sinceSnap = 0
	for i := a.logStart; i <= prev && i <= a.maxInst; i++ {
		if a.log[i] != nil {
			delete(a.log, i)
			a.Emit(automaton.Persist{Key: slotKey(i), Delete: true})
		}
	}
	if prev+1 > a.logStart {
		a.logStart = prev + 1
	}
}
