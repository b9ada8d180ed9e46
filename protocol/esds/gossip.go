package esds

import (
	"slices"

	"github.com/synod-dev/synod/automaton"
)

// Gossip between replicas: send_{r,r'}("gossip", R, D, L, S) and
// receive_{r',r}("gossip", R, D, L, S) (the ESDS thesis Figs. 4.2 and 4.5). What a
// gossip message says about each operation is an entry (msg.go); how the
// optimised variant's incremental gossip is made reliable over a lossy
// network is the stream layer (stream.go), which hands complete, in-order
// ranges of entries to receiveGossip.

// OnMessage takes a gossip message off the network: it drops messages from
// non-members, corrupt ones and late ones from a peer's earlier incarnation
// (stream.go), merges the sender's removed set, and hands the message to
// receiveGossip, directly (full-state gossip, idempotent) or through the
// stream layer (incremental gossip, which must arrive complete and in order).
//
// A batch message (msg.go, kindBatch) is opened and each of its messages
// handled as if it had arrived alone, in order.
func (a *ESDS) OnMessage(from automaton.NodeID, b []byte) {
	j, ok := a.index[from]
	if !ok || j == a.self || a.removed&(1<<j) != 0 {
		return // not a member: ignore
	}
	if len(b) < 2 || b[1] != kindBatch {
		a.onMessage1(j, b)
		return
	}
	msgs, err := header.SplitBatch(b, kindBatch)
	if err != nil {
		return // corrupt: drop
	}
	for _, m := range msgs {
		if a.removed&(1<<j) != 0 {
			return // a message of the batch removed the sender
		}
		a.onMessage1(j, m)
	}
}

// onMessage1 handles one message from member j.
func (a *ESDS) onMessage1(j int, b []byte) {
	buf := a.recvBuf
	a.recvBuf = nil
	m, err := unmarshalInto(b, a.ops, buf) // (descriptors of operations held here not decoded)
	if err != nil {
		return // corrupt: drop (gossip is retransmitted)
	}
	if a.feOnly || !a.isReplica(j) {
		a.frontEndOnlyMessage(j, m) // frontend_only.go
		return
	}
	switch m.Kind {
	case kindRequest: // from front end j (frontend.go)
		a.replicaRequest(j, m.Entries[0])
		return
	case kindResponse:
		a.receiveResponse(m.Entries[0].ID, m.Value)
		return
	case kindReserve, kindGrant, kindReject, kindInitiate, kindDone:
		a.onReservationMessage(j, m) // impl=simple (reserve.go)
		return
	}
	a.receiveGossipMessage(j, m)
	if m.Kind == kindStream || m.Kind == kindFull {
		// Merged: nothing keeps the entries (an operation made from one
		// copies its fields), so their array decodes the next message.
		clear(m.Entries)
		a.recvBuf = m.Entries[:0]
	}
}

// receiveGossipMessage takes a gossip message from replica j, off the
// network or out of an "Initiate X" (impl=simple, combination.go).
func (a *ESDS) receiveGossipMessage(j int, m message) {
	if !a.peerIncarnation(j, m.Inc) {
		return // from an earlier incarnation of the peer
	}
	a.setRemoved(a.removed | m.Removed)
	switch m.Kind {
	case kindFull:
		a.receiveGossip(j, m.Entries)
	case kindStream:
		a.receiveStream(j, &m)
		a.armDrain() // its acknowledgement may open our window, its batch be full (stream.go)
	}
}

