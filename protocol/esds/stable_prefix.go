package esds

import "sort"

// Stability as a prefix (parameter stability=prefix, the default; package
// doc, "Stability as a prefix"). The ESDS thesis's gossip carries S, the
// operations stable at the sender (Figs. 4.2, 4.5: solid_r[r'] ∪= S,
// solid_r[r] ∪= S, done_r[i] ∪= S), and Fig. 4.5 queues an operation for
// gossip again when it becomes stable here: one stream position per
// operation per peer, a third of what the streams carried under load.
// Instead, every stream message carries one label, the sender's stable
// prefix as it was when the message's last position was queued, and the
// receiver takes "every operation labelled at most it" as that part of S.
//
// The sender's stable prefix sp is the label of an operation stable here
// such that every operation done here with a label at most sp is stable
// here (solid_r[r], as a bit on each operation). Stable here is not itself
// a prefix of the label order (Fig. 4.5 applies every operation up to
// max-stable_r, some of which are not in ⋂ done yet), so sp can lag
// max-stable_r; it never claims more than solid_r[r]. An operation that
// this replica does not know cannot be labelled below sp: sp is a stable
// operation's label, and no operation comes to precede a stable one (the
// stream rule, package doc "What a stream position says").
//
// The stamp of a position is min(sp, the position's label) when queued
// (stampFor): every operation this replica knows with a label at most that
// was queued on the stream at or before the position (what a merge
// changed is queued in label order, queueMerged; a new stream in label
// order, resetStream), with a label at most the one it has now. So a
// receiver that has applied the stream up to that position knows every
// operation of the stamp's prefix, each with its final label (the labels
// of stable operations are final), and can merge "stable at the sender"
// for exactly those, as the seed merges S: in label order, none ahead of
// an operation it does not know yet. A message that reaches the end of the
// queue carries sp as it is when sent (everything known is queued); a
// stream with nothing left to send carries a stamp alone when sp has grown
// since the last one (stampDue), and the receiver adopts it only when it
// has applied the stream exactly up to where the stamp stands.

// solidPrefix returns this replica's stable prefix (sp above), advancing
// it over the operations that became stable here since. Collected
// operations are stable here, and every operation done here with a label
// at most stableMax is applied (advanceStable) and so live in appliedLive
// or collected: when every live one of those is stable here, sp is at least
// stableMax, whose operation may be collected (spOp nil). This is what
// lets collection queue no "gone" positions (gc.go; package doc, "Stability
// as a prefix"): a replica that collected x has a prefix that reaches x's
// label once the live operations below it are stable here, also after a
// restart that restored nothing live ("s"/"g" hold stableMax).
func (a *ESDS) solidPrefix() Label {
	a.dnaSettle()
	// appliedLive then dna: the live done operations in label order; f
	// is the first above sp not stable here.
	f := a.solidWalk(a.appliedLive)
	if f == nil {
		f = a.solidWalk(a.dna)
	}
	if brokenGoneless != 1 && a.stableMax.Set && (!a.sp.Set || a.sp.Less(a.stableMax)) && (f == nil || a.stableMax.Less(f.label)) {
		a.sp, a.spOp = a.stableMax, nil
	}
	return a.sp
}

// solidWalk advances sp over the operations of l (in label order) above it
// that are stable here, and returns the first that is not (nil: none).
func (a *ESDS) solidWalk(l []*op) *op {
	me := a.bit()
	i := 0
	if a.sp.Set {
		i = sort.Search(len(l), func(k int) bool { return a.sp.Less(l[k].label) })
	}
	for ; i < len(l); i++ {
		o := l[i]
		if o.solid&me == 0 {
			return o
		}
		a.sp, a.spOp = o.label, o
	}
	return nil
}

// stampFor is the stamp of a position queued now for o (nil: collected)
// with label l (unset: not done here).
func (a *ESDS) stampFor(o *op, l Label) Label {
	if o == nil {
		// Queued by a collection or at the end of a new stream: every
		// operation known here was queued before it.
		return a.solidPrefix()
	}
	if !l.Set {
		// Queued first among a merge's changes: the operations labelled
		// by the same merge follow it. No claim.
		return Label{}
	}
	if sp := a.solidPrefix(); sp.Less(l) || !sp.Set {
		return sp
	}
	return l
}

