package esds

import (
	"slices"
	"sort"
	"sync/atomic"

	"github.com/synod-dev/synod/automaton"
)

// The reliable stream layer under incremental gossip (the ESDS thesis §4.3.1's
// remark and §6.2: "explicit sequencing of gossip messages combined with
// retransmission and removal of duplicates"). One numbered stream per
// ordered pair of replicas carries gossip_r[r'] (Fig. 4.5) in the order it
// was queued; a message carries a range of positions and acknowledges the
// reverse stream; the sender retransmits the unacknowledged window; the
// receiver applies contiguous prefixes only, so that every prefix it applies
// is the sender's state at one moment (see the package doc, "What a stream
// position says"). Incarnations: a peer's restart starts new streams both
// ways.

// qent is one position of an outgoing stream: what this replica knew about
// the operation when the position was queued (the flags and label of its
// entry; the descriptor, which never changes, is read when sending). It is
// sent as it is, however often, so that every prefix of the stream is this
// replica's state at some past moment (see the package doc).
type qent struct {
	id    string
	flags byte // flagGone: collected when queued
	label Label
	// sp is the stamp a message ending at this position carries
	// (stability=prefix; stable_prefix.go stampFor).
	sp Label
	// o is the operation when it was live at queueing (nil: collected):
	// sending and acknowledging read it instead of looking id up in the
	// operation table (o.gone once collected since; ids never return).
	o *op
}

// live returns the position's operation while it is live (a.ops[q.id]).
func (q *qent) live() *op {
	if q.o == nil || q.o.gone {
		return nil
	}
	return q.o
}

// peer is the gossip stream state towards (and from) one other replica.
type peer struct {
	// Outgoing stream (optimised variant).
	stream uint64
	queue  []qent // queue[k] has sequence number acked+1+k
	// qbase is queue's backing array from its first slot (push): the
	// acknowledged head leaves room there, which push reuses.
	qbase    []qent
	acked    uint64
	sentUpTo uint64 // next to send is sentUpTo+1 (back to acked on retransmission)
	hiSent   uint64 // highest position ever sent on this stream
	lastRetx int
	// (The live operations whose descriptor the peer has acknowledged on
	// this stream, whose later entries are sent bare (flagBare), have the
	// peer's bit in op.has.)
	// What we know of the peer: its incarnation, and incarnations it left.
	inc     uint64
	retired map[uint64]bool
	// Incoming stream from the peer.
	inStream uint64
	inNext   uint64 // next sequence number expected
	ackDue   bool
	// fullIn: the last message merged from the peer carried a full batch
	// (its stream is backlogged: acknowledge at the drain, onDrain).
	fullIn bool
	// stability=prefix (stable_prefix.go): spSent is the highest stamp sent
	// on our stream to the peer; stamp the highest adopted from its stream
	// (every operation labelled at most stamp is stable at the peer).
	spSent, stamp Label
}

// newInfo queues o for gossip to every peer (gossip_r[i] ∪= {x}) when what
// this replica's gossip says about it has changed since it was last queued:
// its label (done here), or its being stable here (Fig. 4.5's R, D, L, S for
// x). News that changes none of these (x done at another replica, stable at
// every member) queues nothing: the seed's gossip does not carry it (see the
// package doc, "Gossip: one position per change of what is said").
func (a *ESDS) newInfo(o *op) {
	if a.unopt || a.peers == nil {
		return
	}
	if a.merging {
		a.held = append(a.held, o)
		return
	}
	f := a.flagsOf(o) &^ flagAll
	if a.spPrefix {
		// Stable here travels as the messages' stamp (stable_prefix.go);
		// a position's flagSolid still says it when set at queueing.
		f &^= flagSolid
	}
	if o.qOK && o.qFlags == f && o.qLabel == o.label {
		return
	}
	o.qOK, o.qFlags, o.qLabel = true, f, o.label
	for j := range a.peers {
		if j != a.self && a.isReplica(j) {
			a.enqueueOp(j, o.id, o)
		}
	}
}

// enqueue appends to j's stream what this replica knows about id now. The
// stream's last position, if it has never been sent, is updated instead:
// nothing was queued after it, so it still marks a moment of this replica's
// state. Any earlier position keeps what it said (see the package doc).
func (a *ESDS) enqueue(j int, id string) { a.enqueueOp(j, id, a.ops[id]) }

