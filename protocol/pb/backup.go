package pb

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
)

// The backups (the Grid Services thesis III.B, Fig. III.3).

// onUpdate is STATE_HANDLER: inject the state change and note the
// notification. Backups acknowledge at once and apply in index order;
// an update after a gap waits in ahead (the network may reorder).
func (a *PB) onUpdate(from automaton.NodeID, m message) {
	if a.view.Less(m.View) {
		return // from a view this node has not heard of yet: its heartbeat comes first
	}
	if m.View.Less(a.view) {
		a.send(from, a.viewMsg(kindStale))
		return
	}
	if from != a.primary() {
		return
	}
	e := entry{index: m.Index, id: m.ID, full: m.Full, payload: m.Payload, out: m.Out, low: m.Low, end: m.End}
	switch a.role {
	case roleJoining:
		a.joinerUpdate(e)
		return
	case rolePrimary, roleRecovering:
		return
	}
	if a.waiting {
		return // the primary resends once it named its members
	}
	a.heard = true
	if m.Stable > a.stable {
		a.stable = m.Stable
	}
	if e.index > a.m.applied && len(a.ahead) < maxAhead {
		if a.ahead == nil {
			a.ahead = map[uint64]entry{}
		}
		a.ahead[e.index] = e
	}
	if !a.drain() {
		return
	}
	if a.batching {
		// One cumulative acknowledgement after the batch message's last
		// message (batch.go).
		a.ackTo, a.ackView = from, a.view
	} else {
		a.send(from, a.ackMsg())
	}
	a.prune()
}

// ackMsg acknowledges the applied entries (a joiner that installed its
// state also asks to become a member, naming its transfer).
func (a *PB) ackMsg() message {
	m := message{Kind: kindAck, View: a.view, Index: a.m.applied, Nonce: a.joinNonce}
	m.Joined = a.awaiting
	return m
}

// drain applies the updates that follow the applied prefix. It returns
// false when an update did not fit (the node then rejoins).
func (a *PB) drain() bool {
	for {
		e, ok := a.ahead[a.m.applied+1]
		if !ok {
			break
		}
		delete(a.ahead, e.index)
		if err := a.m.inject(e); err != nil {
			a.becomeJoining()
			return false
		}
		e.chain = a.m.chain
		a.log = append(a.log, e)
		a.persistEntry(e) // durable before the acknowledgement
	}
	for i := range a.ahead {
		if i <= a.m.applied {
			delete(a.ahead, i)
		}
	}
	return true
}

// onView handles a heartbeat, a new view's announcement, or a stale notice
// (a view later than the one this node sent from). It is HB_HANDLER for
// the current view, and the binding to a new primary for a later one
// (Fig. III.3: the backups "bind to it"; III.A: "the backups agree on a new
// primary").
func (a *PB) onView(from automaton.NodeID, m message) {
	if len(m.Members) == 0 || m.View.IsZero() {
		return
	}
	fromPrimary := from == m.Members[0] && m.Kind != kindStale
	if a.collects() && (m.Kind == kindNewView && fromPrimary || m.Kind == kindStale) && !m.View.Less(a.view) {
		// A primary that collects promises (takeover.go).
		if a.view.Less(m.View) || a.role == roleRecovering {
			a.adoptCollecting(m)
			return
		}
		if m.Kind == kindNewView && m.View == a.view && (a.waiting || a.role == roleJoining) {
			a.heard = a.heard || a.waiting
			a.sendPromise()
		}
		return
	}
	if a.role == roleRecovering {
		if !fromPrimary {
			return
		}
		if !m.View.Less(a.view) {
			a.leaveRecovery() // a live primary: rejoin it
		}
	}
	switch {
	case m.View.Less(a.view):
		if m.Kind != kindStale {
			a.send(from, a.viewMsg(kindStale))
		}
		return
	case m.View == a.view:
		if a.role == rolePrimary || m.Epoch < a.epoch {
			if fromPrimary && a.role != rolePrimary {
				a.heard = true
			}
			return
		}
		if fromPrimary {
			a.heard = true
		}
		a.epoch, a.members = m.Epoch, m.Members
		if a.waiting && fromPrimary && m.Kind == kindHeartbeat {
			a.endWait() // the collection is over (takeover.go)
			return
		}
		if m.Stable > a.stable && a.role == roleBackup {
			a.stable = m.Stable
		}
		a.afterMembers(m)
		return
	}
	// A later view.
	old := a.primary()
	if a.role == rolePrimary {
		a.stepDown()
	}
	in := contains(m.Members, a.cfg.Self)
	keep := a.role == roleBackup && in && !a.awaiting && a.view == m.Prev && a.m.applied <= m.Base && !a.collects()
	a.view, a.prev, a.base, a.epoch, a.members = m.View, m.Prev, m.Base, m.Epoch, m.Members
	if keep {
		// Bind to the new primary: everything this node applied is in its
		// state too (the same old primary's stream, up to m.Base). It
		// sends what is missing when this acknowledgement arrives.
		a.ahead = nil
		a.sv = a.view
		a.heard, a.misses = fromPrimary, 0
		a.joinNonce = 0 // a member of the new view as a backup of the old one
		a.send(a.primary(), a.ackMsg())
	} else if a.role != roleJoining {
		a.becomeJoining()
	} else if a.join.from != a.primary() {
		a.join.reset()
	}
	if a.role == roleJoining && !a.join.asked {
		a.sendJoin()
	}
	if a.primary() != old {
		a.reforward()
	}
}

