package paxos

import (
	"cmp"
	"slices"

	"github.com/synod-dev/synod/automaton"
)

// Reads that bypass the log: ReadIndex (quorum) and lease reads at the
// leader, local reads anywhere (package doc, "Reads").

// leaseValid: a majority acknowledged a heartbeat whose lease timer has not
// fired yet (timers are set when a heartbeat is sent, so they fire in
// round order; a lease is never assumed longer than the timer says). A
// majority that acknowledged round quorumRound acknowledged it after every
// earlier round was sent, so any timed round up to quorumRound whose timer
// is still armed (leaseRounds) holds the lease.
func (a *Paxos) leaseValid() bool {
	return a.role == leader && a.ready && len(a.leaseRounds) > 0 && a.leaseRounds[0] <= a.quorumRound
}

// timesLease reports whether a heartbeat round sets a lease timer: every
// round when lease reads are the namespace's default, else every round
// but the confirmation rounds reads send (package doc, "Reads"): under
// quorum reads a round per few gets, each one's timer a wake-up of the
// leader's loop when it fires, for a lease nothing but an explicit lease
// read uses; the tick's rounds keep such a lease standing.
func (a *Paxos) timesLease(confirm bool) bool {
	return !confirm || a.prm.Read == automaton.ReadLease
}

// leaseFiredAt notes that round r's lease timer fired.
func (a *Paxos) leaseFiredAt(r uint64) {
	if r > a.leaseFired {
		a.leaseFired = r
	}
	k := 0
	for k < len(a.leaseRounds) && a.leaseRounds[k] <= r {
		k++
	}
	a.leaseRounds = a.leaseRounds[k:]
}

// readRounds bounds the confirmation rounds a leader keeps in flight for
// reads (package doc, "Reads"): a step whose reads wait for a round not
// sent yet sends one at its end while fewer are in flight; otherwise the
// next acknowledged round sends it (updateQuorumRound).
const readRounds = 2

// wantRound notes that a read of this step waits for heartbeat round r.
func (a *Paxos) wantRound(r uint64) {
	a.roundWanted = max(a.roundWanted, r)
}

// sendReadRound, at the end of a step, sends the round its reads wait for:
// one round for all the reads of the step (its messages leave after the
// step, so after every read of it arrived), none when a round sent later
// in the step already covers them or readRounds are in flight.
func (a *Paxos) sendReadRound() {
	r := a.roundWanted
	if r == 0 {
		return
	}
	a.roundWanted = 0
	if r > a.hbRound && a.role == leader && a.ready && a.hbRound-a.quorumRound < readRounds {
		a.heartbeat(true)
	}
}

// readTargets returns the followers a confirmation round goes to with
// read_round=majority: as many
// as make a majority of the configuration with the leader, those that
// acknowledged the latest rounds first (ties: the lower handle), or nil
// (every peer) unless read_round=majority, while a membership change is in flight or learners catch
// up, when the leader is not a member of its configuration, or when no
// follower can be left out. A follower left out still hears every tick's
// round; if a target does not answer, the reads are answered on the next
// tick's round, acknowledged by the others, which are the targets from then on.
func (a *Paxos) readTargets() []int {
	c := a.sm.conf
	if !a.prm.ReadRoundMajority || len(a.changes) > 0 || len(a.learners) > 0 || !c.has(a.cfg.Self) {
		return nil
	}
	fs := make([]int, 0, len(c.members))
	for _, m := range c.members {
		if h := a.handle(m.ID); h != a.self {
			fs = append(fs, h)
		}
	}
	need := c.majority() - 1
	if need >= len(fs) {
		return nil
	}
	slices.SortFunc(fs, func(x, y int) int {
		if c := cmp.Compare(a.ackRound[y], a.ackRound[x]); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	return fs[:need]
}

// serveReads answers the quorum and lease reads whose conditions hold.
func (a *Paxos) serveReads() {
	if len(a.reads) == 0 {
		return
	}
	var buf [32]automaton.RequestID
	done := buf[:0]
	for id, p := range a.reads {
		if p.state != pRead || p.readIndex > a.executed {
			continue
		}
		if p.round == 0 {
			if !a.leaseValid() {
				p.round = a.hbRound + 1 // lease lapsed: confirm with a round
				a.wantRound(p.round)
				continue
			}
		} else if a.quorumRound < p.round {
			continue
		}
		done = append(done, id)
	}
	automaton.SortRequestIDs(done)
	for _, id := range done {
		a.answer(id, a.readNow(a.pending[id].req))
	}
}

// readNow answers a read from this replica's state (local reads, and quorum
// and lease reads once their conditions hold).
func (a *Paxos) readNow(req automaton.Request) outcome {
	return a.ownMachine().run(cmd{ID: req.ID, Op: req.Op, Ops: req.Ops, Env: a.readEnv(req)})
}

// isRead reports whether req takes the read path: a single read, or a group
// of reads (which takes the read path exactly as a single read does). A
// nested request never does (nested.go): it is ordered and cached like a
// write, reads included.
func (a *Paxos) isRead(req automaton.Request) bool {
	return !a.nested(req) && !isMemberReq(req) && !isSessionEnd(req) && automaton.IsReadRequest(a.cfg.Service, req)
}
