package orcaprimary

import (
	"fmt"

	"sort"

	"github.com/synod-dev/synod/automaton"
)

// Migration of the primary copy to a frequent writer (the Orca paper §3.3: "If
// the RTS discovers that an object is written frequently by a machine
// different from the one containing the primary copy, the RTS may decide
// to migrate the primary copy to that machine ... precautions are taken
// for dealing with machines that are unaware of the object's new
// location").
//
// The old primary hands over its whole record (copy, version, copy set,
// deduplication table) with the next epoch and keeps, persisted, a
// forwarding pointer: a remote operation, fetch-object or acknowledgement
// that still reaches it is passed on to the new location with its first
// sender (origin), so the answer goes straight back. Every node that ever
// held the primary copy keeps its pointer, so a chain of them starting at
// the initial placement always ends at the current primary; a node's belief
// (loc) is only a shortcut into that chain.

// moved is a forwarding pointer: the primary copy went to to at epoch;
// pending until to confirms, with the record it was sent.
type moved struct {
	to      automaton.NodeID
	epoch   uint64
	pending bool
	rec     []byte
}

// countWrite keeps the statistics: successive writes from one remote node.
func (c *primCopy) countWrite(from automaton.NodeID) {
	if from == c.writer {
		c.streak++
		return
	}
	c.writer, c.streak = from, 1
}

// maybeMigrate hands the primary copy to the node that wrote it
// migrate_after times in a row, once the copy is idle (no write in phase
// one, nothing queued or waiting).
func (a *Primary) maybeMigrate(key string, c *primCopy) {
	if a.migrateAfter == 0 || c.streak < a.migrateAfter || c.writer == a.cfg.Self || c.writer == "" {
		return
	}
	if c.flight != nil || len(c.queue) > 0 || len(c.reads) > 0 || len(c.fetchQ) > 0 {
		return
	}
	to := c.writer
	r := record{version: c.version, state: c.st.Snapshot(), dedup: c.dedup, epoch: c.epoch + 1}
	for n := range c.copies {
		if n != to {
			r.copies = append(r.copies, n)
		}
	}
	sort.Slice(r.copies, func(i, j int) bool { return r.copies[i] < r.copies[j] })
	delete(a.prim, key)
	a.moved[key] = &moved{to: to, epoch: r.epoch, pending: true, rec: r.encode()}
	// The pointer first: a crash that keeps only one of the two records
	// then leaves the copy here (recovery prefers it to the pointer), not
	// neither (TestHandOverRecordsNewFirst).
	a.persistMoved(key)
	a.Emit(automaton.Persist{Key: "o/" + key, Delete: true})
	a.resendMigrate(key)
}

func (a *Primary) resendMigrate(key string) {
	if mv := a.moved[key]; mv != nil && mv.pending {
		a.send(mv.to, message{kind: kMigrate, key: key, nonce: mv.epoch, state: mv.rec})
	}
}

func (a *Primary) persistMoved(key string) {
	mv := a.moved[key]
	e := header.Record(32 + len(mv.rec))
	e.String(string(mv.to))
	e.Uvarint(mv.epoch)
	e.Bool(mv.pending)
	e.Bytes(mv.rec)
	a.Emit(automaton.Persist{Key: "f/" + key, Value: e.B})
}

func (a *Primary) recoverMoved(key string, raw []byte) {
	d, err := header.OpenRecord(raw, "forwarding pointer")
	if err != nil {
		panic(err)
	}
	mv := &moved{to: automaton.NodeID(d.String()), epoch: d.Uvarint(), pending: d.Bool(), rec: d.BytesCopy()}
	if err := d.Done(); err != nil {
		panic(fmt.Sprintf("%s: forwarding record %q: %v", Name, key, err))
	}
	if _, ok := a.prim[key]; !ok {
		a.moved[key] = mv
	}
}

// forward passes a message for an object whose primary copy left this
// node on to where it went; it reports whether it did.
func (a *Primary) forward(from automaton.NodeID, m message) bool {
	mv, ok := a.moved[m.key]
	if !ok {
		return false
	}
	if _, here := a.prim[m.key]; here {
		return false
	}
	if m.origin == "" {
		m.origin = from
	}
	if mv.to == a.cfg.Self {
		return false
	}
	a.send(mv.to, m)
	return true
}

// onMigrate installs a primary copy handed over by the old primary (an
// older epoch than one seen here is a duplicate: only confirmed).
func (a *Primary) onMigrate(from automaton.NodeID, m message) {
	defer a.send(from, message{kind: kMigrated, key: m.key, nonce: m.nonce})
	if c, ok := a.prim[m.key]; ok && c.epoch >= m.nonce {
		return
	}
	if mv, ok := a.moved[m.key]; ok && mv.epoch >= m.nonce {
		return
	}
	d2, err := header.OpenRecord(m.state, "object")
	if err != nil {
		return
	}
	r := decodeRecord(d2)
	if d2.Done() != nil {
		return
	}
	c := &primCopy{st: a.cfg.Service.NewState(), copies: map[automaton.NodeID]bool{}, dedup: r.dedup, version: r.version, epoch: r.epoch}
	if err := c.st.Restore(r.state); err != nil {
		return
	}
	for _, n := range r.copies {
		c.copies[n] = true
	}
	a.prim[m.key] = c
	a.persist(m.key, c) // the copy before the old pointer's delete, as in maybeMigrate
	if _, ok := a.moved[m.key]; ok {
		delete(a.moved, m.key)
		a.Emit(automaton.Persist{Key: "f/" + m.key, Delete: true})
	}
	delete(a.loc, m.key)
	// This node's secondary copy, fetch and remote operations on the
	// object are now served by its own primary copy.
	delete(a.sec, m.key)
	delete(a.fetches, m.key)
	delete(a.reads, m.key)
	waiting := a.waiting[m.key]
	delete(a.waiting, m.key)
	var mine []automaton.Request
	ids := make([]automaton.RequestID, 0, len(a.remote))
	for id := range a.remote {
		ids = append(ids, id)
	}
	automaton.SortRequestIDs(ids)
	for _, id := range ids {
		if r := a.remote[id]; r.Op.Key == m.key {
			mine = append(mine, r)
			delete(a.remote, id)
		}
	}
	for _, r := range append(mine, waiting...) {
		a.primaryRequest(a.cfg.Self, r)
	}
}

// onMigrated: the new primary has the copy; the pointer stays, no longer
// resent.
func (a *Primary) onMigrated(from automaton.NodeID, m message) {
	if mv, ok := a.moved[m.key]; ok && mv.pending && mv.to == from && mv.epoch == m.nonce {
		mv.pending = false
		mv.rec = nil
		a.persistMoved(m.key)
	}
}
