package orcaprimary

import (
	"fmt"
	"sort"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/service"
)

// primCopy is a primary copy (the Orca paper §3.1, §3.2): the object, its
// version (writes applied), its copy set, and the write in phase one.
type primCopy struct {
	st      service.State
	version uint64
	copies  map[automaton.NodeID]bool
	dedup   orca.Dedup
	flight  *flight
	queue   []call // writes waiting for the lock (or for their guard)
	reads   []call // reads waiting for the unlock (or for their guard)
	fetchQ  []call // fetch-object requests waiting for the unlock (nonce in version)
	epoch   uint64 // migrations so far (§3.3)
	// writer and streak: the node whose remote writes came last and how
	// many in a row (the statistics that migrate the primary, §3.3).
	writer automaton.NodeID
	streak int
}

type call struct {
	from  automaton.NodeID
	req   automaton.Request
	nonce uint64
}

// ErrStale answers a write whose client had a later write applied first
// (the deduplication table keeps one write per client: orca.Dedup). It is
// not retryable: the client gave up on the write when it sent the next.
const ErrStale = "ERR orca-primary: a later write of this client was applied first; this older one is not applied"

// flight is the write holding the primary's lock.
type flight struct {
	req    automaton.Request
	res    service.Result
	wait   map[automaton.NodeID]bool // secondaries whose acknowledgement is missing
	answer []automaton.NodeID        // where the writer (and its retries) wait
}

func (a *Primary) primCopy(key string) *primCopy {
	c, ok := a.prim[key]
	if !ok {
		c = &primCopy{st: a.cfg.Service.NewState(), copies: map[automaton.NodeID]bool{}, dedup: orca.Dedup{}}
		a.prim[key] = c
	}
	return c
}

func (a *Primary) persist(key string, c *primCopy) {
	r := record{version: c.version, state: c.st.Snapshot(), dedup: c.dedup, epoch: c.epoch}
	for n := range c.copies {
		r.copies = append(r.copies, n)
	}
	sort.Slice(r.copies, func(i, j int) bool { return r.copies[i] < r.copies[j] })
	if c.flight != nil {
		req := c.flight.req
		r.inflight = &req
	}
	a.Emit(automaton.Persist{Key: "o/" + key, Value: r.encode()})
}

// recoverPrimary restores a primary copy; a write that was in phase one
// runs phase one again (secondaries that applied it acknowledge again).
func (a *Primary) recoverPrimary(key string, raw []byte) {
	d, err := header.OpenRecord(raw, "object")
	if err != nil {
		panic(err)
	}
	r := decodeRecord(d)
	if err := d.Done(); err != nil {
		panic(fmt.Sprintf("%s: object record %q: %v", Name, key, err))
	}
	c := a.primCopy(key)
	if err := c.st.Restore(r.state); err != nil {
		panic(fmt.Sprintf("%s: object record %q: %v", Name, key, err))
	}
	c.version, c.dedup, c.epoch = r.version, r.dedup, r.epoch
	for _, n := range r.copies {
		c.copies[n] = true
	}
	if r.inflight != nil {
		c.flight = &flight{req: *r.inflight, res: c.dedup[r.inflight.ID.Client].Res, wait: map[automaton.NodeID]bool{}}
		for n := range c.copies {
			c.flight.wait[n] = true
		}
		a.resendPhaseOne(key, c)
	}
}

func (a *Primary) answer(from automaton.NodeID, key string, id automaton.RequestID, res service.Result) {
	if from == a.cfg.Self {
		a.Respond(id, res)
		return
	}
	a.send(from, message{kind: kReply, key: key, req: automaton.Request{ID: id}, res: res})
}

// primaryRequest executes an operation at the primary copy: a read at once
// unless the copy is locked (§3.1: a reader "will temporarily be blocked"),
// a write under the primary's lock, one at a time (§3: "simultaneous
// write-operations on the same object are serialized by locking the primary
// copy").
func (a *Primary) primaryRequest(from automaton.NodeID, req automaton.Request) {
	key := req.Op.Key
	c := a.primCopy(key)
	if a.cfg.Service.IsRead(req.Op) {
		if c.flight != nil || !service.Ready(c.st, req.Op) {
			c.reads = append(c.reads, call{from: from, req: req})
			return
		}
		a.answer(from, key, req.ID, c.st.Apply(req.Op))
		return
	}
	if d, ok := c.dedup[req.ID.Client]; ok && d.Seq >= req.ID.Seq {
		if c.flight != nil && c.flight.req.ID == req.ID {
			c.flight.answer = append(c.flight.answer, from)
			return
		}
		if d.Seq > req.ID.Seq {
			a.answer(from, key, req.ID, service.Errorf(ErrStale))
			return
		}
		a.answer(from, key, req.ID, d.Res)
		return
	}
	for _, q := range c.queue {
		if q.req.ID == req.ID {
			return
		}
	}
	c.countWrite(from)
	c.queue = append(c.queue, call{from: from, req: req})
	a.startNext(key, c)
}

