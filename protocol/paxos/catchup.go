package paxos

import (
	"github.com/synod-dev/synod/automaton"
)

// Catch-up: a replica that is behind fetches chosen ranges, or a snapshot
// (package doc, "Catch-up, snapshots, compaction").

func (a *Paxos) requestCatchup(from int, lo, hi uint64) {
	if from == a.self {
		return
	}
	if hi > a.behindTo {
		a.behindTo, a.behindPeer = hi, from
	}
	if a.catchupFrom >= 0 {
		return
	}
	a.catchupFrom, a.catchupTicks = from, 0
	a.send(from, &message{Kind: kindCatchupReq, From: lo, To: hi})
}

// onCatchupReq serves chosen instances from m.From, or a snapshot when they
// were truncated behind one.
func (a *Paxos) onCatchupReq(from int, m *message) {
	if m.From > a.chosenUpTo {
		return
	}
	if m.From < a.logStart || a.log[m.From] == nil {
		if a.executed >= m.From {
			a.send(from, &message{Kind: kindSnapshot, Index: a.executed, Data: a.sm.snapshot(a.executed)})
		}
		return
	}
	out := &message{Kind: kindCatchup, Commit: a.chosenUpTo}
	size := 0
	for i := m.From; i <= a.chosenUpTo && i <= m.To && len(out.Entries) < catchupMaxEntries && size < catchupBudget; i++ {
		s := a.log[i]
		if s == nil {
			break
		}
		out.Entries = append(out.Entries, entry{I: i, Value: s.val})
		size += len(s.val)
	}
	a.send(from, out)
}

func (a *Paxos) onCatchup(from int, m *message) {
	if from == a.catchupFrom {
		a.catchupFrom = -1
	}
	for _, e := range m.Entries {
		if e.I <= a.chosenUpTo {
			continue
		}
		if s := a.log[e.I]; s != nil && s.chosen {
			continue
		}
		s := &slot{val: e.Value, chosen: true}
		a.putSlot(e.I, s)
		a.persistSlot(e.I, s)
		a.observe(e.I, ByCatchup, e.Value)
	}
	a.advance(true)
	if m.Commit > a.chosenUpTo && len(m.Entries) > 0 {
		a.requestCatchup(from, a.chosenUpTo+1, m.Commit)
	}
	a.checkPhase1() // a candidate may have been waiting for these
}

// onSnapshot installs a snapshot newer than the executed state.
func (a *Paxos) onSnapshot(from int, m *message) {
	if from == a.catchupFrom {
		a.catchupFrom = -1
	}
	if idx, err := snapshotIndex(m.Data); err != nil || idx != m.Index || m.Index <= a.executed {
		return
	}
	confBefore := a.sm.conf
	idx, err := a.ownMachine().restore(m.Data)
	if err != nil {
		return // corrupt: ignored (restore replaces the state only on success)
	}
	a.persist(recSnapshot, m.Data)
	for i := a.logStart; i <= idx && i <= a.maxInst; i++ {
		if a.log[i] != nil {
			delete(a.log, i)
			a.Emit(automaton.Persist{Key: slotKey(i), Delete: true})
		}
	}
	a.logStart = idx + 1
	if a.maxInst < idx {
		a.maxInst = idx
	}
	a.executed, a.snapIndex = idx, idx
	a.sinceSnap, a.sinceBytes, a.snapLen = 0, 0, len(m.Data)
	if a.chosenUpTo < idx {
		a.chosenUpTo = idx
	}
	for i := range a.inflight {
		if i <= idx {
			delete(a.inflight, i)
		}
	}
	if a.role == leader && a.next <= idx {
		a.next = idx + 1
	}
	// Writes executed inside the snapshot are answered from the dedup table;
	// the rest wait (or are forwarded again).
	var done []automaton.RequestID
	for id, p := range a.pending {
		if _, ok := a.sm.lookup(id); ok && !a.isRead(p.req) {
			done = append(done, id)
		} else if i, ok := a.inLog[id]; ok && i <= idx {
			delete(a.inLog, id)
			if p.state == pProposed {
				p.state = pWaiting
				a.lead(p)
			}
		}
	}
	automaton.SortRequestIDs(done)
	for _, id := range done {
		r, _ := a.sm.lookup(id)
		a.answer(id, r)
	}
	if a.sm.conf != confBefore {
		a.onConfChange(idx)
	}
	a.advance(true)
	a.checkPhase1()
}
