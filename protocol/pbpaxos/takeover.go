package pbpaxos

import (
	"sort"

	"github.com/synod-dev/synod/automaton"
)

// Leader takeover (the Grid Services thesis VI.A.2, the worked example, and VI.B Protocol
// 1, "New leader"): one Prepare for every gap and every instance past the
// highest known one; replies carry OK, or (request, proposal number) for a
// gap, or (requests, proposal numbers, latest state) past it; one batched
// Accept; no new request executed or answered until both phases complete.

// startTakeover makes this node a candidate with a fresh ballot and sends
// one Prepare for the gaps below its applied instance and for everything
// after it ("the prepare phase of instances 88, 89, and of all instances
// greater than 90 ... a single message").
func (a *PBPaxos) startTakeover() {
	r := max(a.maxRound, a.promised.Round)
	a.ballot = Ballot{Round: r + 1, Node: a.selfNum}
	a.maxRound = a.ballot.Round
	a.role = candidate
	a.clearLeader()
	a.p1Ticks = 0
	a.promises = map[automaton.NodeID]*message{}
	a.promised = a.ballot
	a.persist(recPromised, encodeBallotRec(a.promised))
	a.promises[a.cfg.Self] = a.promiseFor(a.applied, a.gapList())
	a.sendPrepares()
	a.checkTakeover()
}

