package orcabcast

import (
	"maps"
	"slices"

	"github.com/synod-dev/synod/automaton"
)

// election is a node's part in choosing a new sequencer when the current
// one is suspected down (issue 16 item 2; the Orca paper §4.1 leaves the
// sequencer's crash to [21]; see the package doc). It is Paxos phase 1
// over ballots: ballot b belongs to node b mod N, the candidate collects
// promises from a quorum, each carrying the updates the member holds, and
// recovers the order from them.
type election struct {
	ballot    uint64 // the highest ballot promised (persisted before any promise)
	candidate bool
	promises  map[automaton.NodeID]message
	quiet     int // ticks since the sequencer (or, for a candidate, the quorum) was last heard
	patience  int // ticks of silence before this node stands, drawn at random per term
}

func (b *Bcast) owner(bal uint64) automaton.NodeID {
	return b.cfg.Nodes[bal%uint64(len(b.cfg.Nodes))]
}

func (b *Bcast) ballotRecord() automaton.Persist {
	e := header.Record(16)
	e.Uvarint(b.ballot)
	return automaton.Persist{Key: ballotKey, Value: e.B}
}

// newTerm resets the failure detector: the patience is drawn from
// Config.Rand so that two members rarely stand at once.
func (b *Bcast) newTerm() {
	b.quiet = 0
	b.patience = b.electAfter + b.cfg.Rand.Intn(b.electAfter+1)
}

// current checks a message's ballot: an older one is answered with a nack
// (the old sequencer, back from a crash, learns the new ballot this way);
// a newer one is adopted. It reports whether the message is of this
// node's ballot now.
func (b *Bcast) current(from automaton.NodeID, m message) bool {
	if m.bal < b.ballot {
		if m.kind != kNack {
			b.send(from, message{kind: kNack, bal: b.ballot})
		}
		return false
	}
	if m.bal > b.ballot {
		b.adopt(m.bal)
	}
	if from == b.seqr {
		b.quiet = 0
	}
	return true
}

// adopt moves to a newer ballot: a sequencer or candidate steps down and
// becomes a member; what was not delivered waits for the new sequencer.
func (b *Bcast) adopt(bal uint64) {
	b.ballot = bal
	b.Emit(b.ballotRecord())
	b.seqr = b.owner(bal)
	b.isSeq, b.candidate, b.promises = false, false, nil
	b.commit, b.commitBal = b.applied, bal
	b.newTerm()
}

// suspect starts an election (Paxos phase 1a): the smallest ballot above
// every ballot heard that this node owns.
func (b *Bcast) suspect() {
	n := uint64(len(b.cfg.Nodes))
	bal := (b.ballot/n)*n + uint64(b.index)
	for bal <= b.ballot {
		bal += n
	}
	b.adopt(bal)
	b.candidate = true
	b.promises = map[automaton.NodeID]message{}
	b.broadcast(message{kind: kPrepare, bal: b.ballot, n: b.applied})
	b.checkQuorum()
}

// onPrepare answers a candidate (Paxos phase 1b): the promise carries the
// updates this node holds above the candidate's applied count, whatever
// their ballot, or a snapshot when its history no longer reaches down to
// that count.
func (b *Bcast) onPrepare(from automaton.NodeID, m message) {
	if !b.current(from, m) || b.owner(m.bal) != from {
		return
	}
	p := message{kind: kPromise, bal: b.ballot, n: b.applied}
	if m.n < b.logLow {
		p.hasSnap, p.snap = true, b.snap()
	}
	for s := max(m.n, b.logLow) + 1; s <= b.high; s++ {
		if x, ok := b.log[s]; ok {
			p.xs = append(p.xs, x)
		}
	}
	b.send(from, p)
}

// onPromise collects a promise; with a quorum the candidate recovers.
func (b *Bcast) onPromise(from automaton.NodeID, m message) {
	if !b.current(from, m) || !b.candidate || m.bal != b.ballot {
		return
	}
	b.quiet = 0
	if m.hasSnap && m.snap.seq > b.applied {
		b.install(m.snap)
	}
	b.promises[from] = m
	b.checkQuorum()
}

// checkQuorum recovers once the promises (this node's own included) make
// an election quorum: N-r nodes, at least a majority, so that it meets
// every set of r+1 nodes that held a delivered update.
func (b *Bcast) checkQuorum() {
	if b.candidate && len(b.promises)+1 >= b.electQuorum() {
		b.recoverOrder()
	}
}

func (b *Bcast) electQuorum() int {
	n := len(b.cfg.Nodes)
	return max(n/2+1, n-b.resilience)
}

// recoverOrder is the new sequencer's recovery (Paxos phase 2 of the
// values found in phase 1): for each number above its applied count, the
// update of the highest ballot that any promise (or its own history)
// holds, up to the first number nobody in the quorum holds. Every
// delivered update was held by r+1 nodes, so the quorum holds it and keeps
// its number; a number nobody in the quorum holds was never delivered,
// and neither was anything after it (delivery is in order), so numbering
// continues from there and what some member held above it is overwritten.
func (b *Bcast) recoverOrder() {
	found := map[uint64]entry{}
	keep := func(x entry) {
		if y, ok := found[x.seq]; x.seq > b.applied && (!ok || x.bal > y.bal) {
			found[x.seq] = x
		}
	}
	for _, x := range b.log {
		keep(x)
	}
	for _, id := range b.cfg.Nodes {
		for _, x := range b.promises[id].xs {
			keep(x)
		}
	}
	last := b.applied
	if !b.proto.norecovery {
		for _, ok := found[last+1]; ok; _, ok = found[last+1] {
			last++
		}
	}
	// Dropped in sequence order, not map order: the deletes are outputs,
	// and a seed must replay them byte for byte.
	for _, s := range slices.Sorted(maps.Keys(b.log)) {
		if x := b.log[s]; s > last {
			delete(b.log, s)
			b.Emit(automaton.Persist{Key: entryKey(x.seq), Delete: true})
		}
	}
	for s := b.applied + 1; s <= last; s++ {
		x := found[s]
		x.bal = b.ballot
		b.log[s] = x
		b.Emit(automaton.Persist{Key: entryKey(s), Value: encodeEntryRecord(x)})
	}
	b.next = last + 1
	b.becomeSequencer()
}

// becomeSequencer starts numbering in this node's ballot: the recovered
// updates are proposed again to every member, then new ones follow.
func (b *Bcast) becomeSequencer() {
	b.isSeq, b.candidate, b.promises = true, false, nil
	b.seqr = b.cfg.Self
	b.ordered = map[automaton.RequestID]uint64{}
	b.delivered = map[automaton.NodeID]uint64{}
	b.acks = map[automaton.NodeID]uint64{}
	b.commit, b.commitBal = b.applied, b.ballot
	for s, x := range b.log {
		if s > b.applied {
			b.ordered[x.req.ID] = s
		}
	}
	b.high = max(b.high, b.next-1)
	if !b.ready {
		b.target = max(b.target, b.next-1)
	}
	for s := b.applied + 1; s < b.next; s++ {
		b.broadcast(message{kind: kOrdered, bal: b.ballot, n: b.next - 1, c: b.commit, x: b.log[s]})
	}
	b.advanceCommit()
	for _, id := range b.pendingIDs() {
		b.order(b.pending[id], false)
	}
}

// onNack: a node in a newer ballot answered; current adopts it.
func (b *Bcast) onNack(from automaton.NodeID, m message) { b.current(from, m) }
