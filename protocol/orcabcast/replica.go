package orcabcast

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/service"
)

// replica is every node's copy of the objects and its queue of received
// updates (seed 004 §4.2: "a queue of messages that have arrived ... but
// that have not yet been handled", handled strictly in order).
type replica struct {
	st      service.State
	applied uint64 // sequence number of the last update handled
	high    uint64 // the sequencer's last number, as last heard
	ready   bool   // caught up after a start: reads may be served
	target  uint64 // the sequencer's number when this incarnation asked first

	buf     map[uint64]entry               // ordered updates received ahead of a gap
	data    map[automaton.RequestID]entry  // large updates awaiting their accept
	accepts map[uint64]automaton.RequestID // accepts whose data has not arrived
	dedup   orca.Dedup                     // per client: last applied update and its result
	blocked []entry                        // ordered guarded updates whose guard is false, oldest first
	reads   []automaton.Request            // reads waiting for a guard or for catch-up

	pending    map[automaton.RequestID]entry // this node's clients' updates, not yet applied here
	sinceState int                           // updates received since the last state message

	// broken variant: per-sender FIFO numbers
	fifoSent uint64
	fifoNext map[automaton.NodeID]uint64
	fifoBuf  map[automaton.NodeID]map[uint64]entry
}

func (b *Bcast) initReplica() {
	b.st = b.cfg.Service.NewState()
	b.buf = map[uint64]entry{}
	b.data = map[automaton.RequestID]entry{}
	b.accepts = map[uint64]automaton.RequestID{}
	b.dedup = orca.Dedup{}
	b.pending = map[automaton.RequestID]entry{}
	b.fifoNext = map[automaton.NodeID]uint64{}
	b.fifoBuf = map[automaton.NodeID]map[uint64]entry{}
}

func (b *Bcast) pendingIDs() []automaton.RequestID {
	ids := make([]automaton.RequestID, 0, len(b.pending))
	for id := range b.pending {
		ids = append(ids, id)
	}
	automaton.SortRequestIDs(ids)
	return ids
}

// onRead serves a read from the local copy (§4.2: reads are local), once
// this node has caught up and the read's guard holds.
func (b *Bcast) onRead(req automaton.Request) {
	if !b.ready || !service.Ready(b.st, req.Op) {
		b.reads = append(b.reads, req)
		return
	}
	b.respond(req.ID, b.st.Apply(req.Op))
}

// retryReads answers the waiting reads that may run now, in arrival order.
func (b *Bcast) retryReads() {
	if !b.ready || len(b.reads) == 0 {
		return
	}
	keep := b.reads[:0]
	for _, r := range b.reads {
		if service.Ready(b.st, r.Op) {
			b.respond(r.ID, b.st.Apply(r.Op))
		} else {
			keep = append(keep, r)
		}
	}
	b.reads = keep
}

// heard notes the sequencer's last number; a node that restarted becomes
// ready once it has applied what the sequencer had ordered when it first
// answered.
func (b *Bcast) heard(high uint64) {
	if high > b.high {
		b.high = high
	}
	if !b.ready {
		if high > b.target {
			b.target = high
		}
		b.checkReady()
	}
}

func (b *Bcast) checkReady() {
	if !b.ready && b.applied >= b.target {
		b.ready = true
	}
}

// onOrdered receives an ordered update (§4.1: the sequencer "multicasts the
// message and its sequence number").
func (b *Bcast) onOrdered(m message) {
	b.heard(m.n)
	b.receive(m.x)
}

// onData keeps a large update until its accept names its number.
func (b *Bcast) onData(from automaton.NodeID, m message) {
	if b.isSeq {
		b.onSubmit(from, m)
		return
	}
	x := m.x
	for seq, id := range b.accepts {
		if id == x.req.ID {
			delete(b.accepts, seq)
			x.seq = seq
			b.receive(x)
			return
		}
	}
	if _, done := b.dedup[x.req.ID.Client]; !done || b.dedup[x.req.ID.Client].Seq < x.req.ID.Seq {
		b.data[x.req.ID] = x
	}
}

// onAccept receives the number of a large update (§4.1: "the sequencer
// broadcast[s] a (small) acknowledgement message containing the sequence
// number"); without the data it fetches the update from the sequencer.
func (b *Bcast) onAccept(m message) {
	b.heard(m.n)
	if m.x.seq <= b.applied {
		return
	}
	if x, ok := b.data[m.x.req.ID]; ok {
		delete(b.data, m.x.req.ID)
		x.seq = m.x.seq
		b.receive(x)
		return
	}
	b.accepts[m.x.seq] = m.x.req.ID
	b.send(b.seqr, message{kind: kFetch, n: b.applied})
}

