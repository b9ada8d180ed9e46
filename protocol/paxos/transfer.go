package paxos

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Leadership transfer on request (package doc, "Leadership transfer").
//
// No seed covers it: the Grid Services thesis elects a leader only when
// the last one is suspected dead. The model is Raft's leadership transfer
// extension (Ongaro, "Consensus: Bridging Theory and Practice", 2014,
// §3.10): the leader stops serving, tells the target to time out now, and
// the target starts an election at once instead of after an election
// timeout. In Multi-Paxos the target's phase 1 recovers every accepted
// value from a majority whatever its own log holds, so the leader need not
// bring the target up to date first (Raft must, for its up-to-date vote
// rule); it only picks a target that acknowledged its last heartbeat
// round, so that the target is alive and reachable.
//
// What makes it safe beside phase 1 is the stable-leader rule and the
// lease: followers promise no one else for election_timeout after hearing
// their leader, and the leader serves lease reads on that promise. A
// transfer breaks the rule on purpose (the target's Prepare must be
// granted at once), so the leader first gives up everything the rule
// protects: it steps down (no lease reads, no proposals; its waiting
// requests go to the target) and only then sends TimeoutNow, to every
// member, under its ballot. A member whose live leader is the sender
// under that very ballot stops protecting it (its lease is gone); the
// target (OK set) also starts phase 1. A TimeoutNow of an older ballot
// than the one promised is stale (a newer leader exists): ignored.
//
// Decision: the request is answered when the leader hands off, not when
// the target leads; a lost TimeoutNow leaves the group without a leader
// until the next election timeout (the old leader, now a follower, may
// win it again), which is the cost of a crash of the leader at that
// moment. The request travels as the reserved membership operation
// (automaton.LeaderTransfer), forwarded to the leader like a change; it is
// never logged.

// onTransferLeadership handles a leadership transfer request at the leader
// (Raft §3.10: the leader hands off to the target).
func (a *Paxos) onTransferLeadership(p *pend) {
	id := automaton.NodeID(p.req.Op.Args[0])
	if id == a.cfg.Self {
		a.finish(p.req.ID, service.OK()) // already leads
		return
	}
	if !a.sm.conf.has(id) || a.learners[id] != nil {
		a.finish(p.req.ID, service.Errorf("ERR paxos: cannot transfer leadership of %s to %s: not a member (members: %s)", a.cfg.Namespace, id, a.sm.conf))
		return
	}
	h := a.handle(id)
	if a.ackRound[h] == 0 || a.ackRound[h] < a.allRound[0] || len(a.changes) > 0 {
		// The target did not acknowledge one of the last two heartbeat
		// rounds sent to every peer (down or cut off; confirmation rounds
		// for reads may leave it out), or a membership change is in flight
		// (its new members' quorums are the leader's to finish).
		a.finish(p.req.ID, service.Fail(synoderr.TryAgain, "paxos: leadership of %s not transferred to %s now: it has not acknowledged the last heartbeats, or a membership change is in flight; try again", a.cfg.Namespace, id))
		return
	}
	a.finish(p.req.ID, service.OK())
	b, commit := a.ballot, a.chosenUpTo
	a.stepDown() // no lease reads or proposals from here on
	a.leaderHint = h
	a.forwardPending()
	for _, m := range a.sm.conf.members {
		if o := a.handle(m.ID); o != a.self {
			a.send(o, &message{Kind: kindTimeoutNow, Ballot: b, Commit: commit, OK: o == h})
		}
	}
}

// onTimeoutNow applies a leader's hand-off (Raft §3.10's TimeoutNow, sent
// to every member): the leader it names under the promised ballot no
// longer leads, so this member stops protecting it; the target also
// starts phase 1 at once.
func (a *Paxos) onTimeoutNow(from int, m *message) {
	if !a.ballotOf(from, m.Ballot) || m.Ballot.Less(a.promised) {
		return // stale: a newer ballot was promised since
	}
	a.learnCommit(from, m.Ballot, m.Commit)
	if a.leaderAlive && a.aliveLeader != from {
		return // another live leader: not the sender's to give away
	}
	// "alive" keeps running: when it fires, the election timer runs for its
	// random part (onAliveTimeout), in case the target does not take over.
	a.leaderAlive, a.aliveLeader = false, -1
	if m.OK && a.role == follower && a.isMember() {
		if a.proto.transferSkipsPhase1 {
			a.takeOverBallot(m.Ballot) // broken on purpose (broken_transfer.go)
			return
		}
		a.startPhase1()
	}
}

// isTransferReq reports whether req asks for a leadership transfer.
func isTransferReq(req automaton.Request) bool {
	return isMemberReq(req) && automaton.IsLeaderTransfer(req.Op)
}

// checkTransfer checks a transfer request's shape.
func checkTransfer(op service.Op) error {
	if len(op.Args) != 1 || len(op.Args[0]) == 0 || len(op.Args[0]) > 63 {
		return errBadTransfer
	}
	return nil
}

var errBadTransfer = errorString("member transfer needs exactly one node id")

type errorString string

func (e errorString) Error() string { return string(e) }
