package abd

import (
	"slices"

	"github.com/synod-dev/synod/protocol/proto"
)

// One batch message in flight per peer (parameter peer_pipeline; issue
// 28, branch abd50, session 50).
//
// With closed-loop clients a coordinator's clients split into cohorts
// that begin round groups of their own (batch.go, "Cohorts"), and each
// group pays its own peer messages: a query and a store batch message to
// each peer and their answers, eight messages with three replicas, shared
// by the group's requests only. Merging the cohorts would need a wait
// for clients that are not in flight (gather's timer). This rule shares
// the messages instead, without a clock: while more than one round group
// is in flight, a coordinator that has sent phase messages (queries,
// stores) to a peer in an earlier step and has had no answer from it
// since holds the next phase messages for that peer, and sends them
// when the peer answers (the answer's step sends the held messages in
// the batch message it sends to that peer anyway: an in-flight group's
// next phase), or with the first message of any kind that goes to that
// peer (a replica's answer to the peer's own coordinator), or when any
// operation's retransmission timer fires, or once a peer's held messages
// reach proto.MaxBatchBytes. So with two cohorts in flight, one cohort's
// queries ride with the other's stores and come back with its
// acknowledgements: one batch message each way per peer per round
// instead of one per group and phase: the self-clocking of a pipelined
// Multi-Paxos leader (the next batch accumulates while one is in
// flight), per peer.
//
// A lone round group never holds (with one group in flight every phase
// message leaves at once, as with the rule off), so one client's
// operations send exactly what they send without it
// (TestPeerPipelineLoneClientUnchanged).
//
// Safety: holding a message is delaying it. The seed is silent on when
// a coordinator's phase messages leave (the ABD report §3.1.2 launches
// one thread per server at once); it says that messages reaching some
// servers late leave the system correct as long as a majority answers
// (§4.4.2, "Slow clients"), and the ABD paper's argument ("Sharing
// memory robustly", whose asynchronous model lets the network delay any
// message for a finite time) holds under any delays: which replicas
// answer a phase, and when, is all the adversary chooses, and an
// operation still completes only on a majority's answers, with the
// same query and propagate phases. Decision (issue 28, session 50): a
// coordinator may delay a phase message to a replica, as here, because
// the seed's and the paper's argument never depends on when it leaves.
// Liveness: an operation whose held message it needs for a majority
// keeps its retransmission timer, and any timer that fires sends every
// held message; a held message no operation needs (its operation had
// a majority without it: a peer down, say) waits until that peer sends
// anything or 1 MiB is held for it, so the memory it takes is bounded.
// The model checker runs
// peer_pipeline=false (model.go): a run with holds is a run of the
// protocol without them whose messages the network delayed, and the
// checker delivers messages in every order.

// pipeInit sizes the per-peer state of peer_pipeline.
func (a *ABD) pipeInit() {
	n := len(a.cfg.Nodes)
	a.owed = make([]bool, n)
	a.sentNow = make([]bool, n)
	a.phaseNow = make([]bool, n)
	a.held = make([][][]byte, n)
	a.heldBytes = make([]int, n)
	a.touched = a.touched[:0]
	a.nHeld = 0
}

// phaseTo sends the phase message at a.replies[at:] to replica i, or
// holds it while i owes an answer and other round groups are in flight.
func (a *ABD) phaseTo(i, at int) {
	if !a.peerPipe {
		a.reply(a.cfg.Nodes[i], at)
		return
	}
	if a.owed[i] && !a.sentNow[i] && len(a.groupLeft) > 1 && a.heldBytes[i] < proto.MaxBatchBytes {
		m := slices.Clone(a.replies[at:])
		a.held[i] = append(a.held[i], m)
		a.heldBytes[i] += len(m)
		a.nHeld++
		return
	}
	a.touch(i)
	a.phaseNow[i] = true
	a.reply(a.cfg.Nodes[i], at)
}

// touch notes a message to replica i in this step; the first one takes
// i's held messages along (placed before it).
func (a *ABD) touch(i int) {
	if a.sentNow[i] {
		return
	}
	a.sentNow[i] = true
	a.touched = append(a.touched, i)
	if len(a.held[i]) > 0 {
		a.flush(i)
	}
}

// flush sends replica i's held messages now.
func (a *ABD) flush(i int) {
	if !a.sentNow[i] {
		a.sentNow[i] = true
		a.touched = append(a.touched, i)
	}
	a.phaseNow[i] = true
	for j, m := range a.held[i] {
		a.sends.Add(len(a.Out), a.cfg.Nodes[i], m)
		a.held[i][j] = nil
	}
	a.nHeld -= len(a.held[i])
	a.held[i] = a.held[i][:0]
	a.heldBytes[i] = 0
}

// answered notes an answer from replica i: it owes none now, and what
// was held for it leaves.
func (a *ABD) answered(i int) {
	if !a.peerPipe {
		return
	}
	a.owed[i] = false
	if len(a.held[i]) > 0 {
		a.flush(i)
	}
}

// flushAll sends every held message (a retransmission timer fired).
func (a *ABD) flushAll() {
	if a.nHeld == 0 {
		return
	}
	for i := range a.held {
		if len(a.held[i]) > 0 {
			a.flush(i)
		}
	}
}

// pipeEnd ends a step: a replica sent phase messages in it owes an
// answer.
func (a *ABD) pipeEnd() {
	for _, i := range a.touched {
		if a.phaseNow[i] {
			a.owed[i] = true
		}
		a.sentNow[i], a.phaseNow[i] = false, false
	}
	a.touched = a.touched[:0]
}
