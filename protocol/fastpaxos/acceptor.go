package fastpaxos

import (
	"strconv"
	"strings"

	"github.com/synod-dev/synod/automaton"
)

// The acceptor (the Grid Services thesis V.A; Lamport's Fast Paxos, section 3): a
// node-wide promise, per instance a round and a vote, all persisted before
// any message that depends on them leaves.

// OnStart restores the durable state (crash-recovery): the promise, every
// instance's round and vote, and the values this learner knew chosen, which
// it executes again from instance 1 (no snapshots: package doc).
func (a *FastPaxos) OnStart(in automaton.Start) {
	a.reset()
	for k, v := range in.Records {
		switch {
		case k == recPromised:
			if b, err := decodeBallotRec(v); err == nil {
				a.promised = b
			}
		case strings.HasPrefix(k, recInstPfx):
			i, err := strconv.ParseUint(k[len(recInstPfx):], 16, 64)
			s, err2 := decodeInst(v)
			if err != nil || err2 != nil {
				continue // a damaged record: that vote is forgotten, which the checks below tolerate
			}
			a.insts[i] = s
			if a.maxInstRnd.Less(s.rnd) {
				a.maxInstRnd = s.rnd
			}
			if !s.vrnd.IsZero() {
				if id, ok := valueID(s.vval); ok {
					if j, seen := a.votedFor[id]; !seen || j < i {
						a.votedFor[id] = i
					}
				}
				a.fastNext = max(a.fastNext, i+1)
			}
		case strings.HasPrefix(k, recLearnPfx):
			i, err := strconv.ParseUint(k[len(recLearnPfx):], 16, 64)
			val, err2 := decodeLearnRec(v)
			if err != nil || err2 != nil {
				continue
			}
			a.chosen[i] = val
			if id, ok := valueID(val); ok {
				a.chosenReq[id] = i
			}
			a.maxSeen = max(a.maxSeen, i)
		}
	}
	// Rounds seen before the crash: a new candidacy must pick a round above
	// them, never the round this node led before it crashed (two leaders of
	// one recovery round would propose two values in it).
	a.maxRound = max(a.promised.Round, a.maxInstRnd.Round)
	for _, s := range a.insts {
		a.maxRound = max(a.maxRound, s.vrnd.Round)
	}
	a.execute()
	a.Emit(automaton.SetTimer{ID: tmTick, After: a.prm.Heartbeat})
	a.armElection()
}

// roundAt is the acceptor's effective promise at instance i.
func (a *FastPaxos) roundAt(i uint64) Ballot {
	if s := a.insts[i]; s != nil && a.promised.Less(s.rnd) {
		return s.rnd
	}
	return a.promised
}

func (a *FastPaxos) raisePromise(b Ballot) {
	if a.promised.Less(b) {
		a.promised = b
		a.persist(recPromised, encodeBallotRec(b))
	}
	if b.Round > a.maxRound {
		a.maxRound = b.Round
	}
}

func (a *FastPaxos) putInst(i uint64, s *inst) {
	a.insts[i] = s
	a.persist(instKey(i), encodeInst(s))
	a.touched = append(a.touched, i)
}

// onPrepare is phase 1b for every instance from m.From: promise the fast
// round m.Ballot and report the votes. A round at or below the node-wide
// promise or below a per-instance recovery round is refused.
func (a *FastPaxos) onPrepare(from int, m *message) {
	if m.Ballot.Less(a.promised) || !a.maxInstRnd.Less(m.Ballot) || !isFast(m.Ballot) {
		top := a.promised
		if top.Less(a.maxInstRnd) {
			top = a.maxInstRnd
		}
		a.send(from, &message{Kind: kindRefuse, Ballot: m.Ballot, Promised: top})
		return
	}
	if a.role != follower && a.ballot != m.Ballot {
		a.stepDown()
	}
	a.raisePromise(m.Ballot)
	a.leaderHint = from
	var es []entry
	for i, s := range a.insts {
		if i >= m.From && !s.vrnd.IsZero() {
			es = append(es, entry{I: i, Ballot: s.vrnd, Value: s.vval})
		}
	}
	sortEntries(es)
	a.send(from, &message{Kind: kindPromise, Ballot: m.Ballot, OK: true, Entries: es})
}

// onAny is the leader's "any" message (Lamport's phase 2a with no value),
// repeated as its heartbeat: the acceptor may vote for any proposal in the
// fast round m.Ballot at instances from m.From. An acceptor that has not
// promised m.Ballot joins the round here (a phase 2a of a round at least its
// promise), which is how a restarted acceptor gets its fast round back.
func (a *FastPaxos) onAny(from int, m *message) {
	if m.Ballot.Less(a.promised) || !isFast(m.Ballot) {
		a.send(from, &message{Kind: kindRefuse, Ballot: m.Ballot, Promised: a.promised})
		return
	}
	if a.role != follower && a.ballot != m.Ballot {
		a.stepDown()
	}
	a.raisePromise(m.Ballot)
	a.heard = true
	a.leaderHint = from
	a.armElection()
	if a.anyBal != m.Ballot {
		a.anyBal = m.Ballot
		a.fastNext = max(a.fastNext, m.From)
	}
	a.anyFrom = max(a.anyFrom, m.From)
	a.fastNext = max(a.fastNext, a.anyFrom)
	a.leaderCommit = max(a.leaderCommit, m.Commit)
	a.retryPending() // requests that waited for a fast round
}

