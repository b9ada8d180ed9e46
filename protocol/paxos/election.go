package paxos

import (
	"slices"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
)

// Leader election and leader liveness (package doc, "Leader election"):
// the election timer, the stable-leader rules, heartbeats and check quorum,
// stepping down.

// armElection (re)starts the randomised election timer: election_timeout
// plus a random part of up to election_timeout << min(failures, 3).
func (a *Paxos) armElection() {
	a.Emit(automaton.SetTimer{ID: tmElection, After: proto.ElectionDelay(a.prm.ElectionTimeout, a.failures, a.cfg.Rand)})
}

// Election timer and "alive" timer (package doc, "Leader election"). While
// a follower hears a live leader (leaderAlive), only "alive" runs: each
// Accept or Heartbeat re-arms it (one timer per message, where re-arming
// the election timer too made two), and the election timer is not armed.
// When "alive" fires (election_timeout of silence), the election timer runs
// for the random part only (armElectionRest), so phase 1 starts
// election_timeout plus the random part after the last message, as when
// every message re-armed the election timer to the whole delay.

// armElectionRest arms the election timer for the random part of the
// election delay: "alive" has just fired.
func (a *Paxos) armElectionRest() {
	a.Emit(automaton.SetTimer{ID: tmElection, After: proto.ElectionDelay(a.prm.ElectionTimeout, a.failures, a.cfg.Rand) - a.prm.ElectionTimeout})
}

// onAliveTimeout: no live leader heard for election_timeout.
func (a *Paxos) onAliveTimeout() {
	if !a.proto.stickyLeader {
		a.leaderAlive = false
	}
	if a.role == follower && a.isMember() {
		a.armElectionRest()
	}
}

func (a *Paxos) onElectionTimeout() {
	if a.role != follower || !a.isMember() {
		return // only members stand for election
	}
	if a.leaderAlive {
		a.armElection()
		return
	}
	a.startPhase1()
}

// heardLeader records that from, a leader (or a candidate this node promised),
// is alive now: no other node gets a promise for election_timeout. It
// reports whether it re-armed "alive"; the election timer then waits for
// "alive" to fire (onAliveTimeout): it is cancelled when the leader comes
// alive, and otherwise left alone.
func (a *Paxos) heardLeader(from int) bool {
	if a.proto.stickyLeader && a.aliveLeader >= 0 && a.aliveLeader != from {
		return false
	}
	a.aliveLeader = from
	if !a.leaderAlive {
		a.leaderAlive = true
		a.Emit(automaton.CancelTimer{ID: tmElection})
	}
	a.Emit(automaton.SetTimer{ID: tmAlive, After: a.prm.ElectionTimeout})
	return true
}

// stepDown makes a leader or candidate a follower. Requests it holds are
// forwarded to the next leader it hears of.
func (a *Paxos) stepDown() {
	if a.role == follower {
		return
	}
	a.releaseSettling()
	a.role = follower
	a.ready = false
	a.promises = nil
	a.inflight = map[uint64]*flight{}
	a.ownChosen = nil
	a.inLog = map[automaton.RequestID]uint64{}
	a.queue = nil
	a.changes = nil
	a.p1Confs = nil
	a.learners = map[automaton.NodeID]*learner{}
	a.leaderAlive = false
	a.aliveLeader = -1
	if a.leaderHint == a.self {
		a.leaderHint = -1
	}
	for _, p := range a.pending {
		p.state = pWaiting
		p.fwdTo = -1 // forward at the first chance
	}
	a.fwdHint = -1
	clear(a.reads)
	a.emitMembers()
	a.armElection()
}

// onRejected: an acceptor promised a higher ballot (typically a node that
// ran for election while cut off). The leader runs phase 1 again with a
// ballot above it: its followers, which hear it alive, promise again at once,
// so a returning node does not depose a healthy leader. A deposed leader's
// new Prepare is refused by the followers of the real one, and it steps down.
func (a *Paxos) onRejected(promised Ballot) {
	if !a.ballot.Less(promised) {
		return
	}
	if promised.Round > a.maxRound {
		a.maxRound = promised.Round
	}
	a.startPhase1()
}

// sendHeartbeat starts a heartbeat round at every peer, learners included.
func (a *Paxos) sendHeartbeat() { a.heartbeat(false) }