// gapList: the instances this node applied without knowing their requests.
func (a *PBPaxos) gapList() []uint64 {
	out := make([]uint64, 0, len(a.gaps))
	for g := range a.gaps {
		if g > a.snapAt {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (a *PBPaxos) sendPrepares() {
	m := &message{Kind: kindPrepare, Ballot: a.ballot, After: a.promises[a.cfg.Self].Commit, Gaps: a.gapList()}
	var b []byte
	for _, n := range a.cfg.Nodes {
		if n == a.cfg.Self || a.promises[n] != nil {
			continue
		}
		if b == nil {
			b = m.marshal()
		}
		a.Emit(automaton.Send{To: n, Msg: b})
	}
}

// onPrepare is the acceptor's phase 1, with the leader-stability rule.
func (a *PBPaxos) onPrepare(from automaton.NodeID, m *message) {
	b := m.Ballot
	if a.owner(b) != from {
		return
	}
	a.maxRound = max(a.maxRound, b.Round)
	grant := b == a.promised ||
		(a.promised.Less(b) && a.role == follower && (!a.leaderAlive || a.aliveLeader == from))
	if !grant {
		a.send(from, &message{Kind: kindPromise, Ballot: b, OK: false, Promised: a.promised, Commit: a.applied})
		return
	}
	if b != a.promised {
		a.promised = b
		a.persist(recPromised, encodeBallotRec(b))
	}
	a.heardLeader(from)
	a.armElection()
	p := a.promiseFor(m.After, m.Gaps)
	p.Ballot = b
	a.send(from, p)
}

// promiseFor builds the phase 1b answer: for each gap instance this node
// holds, its request and proposal number; for every instance after after,
// its requests and proposal numbers, and the state of the latest proposal
// this node knows with that proposal's number. Knowing nothing of these,
// the answer is a plain OK (no entries, no state).
func (a *PBPaxos) promiseFor(after uint64, gaps []uint64) *message {
	m := &message{Kind: kindPromise, Ballot: a.promised, OK: true, Commit: a.applied}
	for _, g := range gaps {
		if s := a.log[g]; s != nil && s.known {
			m.Entries = append(m.Entries, entry{I: g, Bal: s.bal, Known: true, Cmds: s.cmds})
		}
	}
	for i := after + 1; i <= a.maxInst; i++ {
		if s := a.log[i]; s != nil {
			m.Entries = append(m.Entries, entry{I: i, Bal: s.bal, Known: s.known, Cmds: s.cmds})
		}
	}
	// The latest state: the applied one, or that of the highest proposal
	// accepted beyond it.
	var top pn
	if a.applied > after {
		top = a.appliedPN
	}
	for i := a.applied + 1; i <= a.maxInst; i++ {
		if s := a.log[i]; s != nil && top.less(pn{s.bal, i}) {
			top = pn{s.bal, i}
		}
	}
	if top.I <= after {
		return m
	}
	if top.I == a.applied && top == a.appliedPN {
		m.StatePN, m.State = top, a.sm.snapshot()
		return m
	}
	if st := a.materialize(top.I); st != nil {
		m.StatePN, m.State = top, st.snapshot()
	} else if a.applied > after {
		m.StatePN, m.State = a.appliedPN, a.sm.snapshot()
	}
	return m
}

// materialize returns the state of the proposal accepted at instance j
// (beyond the applied one): the chain of its ballot back to a whole state
// of that ballot (a takeover batch's top) or to the applied state, with
// every update on the way installed, or nil when the chain is broken.
func (a *PBPaxos) materialize(j uint64) *machine {
	top := a.log[j]
	if top == nil || top.kind == updCovered {
		return nil
	}
	k := j
	for k > a.applied+1 && a.log[k].kind != updFull {
		k--
		if s := a.log[k]; s == nil || s.bal != top.bal {
			return nil
		}
	}
	var st *machine
	if a.log[k].kind == updFull {
		st = newMachine(a.cfg.Service)
	} else {
		st = a.sm.clone()
	}
	for i := k; i <= j; i++ {
		s := a.log[i]
		cs, err := decodeCmds(s.cmds)
		if s.known && err != nil {
			return nil
		}
		if err := st.install(cs, s.kind, s.upd); err != nil {
			return nil
		}
	}
	return st
}

func (a *PBPaxos) onPromise(from automaton.NodeID, m *message) {
	if a.role != candidate || m.Ballot != a.ballot || a.promises[from] != nil {
		return
	}
	if !m.OK {
		if m.Commit > a.applied && a.catchupAge == 0 {
			a.requestCatchup(from)
		}
		if a.ballot.Less(m.Promised) {
			a.maxRound = max(a.maxRound, m.Promised.Round)
			a.failures++
			a.stepDown()
		}
		return
	}
	a.promises[from] = m
	a.checkTakeover()
}

// checkTakeover completes phase 1 with a majority of promises: the latest
// state is the one with the highest proposal number reported; every
// instance from the gaps and up to that state's instance gets the request
// accepted with the highest ballot (unknown when nobody holds it: the
// state covers it); instances beyond it were never chosen and are dropped
// (package doc, "Takeover"). Nothing known beyond this node's applied
// instance: a no-op with this node's state. Then one Accept carries them
// all, the state on the last one.
func (a *PBPaxos) checkTakeover() {
	if a.role != candidate || len(a.promises) < a.majority() {
		return
	}
	self := a.promises[a.cfg.Self]
	after := self.Commit
	nodes := make([]automaton.NodeID, 0, len(a.promises))
	for n := range a.promises {
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i] < nodes[j] })
	var top pn
	var state []byte
	best := map[uint64]entry{}
	for _, n := range nodes {
		p := a.promises[n]
		if len(p.State) > 0 && top.less(p.StatePN) {
			top, state = p.StatePN, p.State
		}
		for _, e := range p.Entries {
			if !e.Known {
				continue
			}
			if cur, ok := best[e.I]; !ok || cur.Bal.Less(e.Bal) {
				best[e.I] = e
			}
		}
	}
	var entries []entry
	for _, g := range a.gapList() {
		if e, ok := best[g]; ok && g <= after {
			entries = append(entries, entry{I: g, Cmds: e.Cmds, Kind: updCovered})
		}
	}
	if top.I <= after {
		top = pn{I: after + 1}
		state = a.sm.snapshot()
		best[top.I] = entry{Cmds: encodeCmds([]cmd{{Kind: cmdNoop}}), Known: true}
	}
	for i := after + 1; i <= top.I; i++ {
		e := entry{I: i, Kind: updCovered}
		if b, ok := best[i]; ok {
			e.Cmds = b.Cmds
		}
		if i == top.I {
			e.Kind, e.Upd = updFull, state
		}
		entries = append(entries, e)
	}
	a.becomeLeader(after, top.I, entries)
}

// becomeLeader runs the accept phase of the takeover: one Accept for every
// entry, the leader's own acceptance, and heartbeats. The leader is ready
// (serves new requests) once the batch is chosen and applied (advance).
func (a *PBPaxos) becomeLeader(after, top uint64, entries []entry) {
	a.role = leader
	a.failures = 0
	a.leaderHint, a.aliveLeader = a.cfg.Self, a.cfg.Self
	a.promises = nil
	a.batchTop = top
	a.next = top + 1
	a.quorumAt = a.tick
	a.Emit(automaton.CancelTimer{ID: tmElection})
	a.broadcast(&message{Kind: kindAccept, Ballot: a.ballot, Commit: a.applied, Entries: entries})
	for _, e := range entries {
		if e.I <= a.applied {
			if s := a.log[e.I]; (s == nil || !s.known) && len(e.Cmds) > 0 {
				a.fillGap(e.I, e.Cmds)
			}
			continue
		}
		a.acceptOwn(e)
	}
	a.broadcast(&message{Kind: kindHeartbeat, Ballot: a.ballot, Commit: a.applied})
	if a.proto.earlyServe {
		// Broken on purpose: serve from the recovered state before the
		// batch is chosen.
		a.ready = true
		if st := a.materialize(top); st != nil {
			a.tent = st
		} else {
			a.tent = a.sm.clone()
		}
		a.leadWaiting()
	}
	a.checkChosen()
	if !a.ready && a.applied >= a.batchTop {
		// The whole batch was applied during phase 1 (this node learned
		// the chosen instances up to top after it sent its Prepare, from
		// a commit notice or a catch-up): nothing is left in flight, so
		// no Accepted will call advance, and the takeover is complete
		// now. Waiting for it left a leader that heartbeats for ever and
		// never serves (synod-lab sim --protocol pbpaxos ... --seeds 2, see
		// Scenarios).
		a.onTakeoverDone()
	}
}

// acceptOwn records the leader's own acceptance of e (persisted after the
// Accept left: see protocol/paxos's "Phase 2" for why counting it at once
// is safe: every answer depending on it is emitted after the Persist).
func (a *PBPaxos) acceptOwn(e entry) {
	s := &slot{bal: a.ballot, known: len(e.Cmds) > 0, cmds: e.Cmds, kind: e.Kind, upd: e.Upd}
	a.putSlot(e.I, s)
	a.persist(slotKey(e.I), encodeSlotRec(s))
	a.accBal = maxBallot(a.accBal, a.ballot)
	a.inflight[e.I] = &flight{acks: map[automaton.NodeID]bool{a.cfg.Self: true}, sent: a.tick}
}

// fillGap learns the requests of an instance applied without them.
func (a *PBPaxos) fillGap(i uint64, cmds []byte) {
	s := a.log[i]
	if s == nil {
		s = &slot{chosen: true}
		a.log[i] = s
	}
	s.known, s.cmds = true, cmds
	delete(a.gaps, i)
}

// leadWaiting serves the requests that waited for both phases, in id order.
func (a *PBPaxos) leadWaiting() {
	ids := make([]automaton.RequestID, 0, len(a.pending))
	for id, p := range a.pending {
		if p.state == pWaiting || p.state == pRelayed {
			ids = append(ids, id)
		}
	}
	automaton.SortRequestIDs(ids)
	for _, id := range ids {
		if p := a.pending[id]; p != nil && (p.state == pWaiting || p.state == pRelayed) {
			p.state = pWaiting
			a.lead(p)
		}
	}
	a.propose()
}

func maxBallot(a, b Ballot) Ballot {
	if a.Less(b) {
		return b
	}
	return a
}