// startNext takes the lock for the first queued write whose guard holds:
// applies it to the primary copy, persists, and starts phase one (§3.1:
// invalidate every secondary; §3.2: lock-and-update every secondary).
func (a *Primary) startNext(key string, c *primCopy) {
	if c.flight != nil {
		return
	}
	for i, q := range c.queue {
		if d, ok := c.dedup[q.req.ID.Client]; ok && d.Seq >= q.req.ID.Seq {
			// A later write of the same client ran while this one
			// waited (its client gave up on it and moved on): running it
			// now would put the table's entry back to the older write,
			// and a retry of the later one would run it twice
			// (ROBUSTNESS P22). It is answered as stale instead.
			c.queue = append(c.queue[:i:i], c.queue[i+1:]...)
			a.answer(q.from, key, q.req.ID, service.Errorf(ErrStale))
			a.startNext(key, c)
			return
		}
		if !service.Ready(c.st, q.req.Op) {
			continue
		}
		c.queue = append(c.queue[:i:i], c.queue[i+1:]...)
		c.version++
		res := c.st.Apply(q.req.Op)
		c.dedup[q.req.ID.Client] = orca.Done{Seq: q.req.ID.Seq, Res: res}
		c.flight = &flight{req: q.req, res: res, wait: map[automaton.NodeID]bool{}, answer: []automaton.NodeID{q.from}}
		for n := range c.copies {
			c.flight.wait[n] = true
		}
		a.persist(key, c)
		if len(c.flight.wait) == 0 {
			a.finishWrite(key, c)
			return
		}
		a.resendPhaseOne(key, c)
		return
	}
}

func (a *Primary) resendPhaseOne(key string, c *primCopy) {
	if c.flight == nil {
		return
	}
	for _, n := range sortedNodes(c.flight.wait) {
		if a.invalidates(key) {
			a.send(n, message{kind: kInval, key: key, version: c.version})
		} else {
			a.send(n, message{kind: kLockUpd, key: key, version: c.version, req: c.flight.req})
		}
	}
}

// onAck collects phase one's acknowledgements; a stale one from a copy
// still locked at a committed version is answered with its unlock (the
// unlock was lost).
func (a *Primary) onAck(from automaton.NodeID, m message) {
	c, ok := a.prim[m.key]
	if !ok {
		return
	}
	if c.flight != nil && m.version == c.version {
		if !c.flight.wait[from] {
			return
		}
		delete(c.flight.wait, from)
		if !m.has || a.invalidates(m.key) {
			delete(c.copies, from)
		}
		if len(c.flight.wait) == 0 {
			a.finishWrite(m.key, c)
		}
		return
	}
	if m.has && m.version <= c.version && c.copies[from] {
		a.send(from, message{kind: kUnlock, key: m.key, version: m.version})
	}
}

// finishWrite ends phase one: the primary unlocks, sends unlock to every
// secondary (§3.2's second phase), answers the writer, serves the reads and
// fetches that waited, and starts the next write.
func (a *Primary) finishWrite(key string, c *primCopy) {
	f := c.flight
	c.flight = nil
	a.persist(key, c)
	if !a.invalidates(key) {
		for _, n := range sortedNodes(c.copies) {
			a.send(n, message{kind: kUnlock, key: key, version: c.version})
		}
	}
	for _, from := range f.answer {
		a.answer(from, key, f.req.ID, f.res)
	}
	reads := c.reads
	c.reads = nil
	for _, r := range reads {
		a.primaryRequest(r.from, r.req)
	}
	fq := c.fetchQ
	c.fetchQ = nil
	for _, q := range fq {
		a.install(key, c, q.from, q.nonce)
	}
	a.startNext(key, c)
	a.maybeMigrate(key, c)
}

// onFetch: fetch-object (§3.1); blocked while the primary is locked.
func (a *Primary) onFetch(from automaton.NodeID, m message) {
	if a.primaryOf(m.key) != a.cfg.Self || from == a.cfg.Self {
		return
	}
	c := a.primCopy(m.key)
	if c.flight != nil {
		c.fetchQ = append(c.fetchQ, call{from: from, nonce: m.nonce})
		return
	}
	a.install(m.key, c, from, m.nonce)
}

// install adds a node to the copy set (persisted first) and sends it the
// object.
func (a *Primary) install(key string, c *primCopy, to automaton.NodeID, nonce uint64) {
	if !c.copies[to] {
		c.copies[to] = true
		a.persist(key, c)
	}
	a.send(to, message{kind: kInstall, key: key, version: c.version, nonce: nonce, state: c.st.Snapshot()})
}

func sortedNodes(m map[automaton.NodeID]bool) []automaton.NodeID {
	out := make([]automaton.NodeID, 0, len(m))
	for n, ok := range m {
		if ok {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
