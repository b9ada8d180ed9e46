package orcabcast

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/synod-dev/synod/automaton"
)

// sequencer is the first node's second role (seed 004 §4.1): it numbers
// updates, keeps a history for retransmission, and trims it from the
// members' state messages.
type sequencer struct {
	next      uint64 // the next sequence number to assign
	hist      map[uint64]entry
	histLow   uint64 // hist holds the numbers above histLow
	recLow    uint64 // records "m/<n>" exist for the numbers above recLow
	ordered   map[automaton.RequestID]uint64
	delivered map[automaton.NodeID]uint64 // each member's applied count, from its state messages
	snapAt    uint64                      // the number the snapshot record covers
}

// recoverSequencer rebuilds the order from the records (§4.1 leaves the
// sequencer's crash to [21]; see the package doc): the snapshot, then the
// ordered updates after it, each persisted before it was broadcast, so no
// node has applied a number the sequencer does not know.
func (b *Bcast) recoverSequencer(recs map[string][]byte) {
	b.hist = map[uint64]entry{}
	b.ordered = map[automaton.RequestID]uint64{}
	b.delivered = map[automaton.NodeID]uint64{}
	b.ready = true
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
	var seqs []uint64
	for k, raw := range recs {
		n, ok := strings.CutPrefix(k, "m/")
		if !ok {
			continue
		}
		seq, err := strconv.ParseUint(n, 10, 64)
		if err != nil {
			continue
		}
		d, err := header.OpenRecord(raw, "update")
		if err != nil {
			panic(err)
		}
		x := decodeEntry(d)
		if err := d.Done(); err != nil || x.seq != seq {
			panic(fmt.Sprintf("%s: update record %s damaged", Name, k))
		}
		b.hist[seq] = x
		seqs = append(seqs, seq)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for _, seq := range seqs {
		if seq == b.applied+1 {
			b.handle(b.hist[seq])
		}
	}
	b.next = b.applied + 1
	// The history is the contiguous run of records ending at the last
	// number; anything below a hole is of no use and deleted.
	b.histLow = b.applied
	for {
		if _, ok := b.hist[b.histLow]; !ok || b.histLow == 0 {
			break
		}
		b.histLow--
	}
	for _, seq := range seqs {
		if seq <= b.histLow || seq > b.applied {
			delete(b.hist, seq)
			b.emit(automaton.Persist{Key: entryKey(seq), Delete: true})
		}
	}
	b.recLow = b.histLow
	for seq, x := range b.hist {
		b.ordered[x.req.ID] = seq
	}
	b.high = b.applied
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
// broadcasts it (small method) or an accept (large method), and applies it
// here.
func (b *Bcast) order(x entry, large bool) {
	if seq, ok := b.ordered[x.req.ID]; ok {
		// A retransmitted submit: the sender missed the broadcast.
		if h, ok := b.hist[seq]; ok {
			b.send(x.origin, message{kind: kOrdered, n: b.next - 1, x: h})
		}
		return
	}
	if d, ok := b.dedup[x.req.ID.Client]; ok && d.Seq >= x.req.ID.Seq {
		b.send(x.origin, message{kind: kState, n: b.next - 1})
		return
	}
	for _, y := range b.blocked {
		if y.req.ID == x.req.ID {
			return
		}
	}
	x.seq = b.next
	b.next++
	b.hist[x.seq] = x
	b.ordered[x.req.ID] = x.seq
	b.emit(automaton.Persist{Key: entryKey(x.seq), Value: encodeEntryRecord(x)})
	if large {
		b.broadcast(message{kind: kAccept, n: x.seq, x: x})
	} else {
		b.broadcast(message{kind: kOrdered, n: x.seq, x: x})
	}
	b.high = x.seq
	b.handle(x)
	b.retryReads()
	b.maybeSnapshot()
}

// onFetch answers a node that reports a gap or asks to catch up: the
// updates after its applied count from the history, or a snapshot when the
// history no longer reaches back that far.
func (b *Bcast) onFetch(from automaton.NodeID, m message) {
	if !b.isSeq {
		return
	}
	b.noteDelivered(from, m.n)
	high := b.next - 1
	if m.n < b.histLow {
		b.send(from, message{kind: kSnap, n: high, snap: b.snap()})
		return
	}
	if m.n >= high {
		b.send(from, message{kind: kState, n: high})
		return
	}
	for s := m.n + 1; s <= high && s <= m.n+fetchBatch; s++ {
		b.send(from, message{kind: kOrdered, n: high, x: b.hist[s]})
	}
}

// noteDelivered records a member's state message and trims the history
// to what every member has applied, or to max_history.
func (b *Bcast) noteDelivered(from automaton.NodeID, n uint64) {
	if n > b.delivered[from] {
		b.delivered[from] = n
	}
	low := b.next - 1
	for _, id := range b.cfg.Nodes {
		if id != b.cfg.Self && b.delivered[id] < low {
			low = b.delivered[id]
		}
	}
	if last := b.next - 1; last > b.maxHist && last-b.maxHist > low {
		low = last - b.maxHist
	}
	for s := b.histLow + 1; s <= low; s++ {
		delete(b.ordered, b.hist[s].req.ID)
		delete(b.hist, s)
	}
	if low > b.histLow {
		b.histLow = low
	}
}

func (b *Bcast) snap() snapshot {
	return snapshot{seq: b.applied, state: b.st.Snapshot(), dedup: b.dedup, blocked: b.blocked}
}

// maybeSnapshot persists the sequencer's state every snapshot_every
// updates and deletes the update records that neither recovery nor
// retransmission needs any more.
func (b *Bcast) maybeSnapshot() {
	if b.applied-b.snapAt < b.snapEvery {
		return
	}
	b.emit(automaton.Persist{Key: snapKey, Value: encodeSnapRecord(b.snap())})
	b.snapAt = b.applied
	upto := min(b.histLow, b.snapAt)
	for s := b.recLow + 1; s <= upto; s++ {
		b.emit(automaton.Persist{Key: entryKey(s), Delete: true})
	}
	if upto > b.recLow {
		b.recLow = upto
	}
}