// afterMembers reacts to a new member list of the current view: a backup
// left out must rejoin, unless it is a joiner that installed the state and
// waits to be added (it asks again).
func (a *PB) afterMembers(m message) {
	if a.role != roleBackup {
		if a.role == roleJoining && a.join.nonce == 0 && !a.join.asked {
			a.sendJoin()
		}
		return
	}
	if contains(a.members, a.cfg.Self) {
		a.awaiting = false
		return
	}
	if a.awaiting {
		a.send(a.primary(), a.ackMsg())
		return
	}
	a.becomeJoining()
	a.sendJoin()
}

// onCheck is FAILURE_DETECTOR, run every rate_checking (package doc,
// "Failure detection"), plus the periodic duties of each role.
func (a *PB) onCheck() {
	a.Emit(automaton.SetTimer{ID: timerCheck, After: a.checking})
	a.promiseSent = false
	switch a.role {
	case rolePrimary:
		a.checkBackups()
	case roleBackup:
		if a.heard {
			a.misses = 0
		} else {
			a.misses++
		}
		a.heard = false
		if r := a.rank(); r >= 1 && !a.awaiting && a.misses >= promoteAfter(r) {
			a.switchToPrimary(r)
			return
		}
		if !a.waiting && !a.awaiting && contains(a.members, a.cfg.Self) {
			// The primary drops a backup silent for backupMisses checks;
			// with no writes to acknowledge, a member says it lives once
			// per check (pb-stall: an idle namespace lost both backups
			// every two checks, and each write then waited for a join).
			a.send(a.primary(), a.ackMsg())
		}
		if a.awaiting && !contains(a.members, a.cfg.Self) {
			// An installed joiner the primary does not make a member (it
			// dropped the transfer, or counts another): it rejoins
			// (package doc, "Joining"; pb-stall).
			a.awaited++
			if a.awaited > joinPatience {
				a.becomeJoining()
				a.sendJoin()
			}
		}
	case roleJoining:
		if !a.join.active && a.primary() != "" {
			a.sendJoin()
		}
		a.join.active, a.join.asked = false, false
	case roleRecovering:
		a.sendReports(true)
		a.elect()
	}
	a.checkForwards()
}

// promoteAfter is how many consecutive silent checks make the backup of
// rank r take over: 1 for the senior backup (Fig. III.3), 3r-2 for the
// others, so that a live senior's announcement always arrives first
// (package doc, "Failure detection").
func promoteAfter(r int) int { return 3*r - 2 }

// switchToPrimary: the backup of rank r takes over (Fig. III.3,
// switch_to_primary and notify_change(FAILURE)). It has applied every entry
// it acknowledged (it applies as it acknowledges); entries beyond a gap
// were never acknowledged and are dropped. The members before it are
// presumed failed; the rest keep their order, so the next one is the new
// senior backup.
func (a *PB) switchToPrimary(r int) {
	suspect := a.primary()
	a.waiting = false
	a.prev = a.view
	a.view = proto.Ballot{Round: a.view.Round + 1, Node: uint32(a.me + 1)}
	a.base = a.m.applied
	a.epoch = 0
	a.members = append([]automaton.NodeID{a.cfg.Self}, a.members[r+1:]...)
	a.ahead = nil
	a.initPrimary()
	for _, n := range a.members[1:] {
		a.peers[n] = &peer{member: true, heard: true, fresh: true}
	}
	a.beginCollect(suspect)
	if a.collecting {
		a.sendHeartbeats(kindNewView) // the promises come back (takeover.go)
		a.finishTakeOver()
		return
	}
	a.sv = a.view
	a.announce()
}

// announce is notify_change(FAILURE) of a node that just became the
// primary: the new view to every node; the requests it was forwarding
// are now its own.
func (a *PB) announce() {
	a.sendHeartbeats(kindNewView)
	a.serveHeld()
}

// serveHeld serves the requests this node was forwarding, now its own.
func (a *PB) serveHeld() {
	for _, id := range sortedIDs(a.fwds) {
		f := a.fwds[id]
		delete(a.fwds, id)
		a.serve(f.req, "")
	}
	a.advance()
}
