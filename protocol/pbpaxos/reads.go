package pbpaxos

import (
	"github.com/synod-dev/synod/automaton"
)

// X-Paxos reads (the Grid Services thesis VI.A.3). A read goes to every replica; each
// non-leader sends a confirm to the process with the highest ballot it
// has accepted; the leader executes the read while the confirms arrive and
// answers once both are done with a majority including itself. Only the
// leader whose ballot a majority accepted last can collect that majority,
// so a deposed leader cannot answer (the seed's argument).
//
// A read that reached one node (no fan-out) is relayed by that node to
// every replica (the node plays the client's fan-out, and confirms
// itself); the leader answers it to that node. A read that reached the
// leader alone (its own client, or a forward) is relayed by the leader,
// so that the others confirm.

// confirmSet: the confirms a node received for one read.
//
// A read the leader answered on a majority still has confirms on their
// way (with 3 nodes, the second follower's). Its set is kept, marked
// answered, until every other node's confirm arrived or answeredTicks
// ticks passed: deleted at the answer, each late confirm made a new set
// that lived op_timeout (5 s), and one client at the leader reading at
// more than maxConfirms / 5 s (3,277 reads/s) filled the map, after which
// every confirm was dropped and reads hung until the sets aged out
// (bench-latency13's one pbpaxos error per run: a get after the 16,384th).
type confirmSet struct {
	bal      Ballot
	from     map[automaton.NodeID]bool
	age      int
	answered bool
}

// answeredTicks: how long an answered read's set waits for its late
// confirms (a confirm later than that makes a set that ages out after
// op_timeout, as any confirm for a read this node has not seen).
const answeredTicks = 2

// confirmRead is a non-leader's part of a read: confirm it to the owner of
// the highest ballot this node accepted.
func (a *PBPaxos) confirmRead(id automaton.RequestID) {
	to := a.owner(a.accBal)
	if to == "" || to == a.cfg.Self {
		return
	}
	a.send(to, &message{Kind: kindConfirm, ID: id, Ballot: a.accBal})
}

// relayRead sends a read that reached this non-leader alone to every
// replica, and confirms it.
func (a *PBPaxos) relayRead(p *pend) {
	p.state = pRelayed
	a.broadcast(&message{Kind: kindRead, Req: wireRequest(a.cfg.Service, p.req), Origin: a.cfg.Self})
	a.confirmRead(p.req.ID)
}

// onRead: a relayed read, validated at its origin (Validator). The leader
// serves it for its origin; the others confirm it.
func (a *PBPaxos) onRead(from automaton.NodeID, m *message) {
	if m.Req.Txn != nil {
		a.confirmRead(m.Req.ID) // a leader asks: only confirm
		return
	}
	if !a.read(m.Req) {
		return
	}
	if a.role != leader {
		a.confirmRead(m.Req.ID)
		return
	}
	a.observeTime(m.Req.Env) // the origin's arrival time (service.LeaderClock)
	p := a.pending[m.Req.ID]
	if p == nil {
		p = &pend{req: m.Req, state: pWaiting, relayed: true}
		a.pending[m.Req.ID] = p
	}
	if m.Origin != a.cfg.Self {
		addRemote(p, m.Origin)
	}
	if p.state == pWaiting {
		a.lead(p)
	}
}

// leadRead executes a read at the leader and waits for the confirms.
func (a *PBPaxos) leadRead(p *pend) {
	if p.state == pRead {
		return
	}
	p.state = pRead
	a.freshConfirms(p.req.ID)
	if !p.req.Fanout && !p.relayed && !p.asked {
		p.asked = true
		// Only the leader has it: ask the others to confirm.
		a.broadcast(&message{Kind: kindRead, Req: wireRequest(a.cfg.Service, p.req), Origin: a.cfg.Self})
	}
	// Executed on the applied state: every write this leader or an
	// earlier one answered is in it.
	p.res, p.results = a.readOn(a.sm, p.req)
	p.executed = true
	a.checkRead(p)
}

// freshConfirms drops what is left of an earlier answer's set for id (a
// read retried under its ID): its confirms are not this read's.
func (a *PBPaxos) freshConfirms(id automaton.RequestID) {
	if c := a.confirms[id]; c != nil && c.answered {
		delete(a.confirms, id)
	}
}

// confirmed counts the confirms for id under the leader's ballot, its own
// included.
func (a *PBPaxos) confirmed(id automaton.RequestID) int {
	n := 1
	if c := a.confirms[id]; c != nil && c.bal == a.ballot && !c.answered {
		n += len(c.from)
	}
	return n
}

// checkRead answers a read once it is executed and a majority confirmed.
func (a *PBPaxos) checkRead(p *pend) {
	if !p.executed || a.role != leader {
		return
	}
	n := a.confirmed(p.req.ID)
	if n < a.majority() && !a.proto.noConfirm {
		return
	}
	a.served = append(a.served, served{read: true, confirms: n, newReq: true, early: a.applied < a.batchTop})
	a.doneConfirms(p.req.ID)
	a.answer(p.req.ID, p.res, p.results)
}

// doneConfirms: the read id is answered; keep its set for the confirms
// still on their way (confirmSet), or drop it if none is.
func (a *PBPaxos) doneConfirms(id automaton.RequestID) {
	c := a.confirms[id]
	if c == nil {
		if len(a.confirms) >= maxConfirms {
			return
		}
		c = &confirmSet{bal: a.ballot, from: map[automaton.NodeID]bool{}}
		a.confirms[id] = c
	}
	if c.bal != a.ballot || len(c.from) >= len(a.cfg.Nodes)-1 {
		delete(a.confirms, id)
		return
	}
	c.answered = true
	if c.age < a.ticksOf(a.prm.opTimeout)-answeredTicks {
		c.age = a.ticksOf(a.prm.opTimeout) - answeredTicks
	}
}

func (a *PBPaxos) onConfirm(from automaton.NodeID, m *message) {
	if a.owner(m.Ballot) != a.cfg.Self {
		return
	}
	c := a.confirms[m.ID]
	if c == nil || c.bal.Less(m.Ballot) {
		if len(a.confirms) >= maxConfirms {
			return // a flood of confirms for reads never seen: drop
		}
		c = &confirmSet{bal: m.Ballot, from: map[automaton.NodeID]bool{}}
		a.confirms[m.ID] = c
	}
	if c.bal != m.Ballot {
		return
	}
	c.from[from] = true
	if c.answered {
		if len(c.from) >= len(a.cfg.Nodes)-1 {
			delete(a.confirms, m.ID) // the last late confirm
		}
		return
	}
	if p := a.pending[m.ID]; p != nil && p.state == pRead {
		a.checkRead(p)
	}
}

func (a *PBPaxos) onReadReply(m *message) {
	if p := a.pending[m.ID]; p != nil {
		a.answer(m.ID, m.Result, m.Results)
	}
}