// receiveGossip is receive_{r',r}("gossip", R, D, L, S) (the ESDS thesis Fig. 4.2;
// Fig. 4.5 adds the gossip_r[i] bookkeeping, newInfo here): it merges the
// entries replica j sent, each what j knew about one operation.
func (a *ESDS) receiveGossip(j int, entries []entry) {
	a.merging = true
	defer a.queueMerged()
	bj := uint64(1) << j
	a.merged += len(entries)
	for i := range entries {
		x := &entries[i]
		o := a.ops[x.ID]
		if o == nil && a.gcd.has(x.ID) {
			continue // stable everywhere, collected here (a live operation never is)
		}
		if x.Flags == flagGone {
			// Collected at j, hence stable at every member.
			if o != nil && o.label.Set && o.solid|a.all != o.solid {
				o.done |= a.all
				o.solid |= a.all
				a.markDirty(o)
				a.newInfo(o)
				a.noteSolid(o)
			}
			continue
		}
		fresh := o == nil
		if fresh { // rcvd_r ∪= R
			o = &op{id: x.ID, rkey: x.rkey, prev: x.Prev, strict: x.Strict, sop: x.Op}
		}
		// j holds x's descriptor (it gossips about x): our entries for
		// x to j go bare from now on, as after j acknowledged one
		// carrying it (stream.go; package doc, "Descriptors travel once
		// per stream").
		o.has |= bj
		changed := fresh
		inD, inS := x.Flags&flagDone != 0, x.Flags&flagSolid != 0
		if inD && x.Label.Set && int(x.Label.R) < len(a.heard) &&
			(!a.heard[x.Label.R].Set || a.heard[x.Label.R].Less(x.Label)) {
			a.heard[x.Label.R] = x.Label // the final frontier (apply.go)
		}
		if inD && x.Label.Set { // minlabel_r = min(minlabel_r, L)
			if x.Label.C > a.counter {
				a.counter = x.Label.C
			}
			better := x.Label.Less(o.label)
			if a.proto.maxLabel && o.label.Set {
				better = o.label.Less(x.Label) // broken: merge by maximum
			}
			if better {
				// (A stable operation's label is final in the correct
				// protocol; only the broken maxlabel variant changes one.)
				wasDone := o.label.Set
				if wasDone && o.label.R == uint32(a.self) {
					a.counterDirty = true // recCounter: our label leaves the records
				}
				a.dnaRemove(o) // re-inserted under the new label
				if wasDone {
					a.lowerTent(o.label) // the checkpoints from its old place on hold it there
				}
				o.label = x.Label
				changed = true
				a.labelChanged(o, wasDone)
			}
		}
		if inD || inS { // done_r[r'] ∪= D ∪ S; done_r[r] ∪= D ∪ S
			if o.done|bj|a.bit() != o.done {
				o.done |= bj | a.bit()
				changed = true
			}
		}
		if inS { // done_r[i] ∪= S; solid_r[r'] ∪= S; solid_r[r] ∪= S
			if o.done|a.all != o.done || o.solid|bj|a.bit() != o.solid {
				o.done |= a.all
				if o.solid&a.bit() == 0 {
					a.markDirty(o)
				}
				o.solid |= bj | a.bit()
				changed = true
			}
		}
		if x.Flags&flagAll != 0 && o.solid|a.all != o.solid {
			o.done |= a.all
			o.solid |= a.all
			a.markDirty(o)
			changed = true
		}
		if fresh {
			a.receive(o)
		} else if changed {
			a.newInfo(o)
		}
		if o.label.Set && !fresh && changed {
			a.markDirty(o)
		}
		if fresh && o.label.Set {
			a.markDirty(o)
		}
		a.checkSolid(o) // solid_r[r] ∪= ⋂_i done_r[i]
		a.noteSolid(o)
	}
	if a.unopt {
		// ESDSAlg's self-gossip (the replica's gossip to itself) does nothing
		// beyond this rule, which every merge applies.
		return
	}
}

// queueMerged queues what a merged message changed, in label order (the
// operations not done here first), each as it is after the whole merge.
// Queued entry by entry, "x stable here" could take a position before the
// lower label of an operation y that the same message brought: a peer
// receiving a prefix that ends between them would apply x to its stable
// state before y, which the final order places ahead of x (stable orders
// agree failed: synod-lab sim --protocol esds --nodes 3 --clients 16 --ops
// 1000 --keys 40 --faults crash,slow --strict 0.2 --prev 0.2 --param
// impl=simple --seeds 3). In label order, every position saying "x stable
// here" follows every operation labelled below x that this merge changed,
// and so the package doc's stream rule holds again: a prefix is this
// replica's state at one moment (after a merge).
func (a *ESDS) queueMerged() {
	a.merging = false
	held := a.held
	a.held = nil
	slices.SortStableFunc(held, func(x, y *op) int {
		lx, ly := x.label, y.label
		if lx.Set != ly.Set {
			if !lx.Set {
				return -1
			}
			return 1
		}
		return lx.Compare(ly)
	})
	for _, o := range held {
		a.newInfo(o)
	}
	a.held = held[:0]
}

