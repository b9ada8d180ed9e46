package esds

import (
	"time"

	"github.com/synod-dev/synod/automaton"
)

// The reservation system of SimpleESDSImpl (impl=simple; the ESDS thesis §3.3.5,
// Fig. 3.2, and §3.4.3): before replica P_i may initiate the gossip I/O
// combination with P_j (combination.go), it must hold a reservation from
// P_j. Each replica has one reservation status: free, negotiating_j,
// holding-reservation_j or reserved_j (plus combining_j, see below). P_i
// initiates a combination with P_j only in holding-reservation_j, and takes
// part in one initiated by P_j only in reserved_j. Invariant 3.3.1, P_i in
// holding-reservation_j ⇒ P_j in reserved_i, is what makes every initiated
// combination complete (no deadlock); invariant.go checks it after every
// simulated step. A process that is negotiating cannot grant, so processes
// can keep rejecting one another (livelock); exponential backoff (§3.4.3)
// spaces out the requests to a peer that rejected.
//
// The seed's channels are reliable and its processes never crash. Here
// every handshake message is resent until answered (the requester resends
// its request and its "Initiate X"; answers to a resent message are the
// same answers), so a lost message delays a reservation and never breaks
// it. No status expires on a clock: a grantor stays reserved_i until P_i
// initiates (a lease would let the grantor go free while a paused holder
// still holds, breaking 3.3.1). It leaves reserved_i without a combination
// only when P_i is known gone: a message from a new incarnation of P_i, or
// P_i removed from the membership. A crash ends a process; its successor
// starts free, and 3.3.1 is checked against the incarnation that granted.

// resvStatus is a replica's reservation status (Fig. 3.2).
type resvStatus byte

const (
	// statusFree: free to request or to grant a reservation.
	statusFree resvStatus = iota
	// statusNegotiating: negotiating_j, waiting for P_j's answer.
	statusNegotiating
	// statusHolding: holding-reservation_j, may initiate with P_j.
	statusHolding
	// statusReserved: reserved_j, waiting for P_j to initiate.
	statusReserved
	// statusCombining: the output end of a combination after "Initiate X",
	// blocked in Receive("Done X") (Fig. 3.1). Not one of Fig. 3.2's
	// statuses: the seed's process is blocked there and answers nothing; it
	// has left holding-reservation_j ("when executing this combination, P_i
	// must leave the holding-reservation_j state", §3.3.5), and it rejects
	// reservation requests as a busy process.
	statusCombining
)

var statusNames = [...]string{"free", "negotiating", "holding-reservation", "reserved", "combining"}

func (s resvStatus) String() string { return statusNames[s] }

// Timers of impl=simple.
const (
	// timerResv: the current status's next step (resend a request or an
	// "Initiate X"; in holding-reservation_j, initiate).
	timerResv automaton.TimerID = 2
	// timerBackoff+j: the backoff interval q_{i,j} towards P_j has passed.
	timerBackoff automaton.TimerID = 64
)

// reservations is one replica's reservation state (impl=simple).
type reservations struct {
	status resvStatus
	peer   int    // j of the status (not free)
	seq    uint64 // the reservation's number: the requester's
	// peerInc: holding-reservation_j, the incarnation of P_j that granted;
	// reserved_j, the incarnation of P_j that asked.
	peerInc uint64
	inner   []byte // combining: the gossip message, resent until "Done X"
	nextSeq uint64

	// Per peer: the backoff interval q_{i,j} (§3.4.3); the last request
	// answered (its number and whether granted) and the last "Done X" sent,
	// both sent again when the same message arrives again.
	q        []time.Duration
	answered []answer
	done     []answer
	doneMsg  [][]byte

	backingOff uint64 // peers whose backoff interval has not yet passed
	due        uint64 // peers owed a gossip combination (set every gossip interval)
	last       int    // the last peer asked (partners are asked round-robin)

	// Figures for experiments and tests.
	stats ReservationStats
}

type answer struct {
	seq     uint64
	granted bool
}

// ReservationStats counts a replica's reservation traffic (impl=simple).
type ReservationStats struct {
	Requests, Grants, Rejections, Combinations uint64
}

// Reservations returns this replica's reservation counts (zero unless
// impl=simple).
func (a *ESDS) Reservations() ReservationStats {
	if a.resv == nil {
		return ReservationStats{}
	}
	return a.resv.stats
}