// enqueueOp is enqueue with id's live operation o (nil: collected).
func (a *ESDS) enqueueOp(j int, id string, o *op) {
	p := &a.peers[j]
	q := qent{id: id, flags: flagGone}
	if o != nil {
		q.flags, q.o = a.flagsOf(o), o // entryOf's flags and label, without the descriptor
		if o.label.Set {
			q.label = o.label
		}
	}
	if a.spPrefix {
		q.sp = a.stampFor(o, q.label)
	}
	if n := len(p.queue); n > 0 && p.acked+uint64(n) > p.hiSent && p.queue[n-1].id == id {
		p.queue[n-1] = q
		return
	}
	p.push(q)
}

// push appends q to the queue. The acknowledged head is cut off the
// front (acknowledged), so a queue that is never empty under load used to
// reach its array's end and be copied into a new, larger one again and
// again (issue 28, session 54: a tenth of the bytes an ESDS put
// allocated at 64 clients). When half of the array or more lies free
// before the queue, the queue moves down to its start instead.
func (p *peer) push(q qent) {
	if n := len(p.queue); n == cap(p.queue) && 2*n <= len(p.qbase) {
		b := p.qbase[:n]
		copy(b, p.queue)
		clear(p.qbase[n:]) // no stale entry keeps an operation alive
		p.queue = b
	}
	c := cap(p.queue)
	p.queue = append(p.queue, q)
	if cap(p.queue) != c {
		p.qbase = p.queue[:cap(p.queue)] // a new array
	}
}

// resetStream starts a new stream to peer j carrying every operation.
func (a *ESDS) resetStream(j int) {
	p := &a.peers[j]
	p.stream = a.cfg.Rand.Uint64() | 1
	p.queue, p.qbase, p.acked, p.sentUpTo, p.hiSent, p.lastRetx = nil, nil, 0, 0, 0, a.tick
	p.spSent = Label{}
	for _, o := range a.ops {
		o.has &^= 1 << j
	}
	if a.unopt {
		return
	}
	// Label order (then arrival): a done operation never precedes one done
	// before it, which the receiver's stability rule relies on.
	for _, o := range a.sortedOps() {
		a.enqueueOp(j, o.id, o)
	}
	gone := make([]string, 0, len(a.goneQ))
	for id := range a.goneQ {
		gone = append(gone, id)
	}
	sort.Strings(gone)
	for _, id := range gone {
		a.goneQ[id] |= 1 << j
		a.enqueue(j, id)
	}
}

// sendStream sends the next part of the stream to j (incremental gossip with
// explicit sequencing, retransmission and duplicate removal: seed §6.2).
func (a *ESDS) sendStream(j int) {
	p := &a.peers[j]
	if p.sentUpTo > p.acked && a.tick-p.lastRetx >= a.retxTicks {
		p.sentUpTo = p.acked // retransmit the unacknowledged window
	}
	if p.sentUpTo == p.acked {
		p.lastRetx = a.tick
	}
	end := p.acked + uint64(len(p.queue))
	if p.sentUpTo >= end && a.stampDue(j) {
		a.queueStamp(j) // stable_prefix.go
		end = p.acked + uint64(len(p.queue))
	}
	if p.sentUpTo >= end && !p.ackDue {
		return
	}
	m := message{Kind: kindStream, Inc: a.inc, Removed: a.removed, Stream: p.stream,
		From: p.sentUpTo + 1, To: p.sentUpTo, AckStream: p.inStream, Entries: a.entBuf[:0]}
	if p.inNext > 0 {
		m.AckSeq = p.inNext - 1
	}
	m.To = min(end, p.sentUpTo+a.streamWindow(end-p.sentUpTo))
	// The receiver merges a message as a whole before it acts on it, so an
	// operation queued at several of its positions needs only its last
	// entry (which says at least what the earlier ones said). Built
	// backwards, then reversed.
	if a.seen == nil {
		a.seen = map[string]bool{}
	}
	clear(a.seen)
	for s := m.To; s > p.sentUpTo; s-- {
		q := p.queue[s-p.acked-1]
		if a.seen[q.id] {
			continue
		}
		a.seen[q.id] = true
		o := q.live()
		switch {
		case o == nil:
			// Collected since (or when) queued: stable at every member,
			// the receiver included, which therefore needs nothing else
			// first (see the package doc). Only "gone" can be said
			// without the descriptor.
			if a.gcd.has(q.id) {
				m.Entries = append(m.Entries, entry{ID: q.id, Flags: flagGone})
			}
		case o.has&(1<<j) != 0:
			m.Entries = append(m.Entries, entry{ID: q.id, Flags: q.flags | flagBare, Label: q.label})
		default:
			m.Entries = append(m.Entries, entry{ID: q.id, Prev: o.prev, Strict: o.strict, Op: o.sop, Flags: q.flags, Label: q.label})
		}
	}
	slices.Reverse(m.Entries)
	if a.spPrefix {
		m.Stable = a.stampOf(j, m.To, end)
	}
	p.sentUpTo = m.To
	if p.hiSent < m.To {
		p.hiSent = m.To
	}
	p.ackDue, p.fullIn = false, false
	a.send(j, m.marshal())
	// The entries are encoded: their slice is the next message's
	// (grown entry by entry from nil, it was a tenth of the bytes an
	// ESDS put allocated at 64 clients; issue 28, session 54).
	clear(m.Entries)
	a.entBuf = m.Entries[:0]
}

