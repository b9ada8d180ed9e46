package paxos

import (
	"sort"

	"github.com/synod-dev/synod/automaton"
)

// Phase 1 (the Grid Services thesis chapter V; VI.A.2: one Prepare for all instances),
// with the configurations of membership changes (package doc, "Phase 1").

// startPhase1 makes this node a candidate with a fresh ballot and sends one
// Prepare covering every instance from the first one not known chosen
// (the Grid Services thesis, chapter VI.A.2: "a single message ... for 88, 89 and all
// instances greater than 90").
func (a *Paxos) startPhase1() {
	r := a.maxRound
	if a.promised.Round > r {
		r = a.promised.Round
	}
	if !a.isMember() {
		return
	}
	a.ballot = Ballot{Round: r + 1, Node: a.myNode()}
	a.maxRound = a.ballot.Round
	a.role = candidate
	a.ready = false
	a.p1Ticks = 0
	a.promises = map[int]*message{}
	a.promised = a.ballot
	a.persist(recPromised, encodeBallotRec(a.promised))
	a.promises[a.self] = a.promiseFor(a.chosenUpTo + 1)
	a.p1Confs = []*conf{a.sm.conf}
	a.sendPrepares()
	a.checkPhase1()
}

// sendPrepares asks every member of the configurations phase 1 needs (the
// current one, and those that changes found in the promises make) that has
// not promised yet.
func (a *Paxos) sendPrepares() {
	m := &message{Kind: kindPrepare, Ballot: a.ballot, From: a.chosenUpTo + 1}
	var b []byte
	sent := map[int]bool{}
	for _, c := range a.p1Confs {
		for _, mb := range c.members {
			h := a.handle(mb.ID)
			if h == a.self || a.promises[h] != nil || sent[h] {
				continue
			}
			sent[h] = true
			if b == nil {
				b = m.marshal()
			}
			a.Emit(automaton.Send{To: mb.ID, Msg: b})
		}
	}
}

// promiseFor builds this acceptor's phase 1b answer for instances >= from: its
// chosen prefix, and every accepted instance beyond both.
func (a *Paxos) promiseFor(from uint64) *message {
	m := &message{Kind: kindPromise, Ballot: a.promised, OK: true, Commit: a.chosenUpTo}
	lo := from
	if a.chosenUpTo+1 > lo {
		lo = a.chosenUpTo + 1
	}
	for i := lo; i <= a.maxInst; i++ {
		if s := a.log[i]; s != nil {
			m.Entries = append(m.Entries, entry{I: i, Ballot: s.bal, Chosen: s.chosen, Value: s.val})
		}
	}
	return m
}

// onPrepare is the acceptor's phase 1 (the Grid Services thesis chapter V; Lamport's
// "Paxos made simple"), with the leader-stability rule: a node that heard a
// live leader within election_timeout does not promise anyone else.
func (a *Paxos) onPrepare(from int, m *message) {
	b := m.Ballot
	if !a.ballotOf(from, b) {
		return // a ballot names its proposer
	}
	if !a.sm.conf.has(a.nodes[from]) {
		// Not a member as far as this replica knows: no promise, and the
		// commit index, so that a removed node catches up and learns it.
		a.send(from, &message{Kind: kindPromise, Ballot: b, OK: false, Promised: a.promised, Commit: a.chosenUpTo})
		return
	}
	if b.Round > a.maxRound {
		a.maxRound = b.Round
	}
	grant := b == a.promised ||
		(a.promised.Less(b) && a.role == follower && (!a.leaderAlive || a.aliveLeader == from || a.leaderRemoved()))
	if !grant {
		if m.From > a.chosenUpTo+1 {
			// The candidate knows more chosen (a removed leader's successor
			// does): learn it, the retransmitted Prepare may then be granted.
			a.requestCatchup(from, a.chosenUpTo+1, m.From-1)
		}
		a.send(from, &message{Kind: kindPromise, Ballot: b, OK: false, Promised: a.promised, Commit: a.chosenUpTo})
		return
	}
	if b != a.promised {
		a.promised = b
		a.persist(recPromised, encodeBallotRec(b))
	}
	if !a.heardLeader(from) {
		a.armElection()
	}
	a.send(from, a.promiseFor(m.From))
}

func (a *Paxos) onPromise(from int, m *message) {
	if a.role != candidate || m.Ballot != a.ballot || a.promises[from] != nil {
		return
	}
	if !m.OK {
		if m.Commit > a.chosenUpTo {
			a.requestCatchup(from, a.chosenUpTo+1, m.Commit)
		}
		if a.ballot.Less(m.Promised) {
			if m.Promised.Round > a.maxRound {
				a.maxRound = m.Promised.Round
			}
			a.failures++
			a.stepDown()
		}
		return
	}
	a.promises[from] = m
	a.checkPhase1()
}

