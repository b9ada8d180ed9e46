package orcaprimary

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// secCopy is a secondary copy held by this node.
type secCopy struct {
	st      service.State
	version uint64
	locked  bool
	since   int // updates received since the last local read (drop statistics)
	reads   int
}

// readCopy serves a read from the local copy, waiting while it is locked.
func (a *Primary) readCopy(key string, c *secCopy, req automaton.Request) {
	if c.locked || !service.Ready(c.st, req.Op) {
		a.waiting[key] = append(a.waiting[key], req)
		return
	}
	a.Respond(req.ID, c.st.Apply(req.Op))
}

// drainWaiting retries the reads waiting at this node for a copy.
func (a *Primary) drainWaiting(key string) {
	reqs := a.waiting[key]
	delete(a.waiting, key)
	for _, r := range reqs {
		if c, ok := a.sec[key]; ok {
			a.readCopy(key, c, r)
		} else if _, fetching := a.fetches[key]; fetching {
			a.waiting[key] = append(a.waiting[key], r)
		} else {
			a.remoteOp(r)
		}
	}
}

// fetch asks the primary for a copy (fetch-object, §3.1; or the copy the
// statistics call for, §3.3).
func (a *Primary) fetch(key string) {
	if _, ok := a.fetches[key]; ok {
		return
	}
	nonce := a.cfg.Rand.Uint64()
	a.fetches[key] = nonce
	a.send(a.primaryOf(key), message{kind: kFetch, key: key, nonce: nonce})
}

// onInstall installs a fetched copy, unless a later write's
// lock-and-update or invalidate overtook it (then it fetches again).
func (a *Primary) onInstall(m message) {
	if n, ok := a.fetches[m.key]; !ok || n != m.nonce {
		return
	}
	delete(a.fetches, m.key)
	if m.version < a.seen(m.key) {
		a.fetch(m.key)
		return
	}
	st := a.cfg.Service.NewState()
	if err := st.Restore(m.state); err != nil {
		return
	}
	a.sec[m.key] = &secCopy{st: st, version: m.version}
	a.see(m.key, m.version)
	a.drainWaiting(m.key)
}

// onLockAndUpdate: §3.2 phase one at a secondary: lock the copy, apply the
// operation, acknowledge, stay locked. A lock-and-update for the next
// version while the copy is still locked at the previous one implies that
// version's unlock (the primary starts a write only after every copy
// acknowledged the previous one, and then sends the unlocks), which is the
// seed's "not serviced until the unlock ... has been handled".
func (a *Primary) onLockAndUpdate(from automaton.NodeID, m message) {
	a.see(m.key, m.version)
	c, ok := a.sec[m.key]
	if !ok {
		a.send(from, message{kind: kAck, key: m.key, version: m.version, has: false})
		return
	}
	if m.version <= c.version {
		a.send(from, message{kind: kAck, key: m.key, version: m.version, has: true})
		return
	}
	if m.version != c.version+1 {
		delete(a.sec, m.key) // missed an update: this copy is stale
		a.send(from, message{kind: kAck, key: m.key, version: m.version, has: false})
		a.drainWaiting(m.key)
		return
	}
	if !a.proto.skipUpdate {
		c.st.Apply(m.req.Op)
	}
	c.version = m.version
	c.locked = !a.proto.earlyUnlock
	c.since++
	a.send(from, message{kind: kAck, key: m.key, version: m.version, has: true})
	if !c.locked {
		a.drainWaiting(m.key)
	}
	if a.dropAfter > 0 && c.since >= a.dropAfter {
		// §3.3: the update overhead exceeds the reads it saves. The
		// primary learns it from the next lock-and-update's ack
		// (has=false): a drop message could overtake a later install of a
		// fresh copy and remove that copy from the copy set.
		delete(a.sec, m.key)
		a.reads[m.key] = 0
		a.drainWaiting(m.key)
	}
}

// onInvalidate: §3.1, a secondary throws its copy away and acknowledges.
func (a *Primary) onInvalidate(from automaton.NodeID, m message) {
	a.see(m.key, m.version)
	if c, ok := a.sec[m.key]; ok && c.version < m.version {
		delete(a.sec, m.key)
		// Guarded reads waiting at the dropped copy go to the primary (or
		// wait for a fetch): left here, nothing would ever retry them.
		a.drainWaiting(m.key)
	}
	a.send(from, message{kind: kAck, key: m.key, version: m.version, has: false})
}

// onUnlock: §3.2 phase two at a secondary.
func (a *Primary) onUnlock(m message) {
	c, ok := a.sec[m.key]
	if !ok || c.version != m.version || !c.locked {
		return
	}
	c.locked = false
	a.drainWaiting(m.key)
}
