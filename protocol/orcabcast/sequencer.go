package orcabcast

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/synod-dev/synod/automaton"
)

// sequencer is the role of the node that owns the current ballot (the Orca paper
// §4.1; at first the first node): it numbers updates, waits until r+1
// nodes hold each one before it lets them be delivered ([21]'s resilience
// degree, see the package doc), keeps a history for retransmission, and
// trims it from the members' state messages.
type sequencer struct {
	next      uint64 // the next sequence number to assign
	ordered   map[automaton.RequestID]uint64
	delivered map[automaton.NodeID]uint64 // each member's applied count, from its state messages
	acks      map[automaton.NodeID]uint64 // each member's held count in this ballot, from its acks
}

// recoverRecords rebuilds a node's state from its records at start: the
// promised ballot, the snapshot, and the updates it held after it (each
// persisted before it was broadcast or acknowledged). Nothing above the
// snapshot is applied: whether it was delivered is learnt from the
// sequencer (or from the election).
func (b *Bcast) recoverRecords(recs map[string][]byte) {
	if raw, ok := recs[ballotKey]; ok {
		d, err := header.OpenRecord(raw, "ballot")
		if err != nil {
			panic(err)
		}
		b.ballot = d.Uvarint()
		if err := d.Done(); err != nil {
			panic(fmt.Sprintf("%s: ballot record: %v", Name, err))
		}
	}
	if raw, ok := recs[snapKey]; ok {
		d, err := header.OpenRecord(raw, "snapshot")
		if err != nil {
			panic(err)
		}
		s := decodeSnapshot(d)
		if err := d.Done(); err != nil {
			panic(fmt.Sprintf("%s: snapshot record: %v", Name, err))
		}
		if err := b.st.Restore(s.state); err != nil {
			panic(fmt.Sprintf("%s: snapshot record: %v", Name, err))
		}
		b.applied, b.dedup, b.blocked, b.snapAt = s.seq, s.dedup, s.blocked, s.seq
	}
	keys := make([]string, 0, len(recs))
	for k := range recs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		n, ok := strings.CutPrefix(k, "m/")
		if !ok {
			continue
		}
		seq, err := strconv.ParseUint(n, 10, 64)
		if err != nil {
			continue
		}
		d, err := header.OpenRecord(recs[k], "update")
		if err != nil {
			panic(err)
		}
		x := decodeEntry(d)
		if err := d.Done(); err != nil || x.seq != seq {
			panic(fmt.Sprintf("%s: update record %s damaged", Name, k))
		}
		if seq <= b.applied {
			b.Emit(automaton.Persist{Key: k, Delete: true})
			continue
		}
		b.log[seq] = x
		b.high = max(b.high, seq)
	}
	b.logLow, b.recLow = b.applied, b.applied
	b.commit, b.commitBal = b.applied, b.ballot
}

// onSubmit orders an update a sender sent (small method) or broadcast
// (large method); the submit carries the sender's state (piggybacked).
func (b *Bcast) onSubmit(from automaton.NodeID, m message) {
	if !b.isSeq {
		return
	}
	b.noteDelivered(from, m.n)
	b.order(m.x, m.kind == kData)
}

// order assigns the next global number to an update, persists it, then
// broadcasts it (small method) or an accept (large method). It is
// delivered once r+1 nodes hold it (advanceCommit).
func (b *Bcast) order(x entry, large bool) {
	if seq, ok := b.ordered[x.req.ID]; ok {
		// A retransmitted submit: the sender missed the broadcast.
		if h, ok := b.log[seq]; ok {
			h.bal = b.ballot
			b.send(x.origin, message{kind: kOrdered, bal: b.ballot, n: b.next - 1, c: b.commit, x: h})
		}
		return
	}
	if d, ok := b.dedup[x.req.ID.Client]; ok && d.Seq >= x.req.ID.Seq {
		b.send(x.origin, message{kind: kState, bal: b.ballot, n: b.next - 1, c: b.commit})
		return
	}
	for _, y := range b.blocked {
		if y.req.ID == x.req.ID {
			return
		}
	}
	x.seq, x.bal = b.next, b.ballot
	b.next++
	b.log[x.seq] = x
	b.ordered[x.req.ID] = x.seq
	b.Emit(automaton.Persist{Key: entryKey(x.seq), Value: encodeEntryRecord(x)})
	if large {
		b.broadcast(message{kind: kAccept, bal: b.ballot, n: x.seq, c: b.commit, x: x})
	} else {
		b.broadcast(message{kind: kOrdered, bal: b.ballot, n: x.seq, c: b.commit, x: x})
	}
	b.high = x.seq
	b.advanceCommit()
}

