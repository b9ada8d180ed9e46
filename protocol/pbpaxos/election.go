package pbpaxos

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
)

// Leader election (the Grid Services thesis VI.A.1 assumes "an underlying leader election
// service"; VI.A.5 asks for leader stability): a follower that hears no
// live leader for election_timeout runs the takeover (takeover.go) after a
// random delay; a follower that heard a live leader within
// election_timeout promises nobody else (the stability rule of
// protocol/paxos); a leader that no majority acknowledged for
// election_timeout steps down (check quorum).

// armElection (re)starts the randomised election timer.
func (a *PBPaxos) armElection() {
	a.Emit(automaton.SetTimer{ID: tmElection, After: proto.ElectionDelay(a.prm.electionTimeout, a.failures, a.cfg.Rand)})
}

func (a *PBPaxos) onElectionTimeout() {
	if a.role != follower {
		return
	}
	if a.leaderAlive {
		a.armElection()
		return
	}
	a.startTakeover()
}

// heardLeader: from leads (or runs for leadership with this node's
// promise) and is alive now.
func (a *PBPaxos) heardLeader(from automaton.NodeID) {
	a.aliveLeader = from
	a.leaderAlive = true
	a.Emit(automaton.SetTimer{ID: tmAlive, After: a.prm.electionTimeout})
}

// stepDown makes a leader or candidate a follower. Transactions in flight
// are aborted (the Grid Services thesis VI.A.5); pending writes wait for the next leader
// (forwarded to it; its duplicate table answers one that executed); X-Paxos
// reads waiting for confirms are answered TRYAGAIN (a read is retried).
func (a *PBPaxos) stepDown() {
	if a.role == follower {
		return
	}
	a.role = follower
	a.clearLeader()
	a.leaderAlive = false
	a.aliveLeader = ""
	if a.leaderHint == a.cfg.Self {
		a.leaderHint = ""
	}
	var reads []automaton.RequestID
	for id, p := range a.pending {
		if p.state == pRead {
			reads = append(reads, id)
			continue
		}
		p.state = pWaiting
		p.fwdTo = ""
	}
	automaton.SortRequestIDs(reads)
	for _, id := range reads {
		a.answer(id, errTryAgain("this node stopped leading before a majority confirmed the read"), nil)
	}
	a.armElection()
}

// acceptBallot is the ballot rule shared by Accept and Heartbeat: a
// message from a ballot at least the promised one makes its sender the live
// leader, and the promise follows the ballot.
func (a *PBPaxos) acceptBallot(from automaton.NodeID, b Ballot) bool {
	if a.owner(b) != from || b.Less(a.promised) {
		return false
	}
	if b != a.promised {
		a.promised = b
		a.persist(recPromised, encodeBallotRec(b))
	}
	a.maxRound = max(a.maxRound, b.Round)
	if a.role != follower && b != a.ballot {
		a.stepDown()
	}
	if a.role == follower {
		a.heardLeader(from)
		if a.leaderHint != from {
			a.leaderHint = from
			a.forwardPending(false)
		}
		a.armElection()
	}
	return true
}

func (a *PBPaxos) onHeartbeat(from automaton.NodeID, m *message) {
	if !a.acceptBallot(from, m.Ballot) {
		a.send(from, &message{Kind: kindHeartbeatAck, Ballot: m.Ballot, OK: false, Promised: a.promised})
		return
	}
	a.send(from, &message{Kind: kindHeartbeatAck, Ballot: m.Ballot, OK: true, Commit: a.applied})
	a.learnCommit(from, m.Ballot, m.Commit)
}

func (a *PBPaxos) onHeartbeatAck(from automaton.NodeID, m *message) {
	if a.role != leader || m.Ballot != a.ballot {
		return
	}
	if !m.OK {
		a.onRejected(m.Promised)
		return
	}
	a.hbAck[from] = a.tick
}

// onRejected: an acceptor promised a higher ballot (a node that ran for
// election while cut off). The leader runs the takeover again above it:
// its followers, which hear it alive, promise at once.
func (a *PBPaxos) onRejected(promised Ballot) {
	if !a.ballot.Less(promised) {
		return
	}
	a.maxRound = max(a.maxRound, promised.Round)
	if a.role == candidate {
		a.failures++
		a.stepDown()
		return
	}
	a.stepDown()
	a.startTakeover()
}