// The stream's cadence (parameter drain; package doc, Stream cadence). A
// tick sends each stream one message of at most batch positions, so a
// stream carries batch positions per gossip interval; a load that queues
// more falls behind without bound. A stream that still has a full
// message's worth of positions unsent after a send, and at most
// drainInflight batches unacknowledged, sends its next message at the
// drain timer, drain after the send, instead of waiting for the tick:
// the receiver merges messages of the same size, more often. A stream
// whose peer's last message was full acknowledges it at the drain too,
// so that the peer's window opens again before its next tick. Below a
// full batch nothing changes (the simulations never reach one: their
// schedules are as before).
const drainInflight = 2

// drainSends counts the messages sent at the drain timer (for the tests
// that show the path exercised).
var drainSends atomic.Int64

// drainDue reports whether stream j sends at the drain timer.
func (a *ESDS) drainDue(j int) bool {
	if j == a.self || a.removed&(1<<j) != 0 || !a.isReplica(j) {
		return false
	}
	p := &a.peers[j]
	end := p.acked + uint64(len(p.queue))
	b := uint64(a.batch)
	return end-p.sentUpTo >= min(b, drainAt) && p.sentUpTo-p.acked < drainInflight*b || p.ackDue && p.fullIn
}

// drainAt: a stream with at least min(batch, drainAt) positions unsent is
// due at the drain (drainDue; package doc, Stream cadence).
const drainAt = 128

// armDrain sets the drain timer when some stream is due at it.
func (a *ESDS) armDrain() {
	if a.drainOff || a.drainSet || a.unopt || a.simple || a.gossipOff || a.feOnly || a.peers == nil {
		return
	}
	for j := range a.peers {
		if a.drainDue(j) {
			a.drainSet = true
			a.Emit(automaton.SetTimer{ID: timerDrain, After: a.drainIvl})
			return
		}
	}
}

// onDrain sends the next message of every stream due (drainDue).
func (a *ESDS) onDrain() {
	a.drainSet = false
	if a.unopt || a.simple || a.gossipOff || a.feOnly || a.peers == nil {
		return
	}
	for j := range a.peers {
		if a.drainDue(j) {
			a.sendStream(j)
			drainSends.Add(1)
		}
	}
	a.armDrain()
}

// streamWindow is how many positions of a backlog of n unsent ones the
// next message carries: batch, or, once more than backlogAt batches are
// queued, the whole backlog up to backlogMax batches. The receiver
// merges a message whole, and the message carries one entry per
// operation (its last position's), so a wide window merges each
// operation once where batch-sized messages merged it once per position
// (an operation gets several: done here, done elsewhere, stable here,
// stable everywhere). See the package doc ("Gossip backlog", issue 18).
func (a *ESDS) streamWindow(n uint64) uint64 {
	b := uint64(a.batch)
	if n <= b*backlogAt || !a.widen {
		return b
	}
	return min(n, b*backlogMax)
}

