package esds

import "github.com/synod-dev/synod/automaton"

// The gossip I/O combination of SimpleESDSImpl (impl=simple; the ESDS thesis §2.3,
// §3.3.4, Fig. 3.1). SimpleESDSAlg replaces the pair send_{r,r'}("gossip",
// ...) / receive_{r,r'}("gossip", ...) by one action gossip_{r,r'}(...) that
// both replicas take together. Its code (Fig. 3.1): the output end, when the
// action is enabled, sends "Initiate X" with the arguments, performs its own
// transition, and blocks until "Done X"; the input end, when "Initiate X"
// arrives, performs its transition and sends "Done X". Both ends must hold
// the reservation for it (reserve.go). The arguments are the gossip message
// the communication method of impl=optimised would have sent (variant=opt's
// stream range, or variant=unopt's full state), so impl selects only how
// gossip travels, as the seed's configuration switch does (§4.2.5).

// gossipEnabled reports whether send_{r,r'}("gossip") to j has something to
// say: full-state gossip always does once there is state; incremental gossip
// when the stream has unsent or due-for-retransmission positions, or owes an
// acknowledgement.
func (a *ESDS) gossipEnabled(j int) bool {
	if a.unopt {
		return len(a.ops) > 0 || a.removed != 0
	}
	p := &a.peers[j]
	end := p.acked + uint64(len(p.queue))
	return p.sentUpTo < end || p.ackDue || (p.sentUpTo > p.acked && a.tick-p.lastRetx >= a.retxTicks)
}

// gossipMessage performs the output end's transition of gossip_{r,j} (what
// sendGossip does: for the stream, note the positions sent) and returns the
// message it would have sent, nil if none.
func (a *ESDS) gossipMessage(j int) []byte {
	mark := len(a.Out)
	a.sendGossip(j)
	if len(a.Out) == mark {
		return nil
	}
	s := a.Out[len(a.Out)-1].(automaton.Send)
	a.Out = a.Out[:mark]
	return s.Msg
}

// initiateGossip is the output end of gossip_{i,j} (Fig. 3.1, §3.3.4):
// enabled in holding-reservation_j, it sends "Initiate X" with the gossip,
// performs Transition(EXA_i), and waits for "Done X" (combining_j), resending
// "Initiate X" until it comes (reserve.go's timer).
func (a *ESDS) initiateGossip() {
	r := a.resv
	j, seq := r.peer, r.seq
	inner := a.gossipMessage(j)
	r.due &^= 1 << j
	r.stats.Combinations++
	a.setStatus(statusCombining, j, seq, r.peerInc)
	r.inner = inner
	a.sendResv(j, message{Kind: kindInitiate, Seq: seq, Inner: inner})
}

// receiveInitiate is the input end of gossip_{j,i} (Fig. 3.1): in
// reserved_j, "When P_j receives an 'Initiate X' message, it executes its
// local state transition for X" (receive gossip, Fig. 4.2 or 4.5) "and then
// sends the acknowledgment message", which carries the stream's
// acknowledgement; the reservation is used up (free). A resent "Initiate X"
// of a combination done gets the same "Done X"; one for which this replica
// holds no reservation (it restarted since granting) is rejected.
func (a *ESDS) receiveInitiate(j int, m message) {
	r := a.resv
	if r.status != statusReserved || r.peer != j || r.seq != m.Seq {
		switch {
		case m.Seq < r.done[j].seq:
			// a stale copy
		case m.Seq == r.done[j].seq && r.doneMsg[j] != nil:
			a.send(j, r.doneMsg[j])
		case r.status == statusReserved && r.peer == j:
			// reserved for a later request of j's: this copy is stale
		default:
			a.sendResv(j, message{Kind: kindReject, Seq: m.Seq})
		}
		return
	}
	if len(m.Inner) > 0 {
		if g, err := unmarshal(m.Inner); err == nil && (g.Kind == kindStream || g.Kind == kindFull) && g.Inc == m.Inc {
			a.receiveGossipMessage(j, g)
		}
	}
	done := message{Kind: kindDone, Seq: m.Seq, Inc: a.inc, Removed: a.removed}
	if p := &a.peers[j]; p.inNext > 0 {
		done.AckStream, done.AckSeq = p.inStream, p.inNext-1
		p.ackDue = false
	}
	b := done.marshal()
	r.done[j], r.doneMsg[j] = answer{seq: m.Seq, granted: true}, b
	a.setStatus(statusFree, 0, 0, 0)
	a.send(j, b)
}

// receiveDone ends the output end's wait (Fig. 3.1's Receive(P_j, "Done
// X")): the stream positions the input end acknowledged leave the queue, and
// the replica is free.
func (a *ESDS) receiveDone(j int, m message) {
	r := a.resv
	if r.status != statusCombining || r.peer != j || r.seq != m.Seq {
		return
	}
	a.acknowledged(j, m.AckStream, m.AckSeq)
	a.setStatus(statusFree, 0, 0, 0)
}
