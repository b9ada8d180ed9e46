package pbdurable

import (
	"encoding/json"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability"
)

// stateAck is the index an acknowledgement of a state message carries.
const stateAck = ^uint64(0)

// onHeartbeat is HB_HANDLER (Fig. III.3): note the primary; acknowledge
// (the primary's detector counts the acknowledgements).
func (a *PBD) onHeartbeat(from automaton.NodeID, m msg) {
	if a.recovering && !m.view.Less(a.view) {
		a.leaveRecovery() // a live primary: join it
	}
	a.adopt(m.view)
	if m.view != a.view || a.primary {
		return
	}
	a.heard = true
	if a.synced {
		a.learnCommit(m.commit)
		a.send(from, msg{kind: kindAck, view: a.view, index: a.index})
	} else {
		a.send(from, msg{kind: kindJoin, view: a.view})
		if !a.promised {
			a.sendPromise()
		}
	}
}

// onUpdate is STATE_HANDLER (Fig. III.3, IV.C.2 the backup side of
// commitA) as the prepare of a two-phase commit (commit.go): hold the
// buffer and acknowledge, in index order; apply what the commit index
// decided.
func (a *PBD) onUpdate(from automaton.NodeID, m msg) {
	if a.recovering {
		return // its heartbeat comes first
	}
	a.adopt(m.view)
	if m.view != a.view || a.primary || !a.synced {
		return
	}
	a.heard = true
	if m.index > a.index {
		a.held[m.index] = prepared{ups: m.ups, db: m.db}
	}
	for {
		if _, ok := a.held[a.index+1]; !ok {
			break
		}
		a.index++
		if a.batching {
			a.ackTo = from // one cumulative acknowledgement at the batch's end
			continue
		}
		a.send(from, msg{kind: kindAck, view: a.view, index: a.index})
	}
	a.learnCommit(m.commit)
}

// learnCommit applies the prepared buffers the primary's commit index
// decided.
func (a *PBD) learnCommit(c uint64) {
	if c > a.commit {
		a.commit = c
	}
	a.applyPrepared(a.commit)
}

// onState installs the primary's replicated objects (a new backup, or
// every member after a fail-over) and acknowledges it.
func (a *PBD) onState(from automaton.NodeID, m msg) {
	if a.recovering && !m.view.Less(a.view) {
		a.leaveRecovery()
	}
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
			_ = a.install(m.state)
		}
		a.index, a.applied, a.dbApplied, a.commit, a.synced = m.index, m.index, 0, m.index, true
		a.held = map[uint64]prepared{}
		a.memView = m.view
	}
	a.send(from, msg{kind: kindAck, view: a.view, index: stateAck})
	a.send(from, msg{kind: kindAck, view: a.view, index: a.index})
}

// stateSnap is a state message's content: the service's objects and
// Replies.
type stateSnap struct {
	Service []byte
	Replies []repliesSnap
}

func (a *PBD) snapshot() []byte {
	svc, _ := a.svc.snapshot()
	b, _ := json.Marshal(stateSnap{Service: svc, Replies: a.svc.replies().snapshot()})
	return b
}

func (a *PBD) install(b []byte) error {
	var s stateSnap
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	a.svc.replies().install(s.Replies)
	return a.svc.install(s.Service)
}