// Backoff constants (§3.4.3 says "doubles ... and adds a random term from a
// fixed range" and gives no figures): see the package doc.
func (a *ESDS) backoffBase() time.Duration   { return a.gossipIvl / 4 }
func (a *ESDS) backoffJitter() time.Duration { return a.gossipIvl / 4 }
func (a *ESDS) backoffCap() time.Duration    { return 4 * a.gossipIvl }

// startReservations resets the reservation state at (re)start: a new
// process starts free.
func (a *ESDS) startReservations() {
	n := len(a.cfg.Nodes)
	a.resv = &reservations{
		q: make([]time.Duration, n), answered: make([]answer, n),
		done: make([]answer, n), doneMsg: make([][]byte, n), last: a.self,
	}
	for j := range a.resv.q {
		a.resv.q[j] = a.backoffBase()
	}
}

func (a *ESDS) sendResv(j int, m message) {
	m.Inc, m.Removed = a.inc, a.removed
	a.send(j, m.marshal())
}

// setStatus moves to a reservation status and arms timerResv for it.
func (a *ESDS) setStatus(s resvStatus, j int, seq, inc uint64) {
	r := a.resv
	r.status, r.peer, r.seq, r.peerInc = s, j, seq, inc
	switch s {
	case statusNegotiating, statusCombining:
		a.Emit(automaton.SetTimer{ID: timerResv, After: a.retransmit})
	case statusHolding:
		// The scheduler's next round runs the enabled combination (§3.4.2).
		a.Emit(automaton.SetTimer{ID: timerResv, After: 0})
	default:
		r.inner = nil
		a.Emit(automaton.CancelTimer{ID: timerResv})
	}
}

// gossipDue marks every other member as owed a gossip combination (the
// gossip interval's tick) and asks for a reservation.
func (a *ESDS) gossipDue() {
	a.resv.due |= a.members() &^ a.bit()
	a.requestReservation()
}

// requestReservation: "When a process P_i wants to initiate an I/O
// combination with process P_j, its first step is to send a message to the
// receiving process P_j requesting a reservation. P_i is allowed to do this
// only when its reservation status is free" (§3.3.5). The partner is the
// next peer after the last one asked, round-robin (the seed leaves the
// choice open), among those owed gossip, with something to gossip, and not
// backing off.
func (a *ESDS) requestReservation() {
	r := a.resv
	if r.status != statusFree {
		return
	}
	n := len(a.cfg.Nodes)
	for k := 1; k <= n; k++ {
		j := (r.last + k) % n
		if r.due&(1<<j) == 0 || r.backingOff&(1<<j) != 0 {
			continue
		}
		if a.removed&(1<<j) != 0 || !a.gossipEnabled(j) {
			r.due &^= 1 << j
			continue
		}
		r.last = j
		r.nextSeq++
		r.stats.Requests++
		a.setStatus(statusNegotiating, j, r.nextSeq, 0)
		a.sendResv(j, message{Kind: kindReserve, Seq: r.nextSeq})
		return
	}
}

// receiveReservationRequest: "Whenever a process is in free reservation
// status and there is an incoming reservation request, the process may grant
// the request" (§3.3.5). It always grants when free (progress needs it) and
// rejects otherwise; a request it has answered before gets the same answer.
func (a *ESDS) receiveReservationRequest(j int, m message) {
	r := a.resv
	if m.Seq < r.answered[j].seq {
		return // a stale copy: P_j has moved on to a later request
	}
	if r.answered[j].seq == m.Seq {
		kind := byte(kindReject)
		if r.answered[j].granted {
			kind = kindGrant
		}
		a.sendResv(j, message{Kind: kind, Seq: m.Seq})
		return
	}
	free := r.status == statusFree
	if a.proto.doubleReserve && r.status == statusReserved {
		free = true // broken: a reserved process grants again, dropping its first reservation
	}
	r.answered[j] = answer{seq: m.Seq, granted: free}
	if !free {
		r.stats.Rejections++
		a.sendResv(j, message{Kind: kindReject, Seq: m.Seq})
		return
	}
	a.grantReservation(j, m)
}

// grantReservation: P_j "must enter the reserved_i state to send a
// reservation acceptance message to P_i" (§3.3.5, Invariant 3.3.1's proof).
func (a *ESDS) grantReservation(j int, m message) {
	a.resv.stats.Grants++
	a.setStatus(statusReserved, j, m.Seq, m.Inc)
	a.sendResv(j, message{Kind: kindGrant, Seq: m.Seq})
}