// labelChanged keeps the waiting list and the tentative state consistent after
// o got a (lower) label.
func (a *ESDS) labelChanged(o *op, wasDone bool) {
	if !wasDone {
		a.unwait(o)
		o.done |= a.bit()
	}
	a.dnaInsert(o)
	a.noteSolid(o) // (only the broken maxlabel variant moves a stable label)
	o.tvalOK = false
	if !o.applied && a.svc.IsRead(o.sop) {
		a.lowerTent(o.label) // its value is computed from the state below its label
		// A read leaves the state unchanged: wherever it lands in the label
		// order, the tentative state and the other operations' values are
		// those without it. Its own value is computed when asked for.
		return
	}
	if !wasDone && a.tentValid && !a.tentMax.Less(o.label) && a.tentInsert(o) {
		return // commutes with every operation after it (apply.go)
	}
	if !a.tentValid || !a.tentMax.Less(o.label) || wasDone {
		a.notePending(o, wasDone)
		a.tentValid = false
		a.lowerTent(o.label)
		return
	}
	// Appended after every tentatively ordered operation: extend in place.
	a.tentApply(o)
}

func (a *ESDS) unwait(o *op) {
	if !o.inWait {
		return
	}
	o.inWait = false
	for i, w := range a.waiting {
		if w == o {
			a.waiting = append(a.waiting[:i], a.waiting[i+1:]...)
			return
		}
	}
}

// checkSolid: solid_r[r] ∪= ⋂_i done_r[i], for one operation. The optimised
// variant does this on gossip receipt and in solidify (one replica); the
// unoptimised one also in do_it. Both reach it from here.
func (a *ESDS) checkSolid(o *op) {
	if !o.label.Set || o.solid&a.bit() != 0 {
		return
	}
	if m := a.members(); o.done&m == m {
		o.solid |= a.bit()
		a.markDirty(o)
		a.newInfo(o)
		a.noteSolid(o)
	}
}

func (a *ESDS) entryOf(o *op) entry {
	x := entry{ID: o.id, Prev: o.prev, Strict: o.strict, Op: o.sop, Flags: a.flagsOf(o)}
	if o.label.Set {
		x.Label = o.label
	}
	return x
}

// flagsOf is the flags of o's entry (entryOf) without the rest of it.
func (a *ESDS) flagsOf(o *op) byte {
	var f byte
	if o.label.Set {
		f |= flagDone
	}
	if o.solid&a.bit() != 0 {
		f |= flagSolid
	}
	if m := a.members(); o.label.Set && o.solid&m == m {
		f |= flagAll
	}
	return f
}

// sendGossip is send_{r,r'}("gossip", R, D, L, S) to replica j: the whole
// state (ESDSAlg, Fig. 4.2) or the next part of gossip_r[j] over the
// reliable stream (ESDSOptAlg, Fig. 4.5; stream.go).
func (a *ESDS) sendGossip(j int) {
	if a.unopt {
		a.sendFull(j)
	} else {
		a.sendStream(j)
	}
}

// sendFull is ESDSAlg's send_{r,r'}("gossip", R, D, L, S): the whole state.
func (a *ESDS) sendFull(j int) {
	if len(a.ops) == 0 && a.removed == 0 {
		return
	}
	m := message{Kind: kindFull, Inc: a.inc, Removed: a.removed}
	for _, o := range a.sortedOps() {
		m.Entries = append(m.Entries, a.entryOf(o))
	}
	a.send(j, m.marshal())
}