// canVoteFast reports whether the acceptor is in a fast round it may vote in.
func (a *FastPaxos) canVoteFast() bool {
	return !a.anyBal.IsZero() && a.anyBal == a.promised
}

// onPropose is a proposal reaching the acceptor in a fast round (the Grid Services thesis
// V.A: the proposer sends straight to the acceptors; VI.D: "the command
// number that the acceptor believes to be the next unused one"). A request
// already voted for at an undecided instance, or already chosen, gets no new
// vote; one whose vote lost its instance gets a vote at the next.
func (a *FastPaxos) onPropose(req automaton.Request) {
	if !a.canVoteFast() {
		return // no fast round yet: the proposer resends
	}
	if _, done := a.chosenReq[req.ID]; done {
		return
	}
	if _, done := a.sm.lookup(req.ID); done {
		return
	}
	if j, ok := a.votedFor[req.ID]; ok {
		if _, decided := a.chosen[j]; !decided {
			if s := a.insts[j]; s != nil && (s.vrnd == a.anyBal || s.vrnd == recoveryOf(a.anyBal)) {
				return // voted in this round or its recovery, still open
			}
		}
	}
	i := a.fastNext
	for {
		if i <= a.chosenUpTo {
			i = a.chosenUpTo + 1
			continue
		}
		s := a.insts[i]
		if s == nil || (s.vrnd != a.anyBal && !a.anyBal.Less(s.rnd)) {
			break
		}
		i++
	}
	val := encodeValue(req)
	a.putInst(i, &inst{rnd: a.insts[i].rndOr(), vrnd: a.anyBal, vval: val})
	a.votedFor[req.ID] = i
	a.fastNext = i + 1
	a.castVote(i, a.anyBal, val)
}

// cast is one vote an acceptor sent (phase 2b), kept for the invariant
// checker until the end of the step.
type cast struct {
	i   uint64
	bal Ballot
	val []byte
}

func (s *inst) rndOr() Ballot {
	if s == nil {
		return Ballot{}
	}
	return s.rnd
}

// castVote sends the acceptor's vote to every learner (phase 2b; the Persist
// is already out) and counts it at its own learner.
func (a *FastPaxos) castVote(i uint64, b Ballot, val []byte) {
	a.cast = append(a.cast, cast{i: i, bal: b, val: val})
	a.broadcast(&message{Kind: kindVoted, Entries: []entry{{I: i, Ballot: b, Value: val}}})
	a.observe(Voted, i, b, val)
	a.learnVote(a.self, i, b, val)
}

// onAccept is phase 2b of a recovery (classic) round: vote for the leader's
// value at each instance whose round does not exceed m.Ballot.
func (a *FastPaxos) onAccept(from int, m *message) {
	var top Ballot
	for _, e := range m.Entries {
		if r := a.roundAt(e.I); m.Ballot.Less(r) && !a.proto.staleVote {
			if top.Less(r) {
				top = r
			}
			continue
		}
		a.acceptValue(e.I, m.Ballot, e.Value)
	}
	if !top.IsZero() {
		a.send(from, &message{Kind: kindRefuse, Ballot: m.Ballot, Promised: top})
	}
}

// acceptValue votes val at instance i in the classic round b.
func (a *FastPaxos) acceptValue(i uint64, b Ballot, val []byte) {
	if s := a.insts[i]; s != nil && s.vrnd == b {
		a.castVote(i, b, s.vval) // a retransmission: the vote again
		return
	}
	s := &inst{rnd: b, vrnd: b, vval: val}
	if !a.promised.Less(b) {
		s.rnd = Ballot{}
	}
	if a.maxInstRnd.Less(s.rnd) {
		a.maxInstRnd = s.rnd
	}
	if b.Round > a.maxRound {
		a.maxRound = b.Round
	}
	a.putInst(i, s)
	if id, ok := valueID(val); ok {
		a.votedFor[id] = max(a.votedFor[id], i)
	}
	a.castVote(i, b, val)
}

// onRecover is phase 1b of a recovery round for the instances the leader
// could not settle from fast votes alone: promise m.Ballot at each (no fast
// vote there any more) and report the vote.
func (a *FastPaxos) onRecover(from int, m *message) {
	var es []entry
	for _, i := range m.Insts {
		if m.Ballot.Less(a.roundAt(i)) {
			a.send(from, &message{Kind: kindRefuse, Ballot: m.Ballot, Promised: a.roundAt(i)})
			return
		}
	}
	for _, i := range m.Insts {
		es = append(es, a.promiseInst(i, m.Ballot))
	}
	a.send(from, &message{Kind: kindRecovered, Ballot: m.Ballot, OK: true, Entries: es})
}

// promiseInst raises instance i's round to b and returns the vote there.
func (a *FastPaxos) promiseInst(i uint64, b Ballot) entry {
	s := a.insts[i]
	if s == nil {
		s = &inst{}
	}
	if s.rnd.Less(b) && a.promised.Less(b) {
		c := *s
		c.rnd = b
		a.putInst(i, &c)
		s = &c
		if a.maxInstRnd.Less(b) {
			a.maxInstRnd = b
		}
	}
	return entry{I: i, Ballot: s.vrnd, Value: s.vval}
}
