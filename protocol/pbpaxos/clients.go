package pbpaxos

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Clients (the Grid Services thesis VI.A.1: "A client process sends each request to all
// service processes, while only the leader sends a reply"). A fanned-out
// request (Request.Fanout) reaches every node: the leader serves it, the
// followers play their part (an X-Paxos confirm for a read) and answer
// Silent. A candidate keeps it, as the leader it may become; if it does
// not, it forwards it to the leader it hears of and relays the answer. A request that reached one node only (a RESP client) is served
// there if it leads, else forwarded to the leader (writes, transaction
// steps) or relayed to every node (X-Paxos reads, reads.go), and answered
// by that node when the leader's answer comes back.

func errTryAgain(why string) service.Result {
	return service.Fail(synoderr.TryAgain, "pbpaxos: %s", why)
}

// Validator implements proto.Validating: a membership change is refused
// unvalidated (OnRequest).
func (a *PBPaxos) Validator(req automaton.Request) service.Service {
	if automaton.IsMemberOp(req.Op) && len(req.Ops) == 0 && req.Txn == nil {
		return nil
	}
	return a.cfg.Service
}

// Invalid implements proto.Validating.
func (a *PBPaxos) Invalid(req automaton.Request, r service.Result) { a.respond(req.ID, r, nil) }

// OnRequest takes a client's request, validated (Validator).
func (a *PBPaxos) OnRequest(req automaton.Request) {
	if automaton.IsMemberOp(req.Op) && len(req.Ops) == 0 && req.Txn == nil {
		a.respond(req.ID, service.Errorf("ERR %s has no membership changes", a.proto.Protocol), nil)
		return
	}
	a.observeTime(req.Env)
	if req.Opts.Read > automaton.ReadLease {
		a.respond(req.ID, service.Errorf("ERR pbpaxos: unknown read mode %v", req.Opts.Read), nil)
		return
	}
	read := req.Txn == nil && a.read(req)
	if read && (req.Opts.Read == automaton.ReadLocal || req.Opts.Read == automaton.ReadRegular) {
		if req.Fanout && a.role != leader {
			a.silent(req.ID)
			return
		}
		res, results := a.readOn(a.sm, req)
		a.respond(req.ID, res, results)
		return
	}
	xread := read && a.xpaxos(req)
	if a.role == follower || (a.role == candidate && req.Fanout && req.Txn != nil) {
		if req.Fanout {
			// Not this node's to answer; its part of a read or of a
			// transaction step is the confirm. A candidate keeps no
			// transaction step: the transaction lives at the leader that
			// began it.
			if xread || req.Txn != nil {
				a.confirmRead(req.ID)
			}
			a.silent(req.ID)
			return
		}
		if p := a.pending[req.ID]; p != nil {
			p.local = true
			return
		}
		p := &pend{req: req, local: true}
		a.pending[req.ID] = p
		if xread {
			a.relayRead(p)
			return
		}
		p.state = pWaiting
		a.forwardPending(false)
		return
	}
	if p := a.pending[req.ID]; p != nil {
		p.local = true
		return
	}
	p := &pend{req: req, local: true}
	a.pending[req.ID] = p
	a.lead(p)
}

// xpaxos reports whether a linearizable read is served by X-Paxos (the
// default; read mode "log" or param read=log order it through the log).
func (a *PBPaxos) xpaxos(req automaton.Request) bool {
	if req.Opts.Read == automaton.ReadLog {
		return false
	}
	return !a.prm.logReads
}

// lead serves a request at the leader. Until both takeover phases are
// complete nothing new is executed or answered (the Grid Services thesis VI.B Protocol 1):
// the request waits.
func (a *PBPaxos) lead(p *pend) {
	if !a.ready {
		p.state = pWaiting
		return
	}
	req := p.req
	if req.Txn != nil {
		a.leadTxn(p)
		return
	}
	if a.read(req) && a.xpaxos(req) {
		a.leadRead(p)
		return
	}
	if a.dedup(p) {
		return
	}
	p.state = pQueued
	a.queue = append(a.queue, req.ID)
	a.propose()
}

// dedup answers a write the duplicate table knows, or waits for one in
// flight; it reports whether it took care of p.
func (a *PBPaxos) dedup(p *pend) bool {
	id := p.req.ID
	if a.read(p.req) && p.req.Txn == nil {
		return false
	}
	if d, ok := a.sm.lookup(id); ok {
		a.answer(id, d.res, d.results)
		return true
	}
	if a.sm.done(id) {
		a.answer(id, service.Errorf("ERR pbpaxos: request %v is older than its client's latest", id), nil)
		return true
	}
	if a.tent != nil && a.tent.done(id) {
		p.state = pProposed // executed, in an instance not yet chosen
		return true
	}
	return false
}

// forwardPending forwards waiting requests to the known leader: at once
// when not sent to it yet, and again every four ticks (full); relayed
// reads are relayed again.
func (a *PBPaxos) forwardPending(full bool) {
	to := a.leaderHint
	if to == "" || to == a.cfg.Self || a.role == leader {
		return
	}
	var ids []automaton.RequestID
	for id, p := range a.pending {
		switch {
		case p.state == pWaiting && (p.fwdTo != to || (full && p.fwdAge >= 4)):
			ids = append(ids, id)
		case p.state == pRelayed && full && p.fwdAge >= 4:
			ids = append(ids, id)
		}
	}
	automaton.SortRequestIDs(ids)
	for _, id := range ids {
		p := a.pending[id]
		p.fwdAge, p.fwdTo = 0, to
		if p.state == pRelayed {
			a.relayRead(p)
			continue
		}
		a.send(to, &message{Kind: kindForward, Req: wireRequest(a.cfg.Service, p.req)})
	}
}

// wireRequest drops what nobody reads from a forwarded request: the Env
// of a service that reads neither randomness nor the time.
func wireRequest(svc service.Service, r automaton.Request) automaton.Request {
	if !service.UsesEnv(svc) {
		r.Env = service.Env{}
	}
	r.Fanout = false
	return r
}

// onForward: a request the forwarder validated (Validator).
func (a *PBPaxos) onForward(from automaton.NodeID, m *message) {
	if a.role != leader {
		return // the forwarder tries the leader it hears of next
	}
	a.observeTime(m.Req.Env) // the forwarder's arrival time (service.LeaderClock)
	p := a.pending[m.Req.ID]
	if p == nil {
		p = &pend{req: m.Req, state: pWaiting}
		a.pending[m.Req.ID] = p
	}
	addRemote(p, from)
	if p.state == pWaiting {
		a.lead(p)
	}
}

func addRemote(p *pend, n automaton.NodeID) {
	for _, r := range p.remote {
		if r == n {
			return
		}
	}
	p.remote = append(p.remote, n)
}

func (a *PBPaxos) onForwardReply(m *message) {
	if p := a.pending[m.ID]; p != nil {
		a.answer(m.ID, m.Result, m.Results)
	}
}

// answer answers a request to everyone waiting for it.
func (a *PBPaxos) answer(id automaton.RequestID, res service.Result, results []service.Result) {
	p := a.pending[id]
	if p == nil {
		return
	}
	delete(a.pending, id)
	if p.local {
		a.respond(id, res, results)
	}
	if id.Client == expiryClient {
		a.announceExpired(p, res)
	}
	kind := byte(kindForwardReply)
	if p.state == pRead {
		kind = kindReadReply
	}
	for _, r := range p.remote {
		a.send(r, &message{Kind: kind, ID: id, Result: res, Results: results})
	}
}

func (a *PBPaxos) respond(id automaton.RequestID, res service.Result, results []service.Result) {
	a.Emit(automaton.Respond{Resp: automaton.Response{ID: id, Result: res, Results: results}})
}

func (a *PBPaxos) silent(id automaton.RequestID) {
	a.Emit(automaton.Respond{Resp: automaton.Response{ID: id, Silent: true}})
}

// readOn runs a read-only request on m (a read changes nothing).
func (a *PBPaxos) readOn(m *machine, req automaton.Request) (service.Result, []service.Result) {
	env := a.readEnv(req)
	if len(req.Ops) > 0 {
		return service.OK(), automaton.ApplyGroup(m.st, req.Ops, env)
	}
	return service.ApplyEnv(m.st, req.Op, env), nil
}