// checkPhase1 completes phase 1 once a majority of every configuration
// involved promised (the Grid Services thesis chapter V, phase 1b; VI.A.2 for all instances
// at once). In named steps:
//
//  1. gatherPromises: what the promises report, per instance the value to
//     adopt (the chosen one if any acceptor knows it, else the one accepted
//     with the highest ballot);
//  2. fetchChosenFirst: instances up to the highest reported chosen prefix
//     are chosen already; the candidate fetches them by catch-up first (it
//     must know every value before an instance to know that instance's
//     configuration) and completes phase 1 after;
//  3. pickValues: the value of every instance from the first not chosen
//     here to the highest reported (no-op in the gaps), and the
//     configurations the changes among them make;
//  4. haveEveryMajority: a majority of each configuration met, asking the
//     members met for the first time;
//  5. becomeLeader, reproposeValues (all in one Accept message), then
//     leadWaitingRequests.
//
// Configurations (membership.go): the configuration of instance i is the one
// after executing instances < i. Walking the values in instance order, every
// change met makes the configuration of the instances after it; the
// candidate needs promises from a majority of each configuration met, and
// asks the members it did not know yet.
func (a *Paxos) checkPhase1() {
	if a.role != candidate {
		return
	}
	a.promises[a.self] = a.promiseFor(a.chosenUpTo + 1)
	rep := a.gatherPromises()
	if rep.cmax > a.chosenUpTo {
		a.fetchChosenFirst(rep)
		return
	}
	vals, confs, segs := a.pickValues(rep)
	if !a.haveEveryMajority(confs) {
		return
	}
	a.becomeLeader(segs)
	a.reproposeValues(rep.top, vals, segs)
	a.leadWaitingRequests()
}

// phase1Report is what a candidate's promises report.
type phase1Report struct {
	cmax  uint64           // highest chosen prefix reported
	cfrom int              // the promiser that reported it (-1: none)
	top   uint64           // highest instance reported
	best  map[uint64]entry // per instance: the value to adopt
}

// confSeg: the change at instance at makes configuration c for the
// instances after it.
type confSeg struct {
	at uint64
	c  *conf
}

// gatherPromises reads the promises in handle order: the highest chosen
// prefix, the highest instance, and per instance above this replica's
// chosen prefix the entry known chosen, else the one with the highest
// accepted ballot (the Grid Services thesis V: "the value of the highest-numbered proposal
// among the responses"). paxos-broken-skipphase1values forgets them.
func (a *Paxos) gatherPromises() phase1Report {
	rep := phase1Report{cfrom: -1, top: a.chosenUpTo, best: map[uint64]entry{}}
	hs := make([]int, 0, len(a.promises))
	for h := range a.promises {
		hs = append(hs, h)
	}
	sort.Ints(hs)
	for _, h := range hs {
		p := a.promises[h]
		if p.Commit > rep.cmax {
			rep.cmax, rep.cfrom = p.Commit, h
		}
		for _, e := range p.Entries {
			if e.I <= a.chosenUpTo {
				continue
			}
			if e.I > rep.top {
				rep.top = e.I
			}
			if a.proto.skipPhase1Values {
				continue // broken on purpose: forget what was accepted
			}
			cur, ok := rep.best[e.I]
			if !ok || (!cur.Chosen && (e.Chosen || cur.Ballot.Less(e.Ballot))) {
				rep.best[e.I] = e
			}
		}
	}
	return rep
}

// fetchChosenFirst: a promiser knows instances chosen that this candidate
// lacks. With a majority of the current configuration, the candidate fetches
// them (catch-up); onCatchup calls checkPhase1 again.
func (a *Paxos) fetchChosenFirst(rep phase1Report) {
	if !a.hasMajority(a.sm.conf, a.promises) {
		return
	}
	if rep.cfrom != a.self {
		a.requestCatchup(rep.cfrom, a.chosenUpTo+1, rep.cmax)
	}
}

