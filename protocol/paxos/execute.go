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
// executed commands or snapshot_bytes of executed instances.
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
		a.sinceBytes += len(s.val)
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
	if persist && a.executed > a.snapIndex && (a.sinceSnap >= a.prm.SnapshotEvery || a.sinceBytes >= max(a.prm.SnapshotBytes, snapshotBytesFactor*a.snapLen)) {
		a.takeSnapshot()
	}
	if a.role == leader {
		a.serveReads()
	}
}

// snapshotBytesFactor bounds the snapshots taken by the byte rule
// (snapshot_bytes): at least this many bytes of instances are executed
// between two, so that writing snapshots costs at most a quarter of the
// log's bytes, whatever the state's size.
//
// Why a byte rule (branch pxs49, session 49): snapshot_every counts
// commands, and a pipelined client's batch is one command (redis-benchmark
// -P 16: 16 SETs, ~2.1 KB), so the log between two snapshots of a tiny
// state held ~20000 x 2.1 KB and the WAL's live set was ~40-50 MB per node
// for one key: every WAL compaction rewrote that much (all three nodes
// every 8-25 s on one disk). With the byte rule the log stays within
// about 2 x 8 MiB there (compactions of 10-16 MB). Commands of one small
// write each never reach it before snapshot_every (20000 x ~200 bytes).
const snapshotBytesFactor = 4

// takeSnapshot persists the state machine at the executed instance and
// truncates the log (in memory and on disk) behind the previous snapshot, so
// that peers slightly behind can still catch up from the log.
func (a *Paxos) takeSnapshot() {
	prev := a.snapIndex
	snap := a.sm.snapshot(a.executed)
	a.persist(recSnapshot, snap)
	a.snapIndex = a.executed
	a.sinceSnap, a.sinceBytes, a.snapLen = 0, 0, len(snap)
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