// brokenStamp (tests only, TestBrokenStampCaught): 1 stamps every message
// with the label of the last operation applied to the stable state, at
// sending: "stable here" read as Fig. 4.5's applied prefix, which is not
// solid_r[r]; 2 stamps it with the stable prefix at sending, whatever the
// position the message ends at.
var brokenStamp int

// stampOf is the stamp of a message to peer j ending at stream position
// to, where end is the last position queued.
func (a *ESDS) stampOf(j int, to, end uint64) Label {
	p := &a.peers[j]
	s := Label{}
	switch {
	case brokenStamp == 1:
		s = a.stableMax
	case brokenStamp == 2 || to == end:
		s = a.solidPrefix()
	case to > p.acked:
		s = p.queue[to-p.acked-1].sp
	}
	if s.Set && (!p.spSent.Set || p.spSent.Less(s)) {
		p.spSent = s
	}
	return s
}

// stampDue reports whether the stream to j owes the peer a stamp: our
// stable prefix grew since the last one sent.
func (a *ESDS) stampDue(j int) bool {
	if !a.spPrefix {
		return false
	}
	p := &a.peers[j]
	sp := a.solidPrefix()
	return sp.Set && (!p.spSent.Set || p.spSent.Less(sp))
}

// queueStamp queues, on a stream with nothing left to send whose peer is
// owed a stamp (stampDue), a position for the operation labelled sp: a
// message ending there carries sp, and the stream's acknowledgement and
// retransmission make sure the peer gets it (a stamp on a message that
// carried no position would be lost with it). The position says what
// every position says: the operation's flags and label now (or "gone").
// When sp is stableMax and its operation is collected (solidPrefix: spOp
// nil), the position names no operation (id ""): the message carries no
// entry for it, only the stamp.
func (a *ESDS) queueStamp(j int) {
	o := a.spOp
	switch {
	case o == nil:
		a.enqueueOp(j, "", nil)
	case o.gone:
		a.enqueueOp(j, o.id, nil)
	default:
		a.enqueueOp(j, o.id, o)
	}
}

// brokenGoneless (tests only, TestBrokenGonelessCaught): 1 leaves out the
// collected operations from the stable prefix (sp never reaches stableMax
// over collected ones), as before session 46, while collection no longer
// queues "gone": a replica restarted after its peers collected what it
// holds never learns those operations are stable there.
var brokenGoneless int

// adoptStamp takes peer j's stamp s, once the stream from j has been
// applied up to the position it was stamped at: every operation here
// labelled in (the previous stamp, s] is stable at j, merged as the seed
// merges S from j (gossip.go receiveGossip).
func (a *ESDS) adoptStamp(j int, s Label) {
	p := &a.peers[j]
	if !a.spPrefix || !s.Set || (p.stamp.Set && !p.stamp.Less(s)) {
		return
	}
	from := p.stamp
	p.stamp = s
	a.dnaSettle()
	var in []*op
	above := func(l []*op) []*op {
		k := 0
		if from.Set {
			k = sort.Search(len(l), func(k int) bool { return from.Less(l[k].label) })
		}
		n := sort.Search(len(l), func(k int) bool { return s.Less(l[k].label) })
		if n < k {
			return nil
		}
		return l[k:n]
	}
	in = append(in, above(a.appliedLive)...)
	in = append(in, above(a.dna)...)
	if len(in) == 0 {
		return
	}
	a.merging = true
	defer a.queueMerged()
	bj := uint64(1) << j
	for _, o := range in {
		if o.done|a.all == o.done && o.solid|bj|a.bit() == o.solid {
			continue
		}
		o.done |= a.all
		if o.solid&a.bit() == 0 {
			a.markDirty(o)
		}
		o.solid |= bj | a.bit()
		a.markDirty(o)
		a.newInfo(o)
		a.checkSolid(o)
		a.noteSolid(o)
	}
}
