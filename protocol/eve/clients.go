package eve

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Clients (§2.2: "clients sending requests to the current primary
// execution replica"). The node a client reached is the request's origin:
// it forwards the request to the primary it knows, retransmits it every
// tick, complains to the verifiers when it waits two ticks (the primary may
// be down), and answers the client once a decided slot applied the request
// (its own replica's results, or a Reply from an execution replica when the
// origin is a verifier only).

type origin struct {
	pending map[automaton.RequestID]*pendingReq
	epoch   uint64 // the newest epoch this node heard of
}

type pendingReq struct {
	req   automaton.Request
	ticks int
}

// Validator implements proto.Validating.
func (a *Eve) Validator(automaton.Request) service.Service { return a.cfg.Service }

// Invalid implements proto.Validating.
func (a *Eve) Invalid(req automaton.Request, r service.Result) { a.Respond(req.ID, r) }

// OnRequest takes a client's request (origin role), validated against the
// namespace's service (Validator) and here against the state service when
// that is another.
func (a *Eve) OnRequest(req automaton.Request) {
	if res, refused := automaton.RefuseUnsupported(a.proto.Protocol, req); refused {
		a.Respond(req.ID, res)
		return
	}
	if a.stateSvc != a.cfg.Service {
		if err := a.stateSvc.Validate(req.Op); err != nil {
			a.Respond(req.ID, service.Errorf("ERR %v", err))
			return
		}
	}
	if a.ex != nil {
		if res, ok := a.ex.answered(req.ID); ok {
			a.answer(req.ID, res, 0)
			return
		}
	}
	if a.orig.pending[req.ID] != nil {
		return // a retry of a request in progress
	}
	a.orig.pending[req.ID] = &pendingReq{req: req}
	a.send(a.primaryOf(a.epoch()), &message{Kind: kindForward, Req: req, Origin: a.cfg.Self})
}

// answer releases a request's answer to its client; slot is the slot whose
// decision applied it (0: from the duplicate table).
func (a *Eve) answer(id automaton.RequestID, res service.Result, slot uint64) {
	if a.orig.pending[id] == nil && slot != 0 {
		return
	}
	delete(a.orig.pending, id)
	ok := a.ex == nil || slot <= a.ex.applied
	a.stepAnswers = append(a.stepAnswers, answerNote{id: id, slot: slot, ok: ok})
	a.Respond(id, res)
}

// onReply answers a request this verifier-only node forwarded.
func (a *Eve) onReply(m *message) {
	if a.orig.pending[m.ID] != nil {
		a.answer(m.ID, m.Result, 0)
	}
}

// answerFromTable answers pending requests the duplicate table holds
// (applied by a slot this node learned by state transfer, or skipped as
// duplicates).
func (a *Eve) answerFromTable() {
	if a.ex == nil {
		return
	}
	for _, id := range a.pendingIDs() {
		if res, ok := a.ex.answered(id); ok {
			a.answer(id, res, 0)
		}
	}
}

func (a *Eve) pendingIDs() []automaton.RequestID {
	ids := make([]automaton.RequestID, 0, len(a.orig.pending))
	for id := range a.orig.pending {
		ids = append(ids, id)
	}
	automaton.SortRequestIDs(ids)
	return ids
}

// learnEpoch notes a newer epoch; pending requests go to its primary at once.
func (a *Eve) learnEpoch(e uint64) {
	if e <= a.orig.epoch {
		return
	}
	a.orig.epoch = e
	a.reforward()
}

func (a *Eve) reforward() {
	to := a.primaryOf(a.epoch())
	for _, id := range a.pendingIDs() {
		a.send(to, &message{Kind: kindForward, Req: a.orig.pending[id].req, Origin: a.cfg.Self})
	}
}

// originTick retransmits waiting requests and complains about the primary.
func (a *Eve) originTick() {
	if len(a.orig.pending) == 0 {
		return
	}
	complain := false
	for _, p := range a.orig.pending {
		p.ticks++
		complain = complain || p.ticks >= 2
	}
	a.reforward()
	if complain {
		a.sendAll(a.vers, &message{Kind: kindComplain, Epoch: a.epoch()})
	}
}