// heartbeat starts heartbeat round hbRound+1. A confirmation round for
// reads goes only to the followers a majority needs (readTargets, package
// doc "Reads"); every other round to every peer.
func (a *Paxos) heartbeat(confirm bool) {
	a.hbRound++
	a.ackRound[a.self] = a.hbRound
	if a.timesLease(confirm) {
		a.Emit(automaton.SetTimer{ID: leaseTimerBase + automaton.TimerID(a.hbRound), After: a.prm.Lease()})
		a.leaseRounds = append(a.leaseRounds, a.hbRound)
	}
	m := &message{Kind: kindHeartbeat, Ballot: a.ballot, Commit: a.chosenUpTo, Round: a.hbRound}
	var to []int
	if confirm {
		to = a.readTargets()
	}
	if to == nil {
		var pb [8]int
		to = a.peers(true, pb[:])
		a.allRound = [2]uint64{a.allRound[1], a.hbRound}
	}
	var b []byte
	for _, h := range to {
		if b == nil {
			b = m.marshal()
		}
		a.Emit(automaton.Send{To: a.nodes[h], Msg: b})
	}
	a.updateQuorumRound()
}

func (a *Paxos) onHeartbeat(from int, m *message) {
	if !a.acceptBallot(from, m.Ballot) {
		if a.role == candidate && m.Ballot.Less(a.ballot) && !a.removed(from) {
			a.stepDown()
		}
		a.send(from, &message{Kind: kindHeartbeatAck, Ballot: m.Ballot, OK: false, Promised: a.promised, Round: m.Round})
		return
	}
	a.send(from, &message{Kind: kindHeartbeatAck, Ballot: m.Ballot, OK: true, Round: m.Round, Commit: a.chosenUpTo})
	a.learnCommit(from, m.Ballot, m.Commit)
}

func (a *Paxos) onHeartbeatAck(from int, m *message) {
	if a.role != leader || m.Ballot != a.ballot {
		return
	}
	if !m.OK {
		a.onRejected(m.Promised)
		return
	}
	if l := a.learners[a.nodes[from]]; l != nil {
		if !l.heard || m.Commit > l.commit {
			l.heard = true
			l.commit = max(l.commit, m.Commit)
			a.checkLearners()
		}
		return // a learner's acknowledgement confirms nothing
	}
	a.acked[from] = max(a.acked[from], m.Commit)
	a.noteKnows(from, m.Commit)
	if m.Round > a.ackRound[from] {
		a.ackRound[from] = m.Round
		a.updateQuorumRound()
	}
	// A follower behind the leader's log start needs a snapshot, which it
	// asks for itself (catch-up).
}

// updateQuorumRound: the highest heartbeat round acknowledged by a majority
// of the current configuration and of every configuration a change in flight
// makes (a competing candidate may need either).
func (a *Paxos) updateQuorumRound() {
	q := a.confRound(a.sm.conf)
	for _, c := range a.changes {
		q = min(q, a.confRound(c.conf))
	}
	if q > a.quorumRound {
		a.quorumRound = q
		a.quorumTick = a.tick
		a.serveReads()
		// Reads waiting for a round that has not been sent yet.
		for _, p := range a.reads {
			if p.state == pRead && p.round > a.hbRound {
				a.heartbeat(true)
				break
			}
		}
	}
}

// confRound is the highest heartbeat round a majority of c acknowledged
// (updateQuorumRound; no allocation for up to 16 members).
func (a *Paxos) confRound(c *conf) uint64 {
	var buf [16]uint64
	r := buf[:0]
	for _, m := range c.members {
		if h, ok := a.index[m.ID]; ok {
			r = append(r, a.ackRound[h])
		} else {
			r = append(r, 0)
		}
	}
	slices.Sort(r) // ascending: the majority-th highest is at len-majority
	return r[len(r)-c.majority()]
}

// acceptFrom applies the ballot rule shared by Accept and Heartbeat: a
// message from a ballot at least the promised one makes its sender the live
// leader (and the promise follows the ballot).
func (a *Paxos) acceptBallot(from int, b Ballot) bool {
	if !a.ballotOf(from, b) || b.Less(a.promised) {
		return false
	}
	if b != a.promised {
		a.promised = b
		a.persist(recPromised, encodeBallotRec(b))
	}
	if b.Round > a.maxRound {
		a.maxRound = b.Round
	}
	if a.role != follower {
		a.stepDown()
	}
	if !a.heardLeader(from) {
		a.armElection() // not the leader this follower stays with (broken variant)
	}
	a.leaderHint = from
	a.forwardPending()
	return true
}
