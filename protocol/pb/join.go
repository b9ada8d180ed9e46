package pb

import (
	"github.com/synod-dev/synod/automaton"
)

// Joining: a restarted node, or a backup the primary dropped, rejoins as a
// backup by state transfer (the Grid Services thesis III.A: "the integration of new
// backups"; "integration of a new backup may require a large amount of
// state to be transferred. The details ... are outside the scope of this
// chapter"; the package doc, "Joining", gives ours).

// becomeJoining forgets the state (it may hold entries no primary kept)
// and waits to rejoin.
func (a *PB) becomeJoining() {
	a.role = roleJoining
	a.m = nil
	a.ahead, a.awaiting = nil, false
	a.log, a.logStart, a.stable = nil, 0, 0
	a.peers, a.inflight, a.waiters = nil, nil, nil
	a.heard, a.misses = false, 0
	a.waiting = false
	a.join = &joining{}
}

// reset abandons a transfer in progress.
func (j *joining) reset() {
	*j = joining{asked: j.asked}
}

// sendJoin asks the primary this node knows of for the state.
func (a *PB) sendJoin() {
	p := a.primary()
	if p == "" || p == a.cfg.Self {
		return
	}
	a.join.asked = true
	a.send(p, message{Kind: kindJoin})
}

// onJoin starts a transfer at the primary. A member that asks has lost its
// state: it leaves the member list first. The image is the state at
// m.applied; every entry after it goes to the joiner as an update, which it
// holds until the image is complete (package doc, "Joining").
func (a *PB) onJoin(from automaton.NodeID) {
	if a.role != rolePrimary || a.collecting {
		return
	}
	if _, ok := a.pos[from]; !ok {
		return
	}
	if p := a.peers[from]; p != nil && p.xfer != nil && p.heard {
		return // a transfer under way (a duplicated or repeated join)
	} else if p != nil && p.xfer != nil && p.xfer.image != nil {
		// A join repeated while the image is not delivered: the same
		// transfer again from its start, under the same nonce. A new
		// nonce here stalled the namespace (pb-stall): the joiner that
		// installs the first transfer's image asks to become a member
		// under the first nonce, which the primary no longer counts, and
		// it ignores the second transfer's chunks, being no longer a
		// joiner; a primary with no other member backup then answers
		// nothing, for ever.
		p.heard = true
		p.xfer.sent, p.xfer.got = 0, 0
		a.sendChunks(from, p.xfer)
		return
	} else if p != nil && p.member {
		a.dropPeer(from)
	}
	x := &transfer{nonce: a.cfg.Rand.Uint64() | 1, index: a.m.applied, image: a.m.encode()}
	a.peers[from] = &peer{acked: x.index, heard: true, xfer: x}
	a.sendChunks(from, x)
	a.prune()
}

// sendChunks sends the next chunks of a transfer, chunkWindow at most
// unacknowledged.
func (a *PB) sendChunks(to automaton.NodeID, x *transfer) {
	size := uint64(a.chunkBytes)
	total := uint64(len(x.image))
	for x.sent < total && x.sent < x.got+chunkWindow*size || x.sent == 0 && total == 0 {
		end := min(x.sent+size, total)
		a.send(to, message{Kind: kindChunk, View: a.view, Nonce: x.nonce, Index: x.index,
			Offset: x.sent, Total: total, Data: x.image[x.sent:end]})
		x.sent = end
		if total == 0 {
			break
		}
	}
}

// onChunkAck moves a transfer's window.
func (a *PB) onChunkAck(from automaton.NodeID, m message) {
	if a.role != rolePrimary {
		return
	}
	p := a.peers[from]
	if p == nil || p.xfer == nil || p.xfer.nonce != m.Nonce {
		return
	}
	p.heard = true
	if m.Offset > p.xfer.got {
		p.xfer.got = m.Offset
	}
	if p.xfer.got >= uint64(len(p.xfer.image)) {
		p.xfer.image = nil // delivered; the peer now asks to be a member
		return
	}
	a.sendChunks(from, p.xfer)
}

// onChunk receives a piece of the image. A chunk of another transfer
// (a new primary, or a restarted one) starts over.
func (a *PB) onChunk(from automaton.NodeID, m message) {
	if a.role != roleJoining || m.View.Less(a.view) {
		return
	}
	j := a.join
	if m.View != a.view || from != a.primary() {
		return // the heartbeat of that view comes first
	}
	if m.Nonce != j.nonce {
		ahead := j.ahead
		j.reset()
		j.from, j.nonce, j.index, j.total = from, m.Nonce, m.Index, m.Total
		j.ahead = map[uint64]entry{}
		for i, e := range ahead {
			if i > j.index {
				j.ahead[i] = e
			}
		}
	}
	j.active = true
	if m.Offset == uint64(len(j.buf)) {
		j.buf = append(j.buf, m.Data...)
	}
	a.send(from, message{Kind: kindChunkAck, Nonce: j.nonce, Offset: uint64(len(j.buf))})
	if uint64(len(j.buf)) >= j.total {
		a.install()
	}
}

// joinerUpdate holds an update while the image is incomplete, and
// acknowledges the updates received in order after the image's index.
func (a *PB) joinerUpdate(e entry) {
	j := a.join
	if j.nonce == 0 || e.index <= j.index {
		return
	}
	if len(j.ahead) < maxAhead {
		j.ahead[e.index] = e
	}
	n := j.index
	for {
		if _, ok := j.ahead[n+1]; !ok {
			break
		}
		n++
	}
	a.send(j.from, message{Kind: kindAck, View: a.view, Index: n, Nonce: j.nonce})
}

// install is inject_state for a whole image: the state at the image's
// index, then the updates that followed it, in order. The node is then a
// backup that asks the primary to make it a member.
func (a *PB) install() {
	j := a.join
	m, err := decodeMachine(a.cfg.Service, j.buf)
	if err != nil || m.applied != j.index {
		j.reset()
		return
	}
	a.role = roleBackup
	a.m = m
	a.sv = a.view
	a.persistImage() // durable before the node asks to be a member
	a.log, a.logStart = nil, m.applied
	a.ahead = j.ahead
	a.join = nil
	a.awaiting, a.joinNonce, a.awaited = true, j.nonce, 0
	a.heard, a.misses = true, 0
	if !a.drain() {
		return
	}
	a.send(a.primary(), message{Kind: kindAck, View: a.view, Index: a.m.applied, Joined: true, Nonce: a.joinNonce})
}
