package paxos

import (
	"slices"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Clients: requests, forwarding to the leader, answers (package doc,
// "Clients, forwarding, exactly-once").

// Validator implements proto.Validating: a request refused before any
// service sees it (at a non-member, a transaction step) and a membership
// change (parsed by onMemberRequest) are not validated against the service.
func (a *Paxos) Validator(req automaton.Request) service.Service {
	if !a.isMember() || req.Txn != nil || isMemberReq(req) || isSessionEnd(req) {
		return nil
	}
	return a.cfg.Service
}

// Invalid implements proto.Validating.
func (a *Paxos) Invalid(req automaton.Request, r service.Result) { a.Respond(req.ID, r) }

// OnRequest takes a client's request, validated (Validator).
func (a *Paxos) OnRequest(req automaton.Request) {
	if !a.isMember() {
		a.Respond(req.ID, a.notMemberError())
		return
	}
	if req.Txn != nil {
		// Interactive transactions (T-Paxos, the Grid Services thesis VI.A.4) are not done:
		// refused before anything is applied.
		a.Respond(req.ID, service.Errorf(automaton.ErrNoInteractive, a.proto.Protocol))
		return
	}
	if isMemberReq(req) {
		a.onMemberRequest(req)
		return
	}
	a.observeTime(req.Env)
	if a.isRead(req) && (req.Opts.Read == automaton.ReadLocal || req.Opts.Read == automaton.ReadRegular) {
		a.reply(req.ID, a.readNow(req))
		return
	}
	if req.Opts.Read > automaton.ReadLease {
		a.Respond(req.ID, service.Errorf("ERR paxos: unknown read mode %v", req.Opts.Read))
		return
	}
	if p := a.pending[req.ID]; p != nil {
		p.local = true // a retry of a request in progress
		return
	}
	p := &pend{req: req, local: true, fwdTo: -1}
	a.pending[req.ID] = p
	a.route(p)
}

// route sends a new request to the leader: handled here when this node
// leads, forwarded otherwise.
func (a *Paxos) route(p *pend) {
	if a.role == leader && a.ready {
		a.lead(p)
		return
	}
	p.state = pWaiting
	p.fwdTo = -1
	a.fwdQ = append(a.fwdQ, p.req.ID)
	a.forwardPending()
}

// lead handles a request at the leader.
func (a *Paxos) lead(p *pend) {
	id := p.req.ID
	mode := p.req.Opts.Read
	if mode == automaton.ReadDefault {
		mode = a.prm.Read
	}
	read := a.isRead(p.req)
	if read && (mode == automaton.ReadQuorum || mode == automaton.ReadLease) {
		// Everything acknowledged before the read arrived is at or below the
		// highest instance this leader has proposed.
		p.state = pRead
		a.reads[id] = p
		p.readIndex = a.next - 1
		p.round = a.hbRound + 1
		if mode == automaton.ReadLease && a.leaseValid() {
			p.round = 0 // the lease stands in for the confirmation round
		} else {
			a.wantRound(p.round) // sent at the end of the step (sendReadRound)
		}
		a.serveReads()
		return
	}
	if !read {
		if res, ok := a.sm.lookup(id); ok {
			a.answer(id, res)
			return
		}
	}
	if _, ok := a.inLog[id]; ok {
		p.state = pProposed
		return
	}
	if p.state == pQueued || p.state == pLearner {
		return
	}
	if isTransferReq(p.req) {
		a.onTransferLeadership(p)
		return
	}
	if isMemberReq(p.req) {
		a.leadChange(p)
		return
	}
	p.state = pQueued
	a.queue = append(a.queue, id)
	a.propose()
}

// forwardPending forwards waiting requests to the known leader: at once when
// they have not been sent to it yet, and again every four heartbeats (the
// leader deduplicates by request id).
func (a *Paxos) forwardPending() {
	to := a.leaderHint
	if to < 0 || to == a.self || a.role == leader {
		if len(a.fwdQ) > 0 {
			a.fwdQ, a.fwdHint = a.fwdQ[:0], -1 // the next pass is a full one
		}
		return
	}
	var ids []automaton.RequestID
	if to != a.fwdHint {
		// Everything waiting (leader change, step down, tick): a full pass.
		for id, p := range a.pending {
			if p.state == pWaiting && (p.fwdTo != to || p.fwdAge >= 4) {
				ids = append(ids, id)
			}
		}
		automaton.SortRequestIDs(ids)
		a.fwdHint = to
	} else {
		// The same leader as the last pass: only the requests routed since.
		for _, id := range a.fwdQ {
			if p := a.pending[id]; p != nil && p.state == pWaiting && p.fwdTo != to {
				ids = append(ids, id)
			}
		}
	}
	a.fwdQ = a.fwdQ[:0]
	for _, id := range ids {
		p := a.pending[id]
		p.fwdAge, p.fwdTo = 0, to
		req := p.req
		if !service.UsesEnv(a.cfg.Service) {
			req.Env = service.Env{} // nobody reads it: not sent
		}
		// Relayed (automaton.Send.Relayed): the request is the client's and
		// rests on no record of this node, so it does not wait for this
		// node's earlier records (package doc, "Clients, forwarding,
		// exactly-once").
		a.Emit(automaton.Send{To: a.nodes[to], Msg: (&message{Kind: kindForward, Req: req}).marshal(), Relayed: true})
	}
}

func (a *Paxos) onForward(from int, m *message) {
	// The forwarder validated the request (Validator) and parsed a
	// membership change (onMemberRequest); this checks the shape of what
	// the forward carries.
	var bad error
	if isTransferReq(m.Req) {
		bad = checkTransfer(m.Req.Op)
	} else if isMemberReq(m.Req) {
		_, bad = parseChange(m.Req.Op)
	}
	if bad != nil || m.Req.Opts.Read > automaton.ReadLease {
		a.send(from, &message{Kind: kindForwardReply, Req: m.Req, Result: service.Errorf("ERR invalid forwarded request")})
		return
	}
	if !a.isMember() {
		a.send(from, &message{Kind: kindForwardReply, Req: m.Req, Result: a.notMemberError()})
		return
	}
	a.observeTime(m.Req.Env) // the forwarder's arrival time (service.LeaderClock)
	p := a.pending[m.Req.ID]
	if p == nil {
		if !a.isRead(m.Req) {
			if res, ok := a.sm.lookup(m.Req.ID); ok {
				a.send(from, &message{Kind: kindForwardReply, Req: m.Req, Result: res.res, Results: res.results})
				return
			}
		}
		p = &pend{req: m.Req, fwdTo: -1}
		a.pending[m.Req.ID] = p
	}
	seen := false
	for _, r := range p.remote {
		seen = seen || r == from
	}
	if !seen {
		p.remote = append(p.remote, from)
	}
	if p.state == pWaiting {
		if a.role != leader && a.leaderHint == from {
			// Each names the other as the leader (a leadership transfer's
			// old leader hints its target before the target knows): not
			// bounced back at once, which would loop until one learns;
			// forwarded by the tick's pass when the hint changes.
			p.fwdTo = from
			return
		}
		a.route(p)
	}
}

func (a *Paxos) onForwardReply(m *message) {
	if a.pending[m.Req.ID] != nil {
		a.relaying = true // the local answer relays the leader's (reply)
		a.answer(m.Req.ID, outcome{res: m.Result, results: m.Results})
		a.relaying = false
	}
}

// finish answers a request with a single result (an error, a timeout) to
// everyone waiting for it.
func (a *Paxos) finish(id automaton.RequestID, res service.Result) {
	a.answer(id, outcome{res: res})
}

// answer answers a request to everyone waiting for it: its local client and
// the followers that forwarded it.
func (a *Paxos) answer(id automaton.RequestID, o outcome) {
	p := a.pending[id]
	if p == nil {
		return
	}
	delete(a.pending, id)
	delete(a.reads, id)
	if p.state == pSettling {
		a.settling = slices.DeleteFunc(a.settling, func(x automaton.RequestID) bool { return x == id })
	}
	if p.local {
		a.reply(id, o)
	}
	if id.Client == expiryClient {
		a.announceExpired(p, o.res)
	}
	for _, r := range p.remote {
		a.send(r, &message{Kind: kindForwardReply, Req: p.req, Result: o.res, Results: o.results})
	}
}

// reply answers a local client. The answer to a command that instance i's
// execution completed is positioned at i (automaton.Respond.UpTo): it waits
// for this node's slot records up to i, not for its later ones (package
// doc, "Positioned answers"); an answer relayed from the leader's
// ForwardReply waits for none of this node's records
// (automaton.Respond.Relayed); every other answer waits for every record
// before it.
func (a *Paxos) reply(id automaton.RequestID, o outcome) {
	relayed := a.relaying || a.proto.Protocol == BrokenRelayAll
	a.Emit(automaton.Respond{Resp: automaton.Response{ID: id, Result: o.res, Results: o.results}, UpTo: a.answerAt, Relayed: relayed})
}

// isSessionEnd reports whether req ends its client's session
// (automaton.SessionEnd): ordered like a write, answered OK.
func isSessionEnd(req automaton.Request) bool {
	return len(req.Ops) == 0 && req.Txn == nil && automaton.IsSessionEnd(req.Op)
}

// isMemberReq reports whether req is a membership change (a single
// operation of the reserved kind; a group never holds one).
func isMemberReq(req automaton.Request) bool {
	return len(req.Ops) == 0 && req.Txn == nil && automaton.IsMemberOp(req.Op)
}
