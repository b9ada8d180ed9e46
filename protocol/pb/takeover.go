package pb

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
)

// Take-overs from a live primary (package doc, "Take-overs from a live
// primary"). The Grid Services thesis's switch_to_primary (III.A problem
// 3, Fig. III.3) assumes a perfect failure detector: the senior backup
// takes over after one silent check period, and the primary drops a
// backup silent for two. Under a slow disk both happen to live nodes
// (the primary's heartbeats wait behind its own fsyncs), and together
// they lose writes: the old primary drops the backups it stopped hearing
// and answers alone, and the new primary's state lacks those answers.
// Two rules close it (decision, the seed being silent; the same as
// protocol/pbdurable's takeover.go):
//
//   - A write is answered only once at least one synced backup holds it
//     (advance): a primary with no member backup waits until one joins.
//   - A new primary serves only once every node but its suspected
//     predecessor has adopted its view (persisted: the node then stops
//     acknowledging the old view) and sent a promise, the state it holds
//     (its state's view, applied count and image); it installs the latest
//     state reported (state view, then applied count) and keeps as
//     backups only the nodes whose state is a prefix of it.

// collects reports whether take-overs collect promises and answers wait
// for a backup (not in the broken variant, nor on a single node).
func (a *PB) collects() bool {
	return !a.proto.soloTakeOver && len(a.cfg.Nodes) > 1
}

// hasBackup reports whether the primary may count an entry as committed:
// at least one member backup acknowledges (rule 1), unless it does not
// collect.
func (a *PB) hasBackup() bool {
	if !a.collects() {
		return true
	}
	for _, p := range a.peers {
		if p.member {
			return true
		}
	}
	return false
}

// beginCollect starts a take-over's collection of promises (the Grid
// Services thesis III.B, switch_to_primary): the suspect is the primary
// of the view being left.
func (a *PB) beginCollect(suspect automaton.NodeID) {
	if !a.collects() {
		return
	}
	a.collecting, a.promises, a.suspect = true, map[automaton.NodeID]message{}, suspect
	if suspect == a.cfg.Self {
		a.suspect = ""
	}
}

// onPromise: a node adopted this new primary's view and reports the
// state it holds (switch_to_primary's collection, package doc).
func (a *PB) onPromise(from automaton.NodeID, m message) {
	if a.role != rolePrimary || !a.collecting || m.View != a.view {
		return
	}
	if _, ok := a.pos[from]; !ok {
		return
	}
	a.promises[from] = m
	a.finishTakeOver()
}

// finishTakeOver makes the new primary serve once every node but the
// suspect promised: it installs the latest state reported, keeps as
// backups the members whose state is a prefix of it, announces the
// member list (a heartbeat: the collection is over) and serves.
func (a *PB) finishTakeOver() {
	for _, n := range a.cfg.Nodes {
		if n == a.cfg.Self || n == a.suspect {
			continue
		}
		if _, ok := a.promises[n]; !ok {
			return
		}
	}
	best, bv, bi := automaton.NodeID(""), a.sv, a.m.applied
	for _, n := range a.cfg.Nodes {
		m, ok := a.promises[n]
		if !ok || !m.Joined {
			continue
		}
		if bv.Less(m.SV) || (m.SV == bv && m.Index > bi) {
			best, bv, bi = n, m.SV, m.Index
		}
	}
	if best != "" {
		m, err := decodeMachine(a.cfg.Service, a.promises[best].Data)
		if err != nil || m.applied != bi {
			panic("pb: a promised state does not decode: " + best)
		}
		a.m = m
		a.log, a.logStart = nil, m.applied
		a.persistImage()
	}
	members := []automaton.NodeID{a.cfg.Self}
	for _, n := range a.members[1:] {
		if m, ok := a.promises[n]; ok && m.Joined && m.SV == bv && m.Index <= bi {
			members = append(members, n)
		}
	}
	a.collecting, a.promises, a.suspect = false, nil, ""
	a.members = members
	a.base, a.sv = a.m.applied, a.view
	a.epoch++
	a.peers = map[automaton.NodeID]*peer{}
	for _, n := range a.members[1:] {
		a.peers[n] = &peer{member: true, heard: true, fresh: true}
	}
	a.committed, a.stable = 0, 0
	a.lastCheck = a.m.applied
	a.sendHeartbeats(kindHeartbeat)
	a.serveHeld()
}

// sendPromise tells the primary of this node's view the state it holds,
// once per check period while it waits (its state's view, applied
// count and image; none for a node without a state).
func (a *PB) sendPromise() {
	p := a.primary()
	if p == "" || p == a.cfg.Self || a.promiseSent {
		return
	}
	a.promiseSent = true
	m := message{Kind: kindPromise, View: a.view}
	if a.m != nil && a.role != roleJoining {
		m.Joined, m.SV, m.Index, m.Data = true, a.sv, a.m.applied, a.m.encode()
	}
	a.send(p, m)
}

// adoptCollecting: this node learned of a later view whose primary
// collects promises (a newview, or a stale notice). It keeps its state
// (a primary steps down into it) and waits, acknowledging nothing, until
// the new primary names its members; a node without a state stays a
// joiner.
func (a *PB) adoptCollecting(m message) {
	old := a.primary()
	if a.role == rolePrimary {
		a.stepDownKeep()
	}
	if a.role == roleRecovering {
		a.reports = nil
		if a.m == nil {
			a.becomeJoining()
		} else {
			a.role = roleBackup
		}
	}
	a.view, a.prev, a.base, a.epoch, a.members = m.View, m.Prev, m.Base, m.Epoch, m.Members
	a.promiseSent = false
	if a.role == roleBackup {
		a.waiting, a.awaiting = true, false
		a.ahead = nil
		a.heard, a.misses = m.Kind != kindStale, 0
	} else if a.join.from != a.primary() {
		a.join.reset()
	}
	if m.Kind == kindNewView {
		a.sendPromise()
	}
	if a.primary() != old {
		a.reforward()
	}
}

// endWait: the new primary of this node's view finished its collection
// and names its members. A member's state is a prefix of the primary's,
// which sends it what it lacks; any other node rejoins.
func (a *PB) endWait() {
	a.waiting = false
	if !contains(a.members, a.cfg.Self) {
		a.becomeJoining()
		a.sendJoin()
		return
	}
	a.sv = a.view
	a.heard, a.misses = true, 0
	a.joinNonce = 0 // a member of the new view by its promise, not a transfer
	a.send(a.primary(), a.ackMsg())
}

// stepDownKeep is stepDown for a collecting successor: the old primary
// keeps its state (every write it answered is in it) to report it.
func (a *PB) stepDownKeep() {
	a.stepDownForward()
	a.role = roleBackup
	a.peers, a.inflight, a.waiters = nil, nil, nil
	a.ahead = nil
}

// better reports whether state (sv, i) is later than (bv, bi).
func better(sv proto.Ballot, i uint64, bv proto.Ballot, bi uint64) bool {
	return bv.Less(sv) || (sv == bv && i > bi)
}

// heartbeatKind is what the primary's heartbeats are: a newview while it
// collects promises (every node that has not promised yet does), a
// heartbeat once it serves (the member list it names is final).
func (a *PB) heartbeatKind() byte {
	if a.collecting {
		return kindNewView
	}
	return kindHeartbeat
}
