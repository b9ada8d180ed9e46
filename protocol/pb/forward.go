package pb

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Clients that reach a node other than the primary (package doc,
// "Clients"): the node forwards the request to the primary it knows, and
// again to each new primary, and relays the answer. The duplicate table at
// the primary makes the resubmissions harmless; this is the seed's
// FAILURE_HANDLER (Fig. III.1, "resubmit every outstanding op"), run by
// the node on behalf of a client that does not subscribe to fail-overs.

// forward takes a client's request to the primary.
func (a *PB) forward(req automaton.Request) {
	if a.fwds[req.ID] != nil {
		a.fwds[req.ID].req = req // a retry of a request under way
		return
	}
	f := &fwd{req: req}
	a.fwds[req.ID] = f
	a.sendForward(f)
}

func (a *PB) sendForward(f *fwd) {
	if p := a.primary(); p != "" && p != a.cfg.Self {
		a.send(p, message{Kind: kindForward, Req: f.req})
	}
}

// reforward resends every forwarded request to a new primary.
func (a *PB) reforward() {
	if a.role == rolePrimary {
		return
	}
	for _, id := range sortedIDs(a.fwds) {
		a.sendForward(a.fwds[id])
	}
}

// onForward serves a forwarded request at the primary; any other node
// drops it (the forwarder resends it to the primary it learns of). The
// forwarder validated it (Validator).
func (a *PB) onForward(from automaton.NodeID, m message) {
	if a.role != rolePrimary || a.collecting {
		return // a collecting primary: the forwarder resends it
	}
	a.serve(m.Req, from)
}

// onReply relays the primary's answer to the client that asked here.
func (a *PB) onReply(m message) {
	if a.fwds[m.ID] == nil {
		return
	}
	delete(a.fwds, m.ID)
	a.respond(m.ID, m.Out)
}

// checkForwards resends forwarded requests every check (a lost forward or
// reply costs one period) and gives up after op_timeout.
func (a *PB) checkForwards() {
	for _, id := range sortedIDs(a.fwds) {
		f := a.fwds[id]
		f.elapsed += a.checking
		if f.elapsed >= a.opTimeout {
			delete(a.fwds, id)
			a.respond(id, outcome{res: service.Fail(synoderr.TryAgain, "no primary answered within %v (a write's outcome is unknown)", a.opTimeout)})
			continue
		}
		a.sendForward(f)
	}
}
