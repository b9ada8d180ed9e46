package node

import (
	"sync"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/wire"
)

// Coalesced heartbeats (issue 33; docs/SHARDING.md). With many groups on a
// node, each idle group's heartbeat tick sent its own messages, one frame
// and one write per peer each: N groups cost N frames per peer per tick.
// Dragonboat and CockroachDB send one message per node pair per tick that
// carries every group's heartbeat; so does this node, in two parts.
//
//  1. The ticks fire together. A timer with slack (automaton.SetTimer.Slack:
//     paxos's heartbeat tick, which may fire up to a quarter of a heartbeat
//     late) fires at the first point of a node-wide grid at or after its
//     deadline (coalesced), the grid's step being the largest of 1, 2, 5,
//     10, 20, 50, 100 ms... not above the slack. Every group with the same
//     heartbeat ticks at the same instants, whatever its phase when it
//     started: it re-arms from a grid point and lands on one again. With
//     paxos's defaults (heartbeat 50 ms, slack 12.5 ms, step 10 ms) a group
//     ticks every 60 ms, on one of 6 grid points.
//  2. Their messages leave in one frame per peer. What a lazy event's step
//     sends (a slack timer's firing, or a message that came in a batch: the
//     acknowledgements of batched heartbeats) waits up to coalesceWindow in
//     a per-peer batch, then goes as one transport frame of namespace
//     batchNS listing (namespace, message) pairs; the receiver hands each to
//     its group's loop, as a lazy event. So a node sends each peer one frame
//     per grid point for all its idle groups' heartbeats, and receives one
//     back with all the acknowledgements.
//
// Decided here, not in the protocol: only the runtime knows the other
// groups, and the protocol stays pure; it only says how late its tick may
// be. What a batch costs: its messages leave up to coalesceWindow later (a
// heartbeat tick's, never a client request's: a quorum read starts its own
// round, not lazy, unless a tick's round is already in flight, which it
// then waits for as before, up to two windows longer), and a batch may
// overtake or be overtaken by the same group's other messages, which every
// automaton tolerates (package automaton: messages may be reordered). Only
// namespaces on the TCP peer transport are batched (the gRPC ones send
// message by message).
const (
	batchNS        = config.GroupSep + "batch"
	coalesceWindow = 2 * time.Millisecond
	coalesceMax    = 32 << 10 // a batch this large leaves at once
	maxBatchMsgs   = 1 << 20
)

// coalescer holds each peer's batch being gathered.
type coalescer struct {
	mu sync.Mutex
	by map[automaton.NodeID]*msgBatch
}

type msgBatch struct {
	e wire.Encoder
	n uint64
}

// sendCoalesced adds a message for peer to to its batch, which leaves
// coalesceWindow after its first message, or at once when full.
func (n *Node) sendCoalesced(to automaton.NodeID, ns string, msg []byte) {
	c := &n.co
	c.mu.Lock()
	if c.by == nil {
		c.by = map[automaton.NodeID]*msgBatch{}
	}
	b := c.by[to]
	if b == nil {
		b = &msgBatch{}
		c.by[to] = b
		time.AfterFunc(coalesceWindow, func() { n.flushBatch(to, b) })
	}
	b.e.String(ns)
	b.e.Bytes(msg)
	b.n++
	full := len(b.e.B) >= coalesceMax
	c.mu.Unlock()
	if full {
		n.flushBatch(to, b)
	}
}

// flushBatch sends batch b to peer to, if it is still that peer's batch
// being gathered (the window's timer and a full batch may both flush it).
func (n *Node) flushBatch(to automaton.NodeID, b *msgBatch) {
	c := &n.co
	c.mu.Lock()
	if c.by[to] != b {
		c.mu.Unlock()
		return
	}
	delete(c.by, to)
	c.mu.Unlock()
	e := wire.Encoder{B: make([]byte, 0, len(b.e.B)+10)}
	e.Uvarint(b.n)
	e.B = append(e.B, b.e.B...)
	n.tr.Send(to, batchNS, e.B) // lost: like the messages it carries
}

// onBatch hands each message of a peer's batch to its group's loop, as a
// lazy event (transport reader goroutine).
func (n *Node) onBatch(from automaton.NodeID, msg []byte) {
	d := wire.NewDecoder(msg)
	k := d.Count(maxBatchMsgs, 2)
	type one struct {
		ns  string
		msg []byte
	}
	ms := make([]one, 0, k)
	for i := 0; i < k && d.Err() == nil; i++ {
		ms = append(ms, one{d.String(), d.Bytes()})
	}
	if d.Done() != nil {
		n.log.Warn("bad coalesced batch; dropped", "peer", from)
		return
	}
	for _, m := range ms {
		n.deliverOne(from, m.ns, m.msg, true, false)
	}
}