// pickValues walks the instances from the first not chosen here to the
// highest reported, in order: the value is the one known chosen, else the
// adopted one, else a no-op (gap filling, the Grid Services thesis VI.A.2). Every change
// met makes the configuration of the instances after it (membership.go).
func (a *Paxos) pickValues(rep phase1Report) (vals map[uint64][]byte, confs []*conf, segs []confSeg) {
	vals = map[uint64][]byte{}
	confs = []*conf{a.sm.conf}
	cur := a.sm.conf
	for i := a.chosenUpTo + 1; i <= rep.top; i++ {
		v := noop
		if s := a.log[i]; s != nil && s.chosen {
			v = s.val
		} else if e, ok := rep.best[i]; ok {
			v = e.Value
		}
		vals[i] = v
		if ch, ok := valueChange(v); ok {
			a.noteChange(ch)
			if n, err := cur.apply(ch, i); err == nil {
				cur = n
				segs = append(segs, confSeg{i, n})
				confs = append(confs, n)
			}
		}
	}
	return vals, confs, segs
}

// haveEveryMajority reports whether a majority of every configuration met
// promised. When one lacks it, the candidate sends Prepare to the members
// of configurations met for the first time (membership.go: the quorums of
// later instances are the new configuration's).
func (a *Paxos) haveEveryMajority(confs []*conf) bool {
	asked := map[automaton.NodeID]bool{}
	for _, c := range a.p1Confs {
		for _, m := range c.members {
			asked[m.ID] = true
		}
	}
	a.p1Confs = confs
	for _, c := range confs {
		if !a.hasMajority(c, a.promises) {
			a.emitMembers()
			// Ask the members of configurations met for the first time.
			prep := (&message{Kind: kindPrepare, Ballot: a.ballot, From: a.chosenUpTo + 1}).marshal()
			for _, c := range confs {
				for _, m := range c.members {
					if !asked[m.ID] && m.ID != a.cfg.Self {
						asked[m.ID] = true
						a.Emit(automaton.Send{To: m.ID, Msg: prep})
					}
				}
			}
			return false
		}
	}
	return true
}

// becomeLeader ends the candidacy: fresh phase 2 bookkeeping, and the
// changes among the values to propose again are in flight.
func (a *Paxos) becomeLeader(segs []confSeg) {
	a.role = leader
	a.ready = true
	a.failures = 0
	a.leaderHint = a.self
	a.aliveLeader = a.self
	a.promises = nil
	a.p1Confs = nil
	a.inflight = map[uint64]*flight{}
	a.ownChosen = nil
	a.inLog = map[automaton.RequestID]uint64{}
	a.ackRound = map[int]uint64{}
	a.acked = map[int]uint64{}
	a.changes = nil
	for _, sg := range segs {
		a.changes = append(a.changes, pendingChange{at: sg.at, conf: sg.c})
	}
	a.quorumRound, a.quorumTick = a.hbRound, a.tick
	a.Emit(automaton.CancelTimer{ID: tmElection})
}

// reproposeValues proposes the picked value of every instance not known
// chosen here, each under its own configuration, in one Accept message
// (phase 2a for all of them at once), persists the leader's own
// acceptances after it, and starts heartbeats.
func (a *Paxos) reproposeValues(top uint64, vals map[uint64][]byte, segs []confSeg) {
	var entries []entry
	c := a.sm.conf
	k := 0
	for i := a.chosenUpTo + 1; i <= top; i++ {
		ci := c
		if k < len(segs) && segs[k].at == i {
			c = segs[k].c
			k++
		}
		if s := a.log[i]; s != nil && s.chosen {
			continue
		}
		entries = append(entries, a.proposeAt(i, vals[i], nil, ci))
	}
	a.next = top + 1
	a.emitMembers()
	if len(entries) > 0 {
		a.broadcast(&message{Kind: kindAccept, Ballot: a.ballot, Commit: a.chosenUpTo, Entries: entries}, false)
	}
	a.persistOwn()
	a.sendHeartbeat()
	a.checkChosen()
}

// leadWaitingRequests takes up the requests that waited for a leader, in
// request id order, and proposes what is queued.
func (a *Paxos) leadWaitingRequests() {
	ids := make([]automaton.RequestID, 0, len(a.pending))
	for id := range a.pending {
		ids = append(ids, id)
	}
	automaton.SortRequestIDs(ids)
	for _, id := range ids {
		if p := a.pending[id]; p != nil && p.state == pWaiting {
			a.lead(p)
		}
	}
	a.propose()
}

// hasMajority reports whether the nodes in set (by handle) hold a majority of c.
func (a *Paxos) hasMajority(c *conf, set map[int]*message) bool {
	n := 0
	for _, m := range c.members {
		if h, ok := a.index[m.ID]; ok && set[h] != nil {
			n++
		}
	}
	return n >= c.majority()
}
