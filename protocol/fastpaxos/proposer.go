package fastpaxos

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Proposers (the Grid Services thesis V.A: "in our case, clients are proposers"). A client
// that fans out (Request.Fanout) sent the request to every node itself:
// each node's acceptor votes for it and each node answers it once it has
// executed it. A client that reaches one node (a RESP client) makes that
// node its proposer: it sends the request to every acceptor on the
// client's behalf and answers the client itself.

// Validator implements proto.Validating: a session end (machine.go) is
// the runtime's, which no service lists.
func (a *FastPaxos) Validator(req automaton.Request) service.Service {
	if automaton.IsSessionEnd(req.Op) {
		return nil
	}
	return a.cfg.Service
}

// Invalid implements proto.Validating.
func (a *FastPaxos) Invalid(req automaton.Request, r service.Result) {
	a.respond(automaton.Response{ID: req.ID, Result: r})
}

// OnRequest: a request from a client, validated (Validator).
func (a *FastPaxos) OnRequest(req automaton.Request) {
	if res, refused := automaton.RefuseUnsupported(a.proto.Protocol, req); refused {
		a.respond(automaton.Response{ID: req.ID, Result: res})
		return
	}
	if automaton.IsMemberOp(req.Op) {
		a.respond(automaton.Response{ID: req.ID, Result: service.Errorf("ERR fastpaxos does not change its membership")})
		return
	}
	if res, ok := a.sm.lookup(req.ID); ok {
		a.respond(automaton.Response{ID: req.ID, Result: res}) // executed already (a retry)
		return
	}
	if res, refused := a.sm.refused(req); refused {
		a.respond(automaton.Response{ID: req.ID, Result: res}) // forgotten, or its session ended
		return
	}
	req.Env = service.Env{} // deterministic services only (New)
	p := a.pending[req.ID]
	if p == nil {
		p = &pend{req: req, fanout: req.Fanout}
		a.pending[req.ID] = p
	}
	p.fanout = p.fanout && req.Fanout
	p.since = 0
	a.propose(p, false)
}

// propose sends p's request to the acceptors: its own, and every other one
// when this node proposes for the client. force: the leader said the
// request might not be chosen, so the acceptor votes again even if it has
// not yet learned that its earlier vote lost.
func (a *FastPaxos) propose(p *pend, force bool) {
	if !p.fanout {
		a.broadcast(&message{Kind: kindPropose, Req: p.req})
	}
	if force {
		delete(a.votedFor, p.req.ID)
	}
	a.onPropose(p.req)
}

// onNotChosen: the leader's "might not be chosen" notice (the Grid Services thesis V.C).
// The node resends the request for its client at once.
func (a *FastPaxos) onNotChosen(id automaton.RequestID) {
	p := a.pending[id]
	if p == nil {
		return
	}
	a.stats.Resent++
	p.since = 0
	a.propose(p, true)
}

// retryPending votes, in a newly opened fast round, for the requests this
// node holds.
func (a *FastPaxos) retryPending() {
	ids := make([]automaton.RequestID, 0, len(a.pending))
	for id := range a.pending {
		ids = append(ids, id)
	}
	automaton.SortRequestIDs(ids)
	for _, id := range ids {
		if p := a.pending[id]; p != nil { // a vote may execute (and answer) another
			a.onPropose(p.req)
		}
	}
}

// proposerTick: a request not executed after retry is proposed again (the
// client's timeout of the Grid Services thesis V.C, kept by the node that holds the
// request); one not executed after op_timeout is released: a fanned-out
// request with a Silent answer (another node may answer it), one this node
// proposed with TRYAGAIN (its outcome is unknown).
func (a *FastPaxos) proposerTick() {
	if len(a.pending) == 0 {
		return
	}
	ids := make([]automaton.RequestID, 0, len(a.pending))
	for id := range a.pending {
		ids = append(ids, id)
	}
	automaton.SortRequestIDs(ids)
	opTicks, retryTicks := a.ticksOf(a.prm.OpTimeout), a.ticksOf(a.prm.Retry)
	for _, id := range ids {
		p := a.pending[id]
		if p == nil {
			continue // answered by a vote this tick cast
		}
		p.age++
		p.since++
		switch {
		case p.age > opTicks && p.fanout:
			a.respond(automaton.Response{ID: id, Silent: true})
		case p.age > opTicks:
			a.respond(automaton.Response{ID: id, Result: service.Fail(synoderr.TryAgain, "fastpaxos: request %v not executed within %v; a write's outcome is unknown", id, a.prm.OpTimeout)})
		case p.since >= retryTicks:
			p.since = 0
			a.stats.Resent++
			a.propose(p, false)
		}
	}
}

// respond answers a request and forgets it.
func (a *FastPaxos) respond(r automaton.Response) {
	delete(a.pending, r.ID)
	a.Emit(automaton.Respond{Resp: r})
}