// receive puts an ordered update in the queue and handles the queue's
// head for as long as it is the next number; a gap is fetched from the
// sequencer's history (§4.1).
func (b *Bcast) receive(x entry) {
	if x.seq <= b.applied {
		return
	}
	gapBefore := len(b.buf) > 0
	b.buf[x.seq] = x
	b.drain()
	if len(b.buf) > 0 && !gapBefore {
		b.send(b.seqr, message{kind: kFetch, n: b.applied})
	}
	b.sinceState++
	if b.sinceState >= b.stateAfter && !b.isSeq {
		b.sinceState = 0
		b.send(b.seqr, message{kind: kState, n: b.applied})
	}
}

func (b *Bcast) drain() {
	for {
		x, ok := b.buf[b.applied+1]
		if !ok {
			break
		}
		delete(b.buf, x.seq)
		delete(b.accepts, x.seq)
		delete(b.data, x.req.ID)
		b.handle(x)
	}
	b.checkReady()
	b.retryReads()
}

// handle applies the update at the head of the queue (§4.2: "lock the
// local copy of X; apply the operation; unlock"), wakes its writer when it
// is this node's, and then retries blocked guarded updates in order.
func (b *Bcast) handle(x entry) {
	b.applied = x.seq
	b.applyLog = append(b.applyLog, applied{seq: x.seq, id: x.req.ID})
	b.apply(x)
	for progress := true; progress && len(b.blocked) > 0; {
		progress = false
		for i, y := range b.blocked {
			if service.Ready(b.st, y.req.Op) {
				b.blocked = append(b.blocked[:i:i], b.blocked[i+1:]...)
				b.finish(y, b.st.Apply(y.req.Op))
				progress = true
				break
			}
		}
	}
}

// apply applies one update unless it is a duplicate; a guarded update
// whose guard is false joins the blocked list (every replica decides the
// same, in the same order).
func (b *Bcast) apply(x entry) {
	if d, ok := b.dedup[x.req.ID.Client]; ok && d.Seq >= x.req.ID.Seq {
		return
	}
	for _, y := range b.blocked {
		if y.req.ID == x.req.ID {
			return
		}
	}
	if !service.Ready(b.st, x.req.Op) {
		b.blocked = append(b.blocked, x)
		return
	}
	b.finish(x, b.st.Apply(x.req.Op))
}

// finish records an applied update's result and answers its writer here.
func (b *Bcast) finish(x entry, res service.Result) {
	b.dedup[x.req.ID.Client] = orca.Done{Seq: x.req.ID.Seq, Res: res}
	if _, ok := b.pending[x.req.ID]; ok {
		delete(b.pending, x.req.ID)
		b.respond(x.req.ID, res)
	}
}

// onSnap installs the sequencer's state when this node is behind the
// trimmed history.
func (b *Bcast) onSnap(m message) {
	b.heard(m.n)
	s := m.snap
	if s.seq <= b.applied {
		return
	}
	st := b.cfg.Service.NewState()
	if err := st.Restore(s.state); err != nil {
		return
	}
	b.st, b.applied, b.dedup, b.blocked = st, s.seq, s.dedup, s.blocked
	for seq := range b.buf {
		if seq <= s.seq {
			delete(b.buf, seq)
		}
	}
	for seq := range b.accepts {
		if seq <= s.seq {
			delete(b.accepts, seq)
		}
	}
	for _, id := range b.pendingIDs() {
		if d, ok := b.dedup[id.Client]; ok && d.Seq == id.Seq {
			delete(b.pending, id)
			b.respond(id, d.Res)
		}
	}
	b.drain()
}

// onState: the sequencer's answer to a fetch with nothing to send.
func (b *Bcast) onState(from automaton.NodeID, m message) {
	if b.isSeq {
		b.noteDelivered(from, m.n)
		return
	}
	b.heard(m.n)
}

// --- the broken variant: per-sender FIFO, no sequencer ---

// fifoSend applies the update locally at once and sends it to every other
// node with the sender's own number.
func (b *Bcast) fifoSend(x entry) {
	b.fifoSent++
	b.broadcast(message{kind: kFifo, n: b.fifoSent, x: x})
	b.applied++
	x.seq = b.applied
	b.handle(x)
	b.retryReads()
}

// onFifo delivers a sender's updates in the sender's order, interleaved
// with other senders' as they arrive.
func (b *Bcast) onFifo(from automaton.NodeID, m message) {
	q := b.fifoBuf[from]
	if q == nil {
		q = map[uint64]entry{}
		b.fifoBuf[from] = q
	}
	if m.n <= b.fifoNext[from] {
		return
	}
	q[m.n] = m.x
	for {
		x, ok := q[b.fifoNext[from]+1]
		if !ok {
			break
		}
		delete(q, b.fifoNext[from]+1)
		b.fifoNext[from]++
		b.applied++
		x.seq = b.applied
		b.handle(x)
	}
	b.retryReads()
}
