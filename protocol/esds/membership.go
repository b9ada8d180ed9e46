package esds

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Membership: removing a dead replica so that stability can be reached
// without it (beyond the seed, whose membership is fixed, §4.2.6; see the
// package doc).

// onRemove handles the membership admin request (see the package doc).
func (a *ESDS) onRemove(req automaton.Request) {
	i, ok := a.index[automaton.NodeID(req.Op.Key)]
	switch {
	case !ok:
		a.Respond(req.ID, service.Errorf("ERR %s: %q is not a node of this namespace", AdminRemove, req.Op.Key))
		return
	case !a.isReplica(i):
		a.Respond(req.ID, service.Errorf("ERR %s: %q holds no replica (parameter replicas)", AdminRemove, req.Op.Key))
		return
	case i == a.self:
		a.Respond(req.ID, service.Errorf("ERR %s: a replica cannot remove itself (ask another node)", AdminRemove))
		return
	}
	a.setRemoved(a.removed | 1<<i)
	a.Respond(req.ID, service.OK())
}

func (a *ESDS) setRemoved(m uint64) {
	m &^= a.bit() // nobody can remove us from our own point of view
	m &= a.all
	if m == a.removed {
		return
	}
	a.removed = m
	a.membersDirty = true
	// Stability is computed over the members: it may hold now for any operation.
	for _, o := range a.sortedOps() {
		a.checkSolid(o)
	}
}