// Adaptive window (streamWindow), in batches.
const backlogAt, backlogMax = 4, 32

// peerIncarnation notes the incarnation a message from peer j carries and
// reports whether to take the message: not when it comes from an
// incarnation j has left. When j has restarted, it lost our stream's
// progress: start a new stream carrying our whole state, and expect a new
// one from it.
func (a *ESDS) peerIncarnation(j int, inc uint64) bool {
	p := &a.peers[j]
	if p.retired[inc] {
		return false
	}
	if p.inc != inc {
		if p.inc != 0 {
			// The peer restarted: it lost our stream's progress; start a new
			// stream carrying our whole state.
			if p.retired == nil {
				p.retired = map[uint64]bool{}
			}
			p.retired[p.inc] = true
			a.resetStream(j)
			p.inStream, p.inNext = 0, 0
		}
		p.inc = inc
	}
	return true
}

// receiveStream takes a stream message from peer j: the acknowledgement of
// our stream to j, then the range of j's stream it carries, merged
// (receiveGossip) only when it continues what we have applied: a gap, a
// stream whose start was lost and a duplicate are dropped, to be
// retransmitted (explicit sequencing, the ESDS thesis §6.2).
func (a *ESDS) receiveStream(j int, m *message) {
	p := &a.peers[j]
	a.acknowledged(j, m.AckStream, m.AckSeq)
	if m.To < m.From {
		// An acknowledgement only; its stamp holds once we have applied
		// the stream up to where it stands (stable_prefix.go).
		if m.Stream == p.inStream && p.inNext > 0 && m.To+1 == p.inNext {
			a.adoptStamp(j, m.Stable)
		}
		return
	}
	p.ackDue = true
	if m.Stream != p.inStream {
		if m.From != 1 {
			return // the start of this stream was lost: wait for the retransmission
		}
		p.inStream, p.inNext = m.Stream, 1
	}
	if m.From > p.inNext {
		return // a gap: wait for the retransmission (explicit sequencing, §6.2)
	}
	if m.To < p.inNext {
		return // a duplicate
	}
	for i := range m.Entries {
		if x := &m.Entries[i]; x.Flags&flagBare != 0 && a.ops[x.ID] == nil && !a.gcd.has(x.ID) {
			// Cannot happen (the sender saw us acknowledge the
			// descriptor, and a restart of ours starts a new stream);
			// refuse the message rather than skip what it says.
			return
		}
	}
	a.receiveGossip(j, m.Entries)
	p.inNext = m.To + 1
	a.adoptStamp(j, m.Stable)
	p.fullIn = m.To-m.From+1 >= uint64(a.batch)
}

// acknowledged takes j's acknowledgement of our stream up to position seq:
// the positions up to it leave the queue (a retransmission starts after
// them), j now holds the descriptors they carried (later entries go bare),
// and j knows of the collected operations they announced.
func (a *ESDS) acknowledged(j int, stream, seq uint64) {
	p := &a.peers[j]
	if stream != p.stream || seq <= p.acked || seq > p.acked+uint64(len(p.queue)) {
		return // another stream's, old, or beyond what we sent
	}
	n := seq - p.acked
	for i := range p.queue[:n] {
		q := &p.queue[i]
		if o := q.live(); o != nil {
			// Live now, so live when sent: the entry carried the
			// descriptor, or the peer had acknowledged one before.
			o.has |= 1 << j
		} else if g, ok := a.goneQ[q.id]; ok && q.flags == flagGone {
			if g &^= 1 << j; g == 0 {
				delete(a.goneQ, q.id)
			} else {
				a.goneQ[q.id] = g
			}
		}
	}
	clear(p.queue[:n])
	p.queue = p.queue[n:]
	p.acked = seq
	// Progress restarts the retransmission timer: only a window that has
	// gone unacknowledged for a whole retransmit interval is sent again
	// (measured from the last send otherwise, a stream that always has a
	// message in flight was resent every tick).
	p.lastRetx = a.tick
	if p.sentUpTo < p.acked {
		p.sentUpTo = p.acked
	}
}
