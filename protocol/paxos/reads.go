package paxos

import (
	"github.com/synod-dev/synod/automaton"
)

// Reads that bypass the log: ReadIndex (quorum) and lease reads at the
// leader, local reads anywhere (package doc, "Reads").

// leaseValid: a majority acknowledged a heartbeat whose lease timer has not
// fired yet (timers are set when each heartbeat is sent, so they fire in
// round order; a lease is never assumed longer than the timer says).
func (a *Paxos) leaseValid() bool {
	return a.role == leader && a.ready && a.quorumRound > a.leaseFired && a.quorumRound > 0
}

// serveReads answers the quorum and lease reads whose conditions hold.
func (a *Paxos) serveReads() {
	if len(a.reads) == 0 {
		return
	}
	var done []automaton.RequestID
	for id, p := range a.reads {
		if p.state != pRead || p.readIndex > a.executed {
			continue
		}
		if p.round == 0 {
			if !a.leaseValid() {
				p.round = a.hbRound + 1 // lease lapsed: confirm with a round
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
	return !a.nested(req) && !isMemberReq(req) && automaton.IsReadRequest(a.cfg.Service, req)
}
