package pbpaxos

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
)

// Catch-up: a replica that learns of chosen instances it cannot apply (it
// missed their accepts, or restarted behind) asks the leader for its
// applied state and installs it (the whole replicated state, duplicate
// table included; the Grid Services thesis VI.A.2 keeps only the latest state, so that is
// what a lagging replica gets).

func (a *PBPaxos) requestCatchup(from automaton.NodeID) {
	if from == "" || from == a.cfg.Self {
		return
	}
	a.catchupAge = 4
	a.send(from, &message{Kind: kindCatchupReq, Commit: a.applied})
}

func (a *PBPaxos) onCatchupReq(from automaton.NodeID, m *message) {
	if a.applied <= m.Commit {
		return
	}
	a.send(from, &message{Kind: kindSnapshot, Commit: a.applied, StatePN: a.appliedPN, State: a.sm.snapshot()})
}

// onSnapshot installs a peer's applied state when it is ahead of this one.
func (a *PBPaxos) onSnapshot(from automaton.NodeID, m *message) {
	if m.Commit <= a.applied || a.role == leader {
		return
	}
	if err := a.sm.restore(m.State); err != nil {
		return // corrupt: ask again later
	}
	a.catchupAge = 0
	a.applied, a.appliedPN = m.Commit, m.StatePN
	a.chosenTo = max(a.chosenTo, m.Commit)
	a.justApplied = append(a.justApplied, appliedRec{i: m.Commit})
	a.persist(recSnapshot, encodeSnapRec(a.applied, a.appliedPN, m.State))
	a.snapAt = a.applied
	a.dropLog(a.applied)
	var done []automaton.RequestID // answered in id order: map order would make runs differ
	for id, p := range a.pending {
		if p.state == pWaiting && !p.req.Fanout {
			if _, ok := a.sm.lookup(id); ok {
				done = append(done, id)
			}
		}
	}
	automaton.SortRequestIDs(done)
	for _, id := range done {
		d, _ := a.sm.lookup(id)
		a.answer(id, d.res, d.results)
	}
	a.advance()
}

// OnStart rebuilds the replica from its records: the promise, the
// snapshot, the accepted entries and the applied prefix, which it applies
// again.
func (a *PBPaxos) OnStart(s automaton.Start) {
	a.reset()
	if v, ok := s.Records[recPromised]; ok {
		b, err := decodeBallotRec(v)
		if err != nil {
			panic(fmt.Sprintf("pbpaxos: corrupt record %q: %v", recPromised, err))
		}
		a.promised = b
	}
	if v, ok := s.Records[recSnapshot]; ok {
		i, p, st, err := decodeSnapRec(v)
		if err == nil {
			err = a.sm.restore(st)
		}
		if err != nil {
			panic(fmt.Sprintf("pbpaxos: corrupt snapshot record: %v", err))
		}
		a.applied, a.appliedPN, a.snapAt, a.chosenTo = i, p, i, i
		a.accBal = p.Bal
	}
	var commit uint64
	if v, ok := s.Records[recCommit]; ok {
		c, err := decodeUintRec(v)
		if err != nil {
			panic(fmt.Sprintf("pbpaxos: corrupt record %q: %v", recCommit, err))
		}
		commit = c
	}
	for k, v := range s.Records {
		if len(k) != len(recSlotPfx)+16 || k[:len(recSlotPfx)] != recSlotPfx {
			continue
		}
		var i uint64
		if _, err := fmt.Sscanf(k[len(recSlotPfx):], "%x", &i); err != nil {
			panic(fmt.Sprintf("pbpaxos: bad record key %q", k))
		}
		if i <= a.snapAt {
			a.Emit(automaton.Persist{Key: k, Delete: true})
			continue
		}
		sl, err := decodeSlotRec(v)
		if err != nil {
			panic(fmt.Sprintf("pbpaxos: corrupt record %q: %v", k, err))
		}
		sl.chosen = i <= commit
		a.putSlot(i, sl)
		a.accBal = maxBallot(a.accBal, sl.bal)
	}
	a.savedC = commit
	a.chosenTo = max(a.chosenTo, commit)
	a.maxRound = a.promised.Round
	a.advance()
	if len(s.Records) > 0 {
		// It may have promised a leader before the crash: honour it for
		// one election timeout.
		a.leaderAlive = true
		a.Emit(automaton.SetTimer{ID: tmAlive, After: a.prm.electionTimeout})
	}
	a.armElection()
	a.Emit(automaton.SetTimer{ID: tmTick, After: a.prm.heartbeat})
}
