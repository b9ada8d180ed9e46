package orcabcast

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/service"
)

// replica is every node's copy of the objects and its queue of received
// updates (the Orca paper §4.2: "a queue of messages that have arrived ... but
// that have not yet been handled", handled strictly in order).
type replica struct {
	st      service.State
	applied uint64 // sequence number of the last update handled
	high    uint64 // the sequencer's last number, as last heard, or the highest held
	ready   bool   // caught up after a start: reads may be served
	target  uint64 // the sequencer's number when this incarnation asked first

	// log holds the ordered updates this node holds (persisted) above
	// logLow: those not yet delivered, and the applied ones kept as history.
	log       map[uint64]entry
	logLow    uint64
	recLow    uint64 // records "m/<n>" exist for the numbers above recLow
	snapAt    uint64 // the number the snapshot record covers
	commit    uint64 // updates up to commit of ballot commitBal are held by r+1 nodes
	commitBal uint64

	data    map[automaton.RequestID]entry // large updates awaiting their accept
	accepts map[uint64]entry              // accepts (number, ballot, id) whose data has not arrived
	dedup   orca.Dedup                    // per client: last applied update and its result
	blocked []entry                       // ordered guarded updates whose guard is false, oldest first
	reads   []automaton.Request           // reads waiting for a guard or for catch-up

	pending    map[automaton.RequestID]entry // this node's clients' updates, not yet applied here
	sinceState int                           // updates received since the last state message

	// broken variant: per-sender FIFO numbers
	fifoSent uint64
	fifoNext map[automaton.NodeID]uint64
	fifoBuf  map[automaton.NodeID]map[uint64]entry
}

func (b *Bcast) initReplica() {
	b.st = b.cfg.Service.NewState()
	b.log = map[uint64]entry{}
	b.data = map[automaton.RequestID]entry{}
	b.accepts = map[uint64]entry{}
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
	b.Respond(req.ID, b.st.Apply(req.Op))
}

// retryReads answers the waiting reads that may run now, in arrival order.
func (b *Bcast) retryReads() {
	if !b.ready || len(b.reads) == 0 {
		return
	}
	keep := b.reads[:0]
	for _, r := range b.reads {
		if service.Ready(b.st, r.Op) {
			b.Respond(r.ID, b.st.Apply(r.Op))
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
// message and its sequence number") and the commit point it carries.
func (b *Bcast) onOrdered(from automaton.NodeID, m message) {
	if from != b.seqr || m.x.bal != b.ballot {
		return
	}
	b.heard(m.n)
	b.store(m.x)
	b.learnCommit(m.c)
}

// onCommit learns the commit point ([21]: the update may be delivered).
func (b *Bcast) onCommit(m message) {
	b.heard(m.n)
	b.learnCommit(m.c)
	if b.high > b.held() {
		b.fetch()
	}
}

func (b *Bcast) learnCommit(c uint64) {
	if b.commitBal == b.ballot && c > b.commit {
		b.commit = c
	}
	b.drain()
}

// onData keeps a large update until its accept names its number.
func (b *Bcast) onData(from automaton.NodeID, m message) {
	if b.isSeq {
		b.onSubmit(from, m)
		return
	}
	x := m.x
	for seq, a := range b.accepts {
		if a.req.ID == x.req.ID {
			delete(b.accepts, seq)
			x.seq, x.bal = seq, a.bal
			b.store(x)
			b.drain()
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
	if b.isSeq {
		return
	}
	b.heard(m.n)
	if m.x.seq <= b.applied {
		return
	}
	if x, ok := b.data[m.x.req.ID]; ok {
		delete(b.data, m.x.req.ID)
		x.seq, x.bal = m.x.seq, b.ballot
		b.store(x)
		b.learnCommit(m.c)
		return
	}
	b.accepts[m.x.seq] = entry{seq: m.x.seq, bal: b.ballot, req: automaton.Request{ID: m.x.req.ID}}
	b.fetch()
}

// store holds an ordered update of this ballot: persisted before it is
// acknowledged to the sequencer; an update of an older ballot held under
// the same number is replaced (it was not delivered: the sequencer that
// recovered the order would have kept it). A gap is fetched (§4.1).
func (b *Bcast) store(x entry) {
	if x.seq <= b.applied {
		return
	}
	gapBefore := b.held() < b.high
	if y, ok := b.log[x.seq]; !ok || y.bal != x.bal || y.req.ID != x.req.ID {
		b.log[x.seq] = x
		b.Emit(automaton.Persist{Key: entryKey(x.seq), Value: encodeEntryRecord(x)})
	}
	delete(b.accepts, x.seq)
	b.high = max(b.high, x.seq)
	held := b.held()
	b.send(b.seqr, message{kind: kAck, bal: b.ballot, n: held})
	if held < b.high && !gapBefore {
		b.fetch()
	}
	b.sinceState++
	if b.sinceState >= b.stateAfter {
		b.sinceState = 0
		b.send(b.seqr, message{kind: kState, bal: b.ballot, n: b.applied})
	}
}

// held is the highest number up to which this node holds every update
// of its ballot (the applied ones included).
func (b *Bcast) held() uint64 {
	s := b.applied
	for {
		x, ok := b.log[s+1]
		if !ok || x.bal != b.ballot {
			return s
		}
		s++
	}
}

// drain delivers, in order, the held updates up to the commit point
// (§4.2's queue, handled strictly in order; [21]'s delivery after r+1
// nodes hold the update).
func (b *Bcast) drain() {
	for b.applied < b.commit {
		x, ok := b.log[b.applied+1]
		if !ok || x.bal != b.commitBal {
			break
		}
		delete(b.accepts, x.seq)
		delete(b.data, x.req.ID)
		b.handle(x)
		b.maybeSnapshot()
	}
	if !b.isSeq {
		b.trim(0)
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
		b.Respond(x.req.ID, res)
	}
}

// onSnap installs the sequencer's state when this node is behind the
// trimmed history.
func (b *Bcast) onSnap(m message) {
	b.heard(m.n)
	if m.snap.seq > b.applied {
		b.install(m.snap)
	}
	b.learnCommit(m.c)
}

// install replaces the state by a snapshot of a later point of the order
// (from the sequencer, or in a promise).
func (b *Bcast) install(s snapshot) {
	st := b.cfg.Service.NewState()
	if err := st.Restore(s.state); err != nil {
		return
	}
	b.st, b.applied, b.dedup, b.blocked = st, s.seq, s.dedup, s.blocked
	for seq := range b.log {
		if seq <= s.seq {
			delete(b.log, seq)
		}
	}
	b.logLow = max(b.logLow, s.seq)
	b.commit = max(b.commit, s.seq)
	b.Emit(automaton.Persist{Key: snapKey, Value: encodeSnapRecord(s)})
	b.snapAt = s.seq
	for seq := range b.accepts {
		if seq <= s.seq {
			delete(b.accepts, seq)
		}
	}
	for _, id := range b.pendingIDs() {
		if d, ok := b.dedup[id.Client]; ok && d.Seq == id.Seq {
			delete(b.pending, id)
			b.Respond(id, d.Res)
		}
	}
	b.checkReady()
	b.retryReads()
}

// onState: the sequencer's answer to a fetch with nothing to send.
func (b *Bcast) onState(from automaton.NodeID, m message) {
	if b.isSeq {
		b.noteDelivered(from, m.n)
		return
	}
	if from != b.seqr {
		return
	}
	b.heard(m.n)
	b.learnCommit(m.c)
	if b.high > b.held() {
		b.fetch()
	}
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