// onAck counts a member's acknowledgement ([21]: the sequencer waits for r
// members to hold an update before it may be delivered).
func (b *Bcast) onAck(from automaton.NodeID, m message) {
	if !b.isSeq {
		return
	}
	if m.n > b.acks[from] {
		b.acks[from] = m.n
	}
	b.advanceCommit()
}

// advanceCommit moves the commit point to the highest number that r+1
// nodes (this one included) hold in this ballot, delivers up to it here
// and tells the members.
func (b *Bcast) advanceCommit() {
	held := []uint64{b.next - 1}
	for _, n := range b.cfg.Nodes {
		if n != b.cfg.Self {
			held = append(held, min(b.acks[n], b.next-1))
		}
	}
	sort.Slice(held, func(i, j int) bool { return held[i] > held[j] })
	c := held[b.resilience]
	if c <= b.commit {
		return
	}
	b.commit = c
	b.broadcast(message{kind: kCommit, bal: b.ballot, n: b.next - 1, c: c})
	b.drain()
}

// onFetch answers a node that reports a gap or asks to catch up: the
// updates after its applied count from the history (stamped with this
// ballot: they are chosen, so proposing them again is safe), or a snapshot
// when the history no longer reaches back that far.
func (b *Bcast) onFetch(from automaton.NodeID, m message) {
	if !b.isSeq {
		return
	}
	b.noteDelivered(from, m.n)
	high := b.next - 1
	if m.n < b.logLow {
		b.send(from, message{kind: kSnap, bal: b.ballot, n: high, c: b.commit, snap: b.snap()})
		return
	}
	if m.n >= high {
		b.send(from, message{kind: kState, bal: b.ballot, n: high, c: b.commit})
		return
	}
	for s := m.n + 1; s <= high && s <= m.n+fetchBatch; s++ {
		x := b.log[s]
		x.bal = b.ballot
		b.send(from, message{kind: kOrdered, bal: b.ballot, n: high, c: b.commit, x: x})
	}
}

// noteDelivered records a member's state message and trims the history
// to what every member has applied, or to max_history.
func (b *Bcast) noteDelivered(from automaton.NodeID, n uint64) {
	if n > b.delivered[from] {
		b.delivered[from] = n
	}
	low := b.applied
	for _, id := range b.cfg.Nodes {
		if id != b.cfg.Self && b.delivered[id] < low {
			low = b.delivered[id]
		}
	}
	b.trim(low)
}

// trim drops the history at and below low (never above the applied
// count; at most max_history applied updates are kept).
func (b *Bcast) trim(low uint64) {
	if b.applied > b.maxHist && b.applied-b.maxHist > low {
		low = b.applied - b.maxHist
	}
	low = min(low, b.applied)
	for s := b.logLow + 1; s <= low; s++ {
		if b.ordered != nil {
			delete(b.ordered, b.log[s].req.ID)
		}
		delete(b.log, s)
	}
	if low > b.logLow {
		b.logLow = low
	}
}

func (b *Bcast) snap() snapshot {
	return snapshot{seq: b.applied, state: b.st.Snapshot(), dedup: b.dedup, blocked: b.blocked}
}

// maybeSnapshot persists the node's state every snapshot_every updates
// and deletes the update records that neither recovery nor retransmission
// needs any more.
func (b *Bcast) maybeSnapshot() {
	if b.applied-b.snapAt < b.snapEvery {
		return
	}
	b.Emit(automaton.Persist{Key: snapKey, Value: encodeSnapRecord(b.snap())})
	b.snapAt = b.applied
	upto := min(b.logLow, b.snapAt)
	for s := b.recLow + 1; s <= upto; s++ {
		b.Emit(automaton.Persist{Key: entryKey(s), Delete: true})
	}
	if upto > b.recLow {
		b.recLow = upto
	}
}
