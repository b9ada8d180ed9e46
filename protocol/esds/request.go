package esds

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// The front end and the request input (the ESDS thesis §4.2.4, Fig. 4.1; the
// replica's receive_{f,r}("request", x), Figs. 4.2 and 4.5).

// Validator implements proto.Validating: the administrative removal,
// groups and transaction steps are refused or served (OnRequest) before
// any service sees them; a request before Start is dropped unvalidated.
func (a *ESDS) Validator(req automaton.Request) service.Service {
	if a.wait == nil || req.Op.Kind == AdminRemove || len(req.Ops) > 0 || req.Txn != nil {
		return nil
	}
	return a.svc
}

// Invalid implements proto.Validating.
func (a *ESDS) Invalid(req automaton.Request, r service.Result) { a.Respond(req.ID, r) }

// OnRequest is the front end's request_c(x), for a request validated
// against the service (Validator) (Fig. 4.1): the front end
// is the node the client reached, and it sends the operation to replicas
// under the send policy (frontend.go). The descriptor x comes from the request's
// options (options.go). A group of operations or a transaction step is
// refused before anything is applied: ESDS orders operations one by one.
func (a *ESDS) OnRequest(req automaton.Request) {
	if a.wait == nil {
		return // not started
	}
	if req.Op.Kind == AdminRemove {
		a.onRemove(req)
		return
	}
	if len(req.Ops) > 0 {
		// The replicas order operations one by one, each by its own label:
		// nothing keeps a group together (the ESDS thesis §4.2.2: one descriptor
		// per operation).
		a.Respond(req.ID, service.Errorf(automaton.ErrNoAtomic, a.proto.Protocol))
		return
	}
	if req.Txn != nil {
		a.Respond(req.ID, service.Errorf(automaton.ErrNoInteractive, a.proto.Protocol))
		return
	}
	id, prev, strict := requestDescriptor(req)
	for _, p := range prev {
		if p == id {
			a.Respond(req.ID, service.Errorf("ERR operation %q lists itself in prev", id))
			return
		}
	}
	x := entry{ID: id, Prev: prev, Strict: strict, Op: req.Op}
	if p, cyc := a.prevCycle(x); cyc {
		a.Respond(req.ID, service.Errorf("ERR operation %q names %q in prev, whose prev sets lead back to it: a cycle never done", id, p))
		return
	}
	a.requestC(req.ID, x)
}

// receive adds a new operation to rcvd_r and queues it for gossip
// (gossip_r[i] ∪= {x}, Fig. 4.5), from a request or from gossip.
func (a *ESDS) receive(o *op) {
	a.arrival++
	o.arrival = a.arrival
	a.ops[o.id] = o
	if !o.label.Set {
		a.waiting = append(a.waiting, o)
		o.inWait = true
	}
	a.newInfo(o)
}