// receiveGrant: "If the reservation was granted by P_j, P_i enters
// holding-reservation_j" (§3.3.5).
func (a *ESDS) receiveGrant(j int, m message) {
	r := a.resv
	if r.status != statusNegotiating || r.peer != j || r.seq != m.Seq {
		return // a late or repeated answer
	}
	r.q[j] = a.backoffBase()
	a.setStatus(statusHolding, j, m.Seq, m.Inc)
}

// receiveRejection: "If the reservation request was rejected, P_i bounces
// back to free reservation status" (§3.3.5), and backs off (§3.4.3). A
// rejected "Initiate X" (the peer no longer reserved for us: it restarted)
// ends the combination the same way.
func (a *ESDS) receiveRejection(j int, m message) {
	r := a.resv
	if (r.status != statusNegotiating && r.status != statusCombining) || r.peer != j || r.seq != m.Seq {
		return
	}
	a.setStatus(statusFree, 0, 0, 0)
	a.backOff(j)
	a.requestReservation()
}

// backOff is §3.4.3's exponential backoff: "P_i doubles the value of
// q_{i,j} after each rejected reservation request to P_j, and adds a random
// term from a fixed range to q_{i,j}", and waits q_{i,j} before asking P_j
// again (capped: see the package doc).
func (a *ESDS) backOff(j int) {
	r := a.resv
	q := 2*r.q[j] + time.Duration(a.cfg.Rand.Int63n(int64(a.backoffJitter())+1))
	r.q[j] = min(q, a.backoffCap())
	r.backingOff |= 1 << j
	a.Emit(automaton.SetTimer{ID: timerBackoff + automaton.TimerID(j), After: r.q[j]})
}

// backoffOver: q_{i,j} has passed; P_j may be asked again.
func (a *ESDS) backoffOver(j int) {
	a.resv.backingOff &^= 1 << j
	a.requestReservation()
}

// onResvTimer runs the current status's pending step: resend the request
// (negotiating), initiate (holding-reservation), or resend "Initiate X"
// (combining).
func (a *ESDS) onResvTimer() {
	r := a.resv
	switch r.status {
	case statusNegotiating:
		a.Emit(automaton.SetTimer{ID: timerResv, After: a.retransmit})
		a.sendResv(r.peer, message{Kind: kindReserve, Seq: r.seq})
	case statusHolding:
		a.initiateGossip()
	case statusCombining:
		a.Emit(automaton.SetTimer{ID: timerResv, After: a.retransmit})
		a.sendResv(r.peer, message{Kind: kindInitiate, Seq: r.seq, Inner: r.inner})
	}
}

// peerGone releases the reservation this replica has with peer j when j
// has restarted (its process is gone) or been removed: the reservation was
// with a process that no longer exists. A restart leaves negotiating_j as
// it is: the request is resent, and the new process answers it (the answer
// that revealed the restart may be its grant).
func (a *ESDS) peerGone(j int, removed bool) {
	r := a.resv
	r.answered[j], r.done[j], r.doneMsg[j] = answer{}, answer{}, nil
	if r.status != statusFree && r.peer == j && (removed || r.status != statusNegotiating) {
		a.setStatus(statusFree, 0, 0, 0)
	}
}

// onReservationMessage takes one of impl=simple's messages from peer j.
func (a *ESDS) onReservationMessage(j int, m message) {
	if a.resv == nil {
		return // impl=optimised: not ours
	}
	old := a.peers[j].inc
	if !a.peerIncarnation(j, m.Inc) {
		return // from an earlier incarnation of the peer
	}
	if old != 0 && old != m.Inc {
		a.peerGone(j, false)
	}
	a.setRemoved(a.removed | m.Removed)
	switch m.Kind {
	case kindReserve:
		a.receiveReservationRequest(j, m)
	case kindGrant:
		a.receiveGrant(j, m)
	case kindReject:
		a.receiveRejection(j, m)
	case kindInitiate:
		a.receiveInitiate(j, m)
	case kindDone:
		a.receiveDone(j, m)
	}
}

// releaseRemoved frees a reservation with a peer removed from the
// membership; then, if free, asks for the next one. Run after every step.
func (a *ESDS) releaseRemoved() {
	r := a.resv
	if r.status != statusFree && a.removed&(1<<r.peer) != 0 {
		a.peerGone(r.peer, true)
	}
	a.requestReservation()
}
