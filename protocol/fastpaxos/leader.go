package fastpaxos

import (
	"bytes"
	"math/bits"
	"time"

	"github.com/synod-dev/synod/automaton"
)

// The leader (the Grid Services thesis V.A: "an acceptor can have a special role, which is
// as a leader"; Lamport's coordinator): elected by phase 1 of a fast round,
// it opens the round with "any", repeats it as its heartbeat, and resolves
// collisions by coordinated recovery in the classic round right after its
// fast round.

// armElection (re)starts the randomised election timer.
func (a *FastPaxos) armElection() {
	et := a.prm.ElectionTimeout
	a.Emit(automaton.SetTimer{ID: tmElection, After: et + time.Duration(a.cfg.Rand.Int63n(int64(et)))})
}

func (a *FastPaxos) onElectionTimeout() {
	if a.role == leader {
		return
	}
	if a.heard {
		a.heard = false
		a.armElection()
		return
	}
	if a.role == candidate {
		a.armElection()
		return
	}
	a.startPhase1()
}

// startPhase1 runs for leader with a fast round above every round seen
// (Lamport's phase 1a, for every instance this node has not learned).
func (a *FastPaxos) startPhase1() {
	a.clearLeader()
	a.role = candidate
	top := max(a.maxRound, a.promised.Round, a.maxInstRnd.Round)
	a.ballot = Ballot{Round: top + 1, Node: uint32(2 * (a.self + 1))}
	a.maxRound = a.ballot.Round
	a.p1Ticks = 0
	a.raisePromise(a.ballot)
	from := a.chosenUpTo + 1
	own := &message{Kind: kindPromise, Ballot: a.ballot, OK: true}
	for i, s := range a.insts {
		if i >= from && !s.vrnd.IsZero() {
			own.Entries = append(own.Entries, entry{I: i, Ballot: s.vrnd, Value: s.vval})
		}
	}
	a.promises = map[int]*message{a.self: own}
	a.broadcast(&message{Kind: kindPrepare, Ballot: a.ballot, From: from})
	a.armElection()
	if len(a.promises) >= a.q.classic {
		a.becomeLeader()
	}
}

func (a *FastPaxos) onPromise(from int, m *message) {
	if a.role != candidate || m.Ballot != a.ballot {
		return
	}
	if !m.OK {
		a.onRefuse(m)
		return
	}
	a.promises[from] = m
	if len(a.promises) >= a.q.classic {
		a.becomeLeader()
	}
}

// becomeLeader: a classic quorum promised. Every instance from which a
// vote was reported is settled in the recovery round by Lamport's rule
// (the promises are its phase 1b; the rule treats a quorum member with no
// vote as having voted for nothing); the others are opened for fast votes
// with "any" from the first instance no member of the quorum voted in,
// where no value can have been chosen.
func (a *FastPaxos) becomeLeader() {
	a.role = leader
	a.leaderHint = a.self
	from := a.chosenUpTo + 1
	top := from - 1
	reports := map[uint64][]report{}
	for acc, m := range a.promises {
		for _, e := range m.Entries {
			if e.I >= from {
				reports[e.I] = append(reports[e.I], report{acc: acc, bal: e.Ballot, val: e.Value})
				top = max(top, e.I)
			}
		}
	}
	rec := recoveryOf(a.ballot)
	var es []entry
	for i := from; i <= top; i++ {
		if _, ok := a.chosen[i]; ok {
			continue
		}
		rs := reports[i]
		for acc := range a.promises {
			found := false
			for _, r := range rs {
				found = found || r.acc == acc
			}
			if !found {
				rs = append(rs, report{acc: acc})
			}
		}
		sortReports(rs)
		val := a.q.pick(rs, a.proto.ignoreRule)
		a.recovering[i] = &recovery{val: val, sent: a.tick}
		a.stats.Recovered++
		es = append(es, entry{I: i, Value: val})
	}
	a.promises = nil
	if len(es) > 0 {
		a.broadcast(&message{Kind: kindAccept, Ballot: rec, Entries: es})
		for _, e := range es {
			a.acceptValue(e.I, rec, e.Value)
		}
	}
	a.anyBal = a.ballot
	a.anyFrom = top + 1
	a.fastNext = max(a.fastNext, a.anyFrom)
	a.broadcast(&message{Kind: kindAny, Ballot: a.ballot, From: a.anyFrom, Commit: a.chosenUpTo})
	a.retryPending()
}

// leaderTick: the any/heartbeat (with a new start after collisions, so
// acceptors that drifted apart vote at the same instances again),
// retransmitted recovery messages, and coordinated recovery of instances
// that stayed undecided (votes lost, a crashed acceptor, a fast quorum that
// cannot form).
func (a *FastPaxos) leaderTick() {
	if a.resync {
		a.resync = false
		top := uint64(0)
		for _, i := range a.lastFast {
			top = max(top, i)
		}
		if top+1 > a.anyFrom {
			a.anyFrom = top + 1
			a.fastNext = max(a.fastNext, a.anyFrom)
		}
	}
	a.broadcast(&message{Kind: kindAny, Ballot: a.ballot, From: a.anyFrom, Commit: a.chosenUpTo})
	rec := recoveryOf(a.ballot)
	var accepts []entry
	var explicit []uint64
	started := 0
	hi := max(a.maxSeen, a.anyFrom-1)
	for i := a.chosenUpTo + 1; i <= hi; i++ {
		if _, ok := a.chosen[i]; ok {
			continue
		}
		r := a.recovering[i]
		switch {
		case r != nil && r.val != nil:
			if r.sent < a.tick {
				accepts = append(accepts, entry{I: i, Value: r.val})
				r.sent = a.tick
			}
		case r != nil:
			if r.sent+1 < a.tick {
				explicit = append(explicit, i)
				r.sent = a.tick
			}
		default:
			a.stuck[i]++
			if a.stuck[i] >= stuckTicks && started < recoverMax {
				started++
				a.recovering[i] = &recovery{reports: map[int]report{}, sent: a.tick}
				a.tryRecover(i)
				if a.recovering[i] != nil && a.recovering[i].val == nil {
					explicit = append(explicit, i)
				}
			}
		}
	}
	if len(accepts) > 0 {
		a.broadcast(&message{Kind: kindAccept, Ballot: rec, Entries: accepts})
	}
	if len(explicit) > 0 {
		for _, i := range explicit {
			if r := a.recovering[i]; r != nil && r.val == nil {
				e := a.promiseInst(i, rec)
				r.reports[a.self] = report{acc: a.self, bal: e.Ballot, val: e.Value}
			}
		}
		a.broadcast(&message{Kind: kindRecover, Ballot: rec, Insts: explicit})
		for _, i := range explicit {
			a.tryRecover(i)
		}
	}
}

