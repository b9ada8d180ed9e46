package esds

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// The front end and the request input (seed 000 §4.2.4, Fig. 4.1; the
// replica's receive_{f,r}("request", x), Figs. 4.2 and 4.5).

// receiveRequest is the front end's request_c(x) (Fig. 4.1) and the local
// replica's receive_{f,r}("request", x) (Figs. 4.2, 4.5): the front end is
// the node the client reached, and it submits the operation to its own
// replica (seed 000 §4.2.4). The descriptor x comes from the request's
// options (options.go). A group of operations or a transaction step is
// refused before anything is applied: ESDS orders operations one by one.
func (a *ESDS) receiveRequest(req automaton.Request) {
	if a.ops == nil {
		return // not started
	}
	if req.Op.Kind == AdminRemove {
		a.onRemove(req)
		return
	}
	if len(req.Ops) > 0 {
		// The replicas order operations one by one, each by its own label:
		// nothing keeps a group together (seed 000 §4.2.2: one descriptor
		// per operation).
		a.respond(req.ID, service.Errorf(automaton.ErrNoAtomic, a.proto.name))
		return
	}
	if req.Txn != nil {
		a.respond(req.ID, service.Errorf(automaton.ErrNoInteractive, a.proto.name))
		return
	}
	if err := a.svc.Validate(req.Op); err != nil {
		a.respond(req.ID, service.Errorf("ERR %v", err))
		return
	}
	id, prev, strict := requestDescriptor(req)
	for _, p := range prev {
		if p == id {
			a.respond(req.ID, service.Errorf("ERR operation %q lists itself in prev", id))
			return
		}
	}
	if a.gcd.has(id) {
		if res, ok := a.results[id]; ok {
			a.respond(req.ID, res)
		} else {
			a.respond(req.ID, service.Errorf("ERR operation %q is stable and its value is no longer kept", id))
		}
		return
	}
	o := a.ops[id]
	if o == nil {
		o = &op{id: id, prev: append([]string(nil), prev...), strict: strict, sop: req.Op}
		a.receive(o)
	}
	a.pending[id] = append(a.pending[id], req.ID)
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
