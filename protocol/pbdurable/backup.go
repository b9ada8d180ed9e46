package pbdurable

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability"
)

// stateAck is the index an acknowledgement of a state message carries.
const stateAck = ^uint64(0)

// onHeartbeat is HB_HANDLER (Fig. III.3): note the primary; acknowledge
// (the primary's detector counts the acknowledgements).
func (a *PBD) onHeartbeat(from automaton.NodeID, m msg) {
	a.adopt(m.view)
	if m.view != a.view || a.primary {
		return
	}
	a.heard = true
	if a.synced {
		a.send(from, msg{kind: kindAck, view: a.view, index: a.index})
	} else {
		a.send(from, msg{kind: kindJoin, view: a.view})
	}
}

// onUpdate is STATE_HANDLER (Fig. III.3, IV.C.2 the backup side of
// commitA): acknowledge, then apply, in index order.
func (a *PBD) onUpdate(from automaton.NodeID, m msg) {
	a.adopt(m.view)
	if m.view != a.view || a.primary || !a.synced {
		return
	}
	a.heard = true
	if m.index > a.index {
		a.held[m.index] = m.ups
	}
	for {
		ups, ok := a.held[a.index+1]
		if !ok {
			break
		}
		delete(a.held, a.index+1)
		a.index++
		a.send(from, msg{kind: kindAck, view: a.view, index: a.index})
		_ = a.svc.set().Apply(ups)
	}
}

// onState installs the primary's replicated objects (a new backup, or
// every member after a fail-over) and acknowledges it.
func (a *PBD) onState(from automaton.NodeID, m msg) {
	a.adopt(m.view)
	if m.view != a.view || a.primary {
		return
	}
	a.heard = true
	if !a.synced || m.index >= a.index {
		set := a.svc.set()
		for _, p := range set.Proxies() {
			if p.Mechanism() != durability.Replicated {
				p.Init() // not kept at a backup: the empty object
			}
		}
		if m.state != nil {
			_ = a.svc.install(m.state)
		}
		a.index, a.synced = m.index, true
		for i := range a.held {
			if i <= a.index {
				delete(a.held, i)
			}
		}
	}
	a.send(from, msg{kind: kindAck, view: a.view, index: stateAck})
	a.send(from, msg{kind: kindAck, view: a.view, index: a.index})
}