// checkCollision: the leader holds fast votes of its round at instance i
// from a classic quorum that do not all agree: a collision (the Grid Services thesis V.A),
// resolved by coordinated recovery.
func (a *FastPaxos) checkCollision(i uint64) {
	if r := a.recovering[i]; r != nil {
		a.tryRecover(i)
		return
	}
	var first []byte
	voters, split := 0, false
	for _, v := range a.votes[i] {
		if v.bal != a.ballot {
			continue
		}
		if voters == 0 {
			first = v.val
		} else if !bytes.Equal(first, v.val) {
			split = true
		}
		voters++
	}
	if voters >= a.q.classic && split {
		a.stats.Collisions++
		a.recovering[i] = &recovery{reports: map[int]report{}, sent: a.tick}
		a.tryRecover(i)
	}
}

// tryRecover is Lamport's coordinated recovery of instance i: the fast
// votes of the leader's round serve as phase 1b messages of the recovery
// round right after it (no other round lies between them), completed by
// explicit Recovered answers; on a classic quorum of reports the leader
// picks by the rule (quorums.pick) and proposes in the recovery round.
func (a *FastPaxos) tryRecover(i uint64) {
	r := a.recovering[i]
	if r == nil || r.val != nil {
		return
	}
	q := map[int]report{}
	for acc, v := range a.votes[i] {
		if v.bal == a.ballot {
			q[acc] = report{acc: acc, bal: v.bal, val: v.val}
		}
	}
	for acc, rep := range r.reports {
		q[acc] = rep
	}
	if len(q) < a.q.classic {
		return
	}
	rs := make([]report, 0, len(q))
	for _, rep := range q {
		rs = append(rs, rep)
	}
	sortReports(rs)
	r.val = a.q.pick(rs, a.proto.ignoreRule)
	r.sent = a.tick
	a.stats.Recovered++
	a.resync = true
	rec := recoveryOf(a.ballot)
	a.broadcast(&message{Kind: kindAccept, Ballot: rec, Entries: []entry{{I: i, Value: r.val}}})
	a.acceptValue(i, rec, r.val)
}

func (a *FastPaxos) onRecovered(from int, m *message) {
	if a.role != leader || m.Ballot != recoveryOf(a.ballot) {
		return
	}
	for _, e := range m.Entries {
		if r := a.recovering[e.I]; r != nil && r.val == nil {
			r.reports[from] = report{acc: from, bal: e.Ballot, val: e.Value}
			a.tryRecover(e.I)
		}
	}
}

// onRefuse: an acceptor promised a round above this node's rounds; a
// leader or candidate steps down (the election timer decides what next).
func (a *FastPaxos) onRefuse(m *message) {
	if m.Promised.Round > a.maxRound {
		a.maxRound = m.Promised.Round
	}
	if a.role == follower || !recoveryOf(a.ballot).Less(m.Promised) {
		return
	}
	a.stepDown()
}

func (a *FastPaxos) stepDown() {
	if a.role == follower {
		return
	}
	a.role = follower
	if a.leaderHint == a.self {
		a.leaderHint = -1
	}
	a.clearLeader()
	a.armElection()
}

// trackVote counts, for the seed's "might not be chosen" notice (V.C), the
// acceptors that voted for a request in the leader's fast round.
func (a *FastPaxos) trackVote(acc int, i uint64, val []byte) {
	id, ok := valueID(val)
	if !ok {
		return
	}
	if _, done := a.chosenReq[id]; done {
		return
	}
	t := a.tracks[id]
	if t == nil {
		t = &track{}
		a.tracks[id] = t
	}
	t.voters |= 1 << uint(acc)
	found := false
	for _, j := range t.insts {
		found = found || j == i
	}
	if !found {
		t.insts = append(t.insts, i)
	}
	a.checkNotChosen(id)
}

// checkNotChosen is the seed's extra leader function (V.C): when every
// acceptor has accepted a request and every instance it was voted in has
// been decided for another value, the request "might not be chosen": the
// leader tells every node, and the nodes holding it for a client propose it
// again at once instead of waiting for a timeout.
func (a *FastPaxos) checkNotChosen(id automaton.RequestID) {
	t := a.tracks[id]
	if t == nil || bits.OnesCount64(t.voters) < a.n() {
		return
	}
	if _, done := a.chosenReq[id]; done {
		return
	}
	for _, j := range t.insts {
		if _, ok := a.chosen[j]; !ok {
			return
		}
	}
	delete(a.tracks, id) // a later loss of its new votes is noticed afresh
	a.stats.NotChosen++
	a.broadcast(&message{Kind: kindNotChosen, Req: automaton.Request{ID: id}})
	a.onNotChosen(id)
}
