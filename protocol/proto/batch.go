package proto

import (
	"fmt"
	"slices"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/wire"
)

// Batch messages: several messages of one protocol to one peer, in one.
//
// A protocol that steps client batches (automaton.ClientBatch) emits, in
// one step, many messages to each peer (ABD: one query per request). Coalesce
// packs the Sends of one step that go to the same peer into batch messages
// of the protocol's batch kind: the header, the number of messages and each
// message whole (wire.Encoder.Bytes), in emission order. A receiver opens
// one with SplitBatch and handles each message as if it had arrived alone;
// the replies it emits in that step go back coalesced the same way. A batch
// never holds a batch.

// MaxBatchBytes bounds a batch message's contents: Coalesce starts a new
// batch message to the same peer once one holds that much (a message
// larger than the bound travels alone). Far inside a peer frame
// (transport.DefaultMaxFrame, 64 MB), and small enough that one batch
// does not hold a peer's link for long.
const MaxBatchBytes = 1 << 20

// BatchStep reports whether in is a batch step of a protocol whose batch
// messages are of kind kind: a ClientBatch, or a peer message of that kind
// (byte 1 of a message is its kind, byte 0 its version). In such a step a
// protocol coalesces its messages to one peer (Coalesce).
func BatchStep(in automaton.Input, kind byte) bool {
	switch in := in.(type) {
	case automaton.ClientBatch:
		return true
	case automaton.PeerMessage:
		return len(in.Msg) > 1 && in.Msg[1] == kind
	}
	return false
}

// Coalesce rewrites outs, a step's outputs, so that the Sends to one peer
// leave as batch messages of kind kind (see above): each batch takes the
// place of its last message in outs, so it waits for every record that
// any of its messages waited for (the durability rule: a Send may be held
// later, never released earlier) and it still leaves after every output
// emitted before it. Sends marked Early are left alone, as are peers with
// one Send in the step: outs is returned unchanged when no peer gets two.
func (h Header) Coalesce(outs []automaton.Output, kind byte) []automaton.Output {
	// Peers are few (the cluster's nodes): a slice searched linearly, no
	// map, so that a step with one Send per peer allocates nothing here.
	type peer struct {
		to    automaton.NodeID
		left  int // Sends to this peer not yet placed
		msgs  [][]byte
		size  int
		multi bool
	}
	var buf [8]peer
	peers := buf[:0]
	find := func(to automaton.NodeID) *peer {
		for i := range peers {
			if peers[i].to == to {
				return &peers[i]
			}
		}
		return nil
	}
	many := false
	for _, o := range outs {
		if s, ok := o.(automaton.Send); ok && !s.Early {
			if p := find(s.To); p != nil {
				p.left++
				p.multi, many = true, true
			} else {
				peers = append(peers, peer{to: s.To, left: 1})
			}
		}
	}
	if !many {
		return outs
	}
	res := make([]automaton.Output, 0, len(outs))
	for _, o := range outs {
		s, ok := o.(automaton.Send)
		if !ok || s.Early {
			res = append(res, o)
			continue
		}
		p := find(s.To)
		if !p.multi {
			res = append(res, o)
			continue
		}
		p.left--
		p.msgs = append(p.msgs, s.Msg)
		p.size += len(s.Msg)
		if p.left == 0 || p.size >= MaxBatchBytes {
			res = append(res, automaton.Send{To: s.To, Msg: h.batch(kind, p.msgs, p.size)})
			p.msgs, p.size = nil, 0
		}
	}
	return res
}

// batch encodes msgs as one batch message (one message travels as itself).
func (h Header) batch(kind byte, msgs [][]byte, size int) []byte {
	if len(msgs) == 1 {
		return msgs[0]
	}
	e := h.Message(kind, size+8+4*len(msgs))
	e.Uvarint(uint64(len(msgs)))
	for _, m := range msgs {
		e.Bytes(m)
	}
	return e.B
}

// maxBatchMsgs bounds the message count a batch may claim before any is
// read, so that a corrupt count cannot make SplitBatch allocate much.
const maxBatchMsgs = 1 << 16

// SplitBatch returns the messages of a batch message b of kind kind
// (Coalesce), aliasing b. A corrupt batch is an error; so is a batch
// inside a batch.
func (h Header) SplitBatch(b []byte, kind byte) ([][]byte, error) {
	return h.AppendBatch(nil, b, kind)
}

// AppendBatch is SplitBatch appending the messages to dst: a caller that
// keeps dst as scratch between messages reads a batch without allocating
// once dst has grown (ABD's replicas and coordinators read one per peer
// per step). On an error it returns nil.
func (h Header) AppendBatch(dst [][]byte, b []byte, kind byte) ([][]byte, error) {
	k, err := h.MessageKind(b)
	if err != nil {
		return nil, err
	}
	if k != kind {
		return nil, fmt.Errorf("%s: message kind %d is not a batch", h.Protocol, k)
	}
	d := &wire.Decoder{B: b[2:]}
	n := d.Count(maxBatchMsgs, 1)
	msgs := slices.Grow(dst, n)
	for range n {
		m := d.Bytes()
		if d.Err() != nil {
			break
		}
		if len(m) >= 2 && m[1] == kind {
			return nil, fmt.Errorf("%s: a batch inside a batch", h.Protocol)
		}
		msgs = append(msgs, m)
	}
	if err := d.Done(); err != nil {
		return nil, err
	}
	return msgs, nil
}

// Sends holds a step's Sends (none Early) aside from its other outputs, each with its
// place among them, so that a protocol that coalesces (ABD) boxes one Send
// per batch message instead of one per message: Place then builds what
// Coalesce builds from the outputs with every Send in its place. Reset it
// at the start of every step.
type Sends struct {
	list []pendingSend
	msgs [][]byte // Place's scratch: the messages of its batches
}

type pendingSend struct {
	at      int // the Send came after this many other outputs
	to      automaton.NodeID
	msg     []byte
	scratch bool // msg is in a buffer the protocol reuses after the step
}

// Add records a Send to to of msg emitted after the step's first at
// other outputs (len of the Outbox's Out at that moment).
func (s *Sends) Add(at int, to automaton.NodeID, msg []byte) {
	s.list = append(s.list, pendingSend{at: at, to: to, msg: msg})
}

// AddScratch is Add for a message in a buffer the protocol reuses once
// the step's outputs are built (Place): Place copies it when it leaves
// alone; in a batch message it is copied anyway. A protocol encodes its
// many small replies into one such buffer instead of allocating each.
func (s *Sends) AddScratch(at int, to automaton.NodeID, msg []byte) {
	s.list = append(s.list, pendingSend{at: at, to: to, msg: msg, scratch: true})
}

// Reset forgets the last step's Sends (their messages are not kept). It
// leaves s empty and never nil, so that s looks the same after any step
// and after Reset on a new value (a model checker's reflective walk tells
// a nil list from an empty one).
func (s *Sends) Reset() {
	if s.list == nil {
		s.list = make([]pendingSend, 0, 8)
		s.msgs = make([][]byte, 0, 8)
		return
	}
	clear(s.list)
	s.list = s.list[:0]
}

// Place returns outs with s's Sends in their places, coalesced as
// Coalesce coalesces them (the same outputs, in the same order): a peer's
// batch message takes the place of its last message, MaxBatchBytes
// starts another, a peer with one message gets it alone. The result is
// outs grown in place (it allocates only when outs lacks the room).
func (h Header) Place(outs []automaton.Output, s *Sends, kind byte) []automaton.Output {
	if len(s.list) == 0 {
		return outs
	}
	type peer struct {
		to   automaton.NodeID
		left int
		msgs [][]byte
		size int
	}
	var pbuf [8]peer
	peers := pbuf[:0]
	find := func(to automaton.NodeID) *peer {
		for i := range peers {
			if peers[i].to == to {
				return &peers[i]
			}
		}
		return nil
	}
	for _, p := range s.list {
		if q := find(p.to); q != nil {
			q.left++
		} else {
			peers = append(peers, peer{to: p.to, left: 1})
		}
	}
	// Every peer's messages in one array reused every step (s.msgs),
	// each peer's part as long as its Sends.
	all := slices.Grow(s.msgs[:0], len(s.list))[:len(s.list)]
	off := 0
	for i := range peers {
		peers[i].msgs = all[off : off : off+peers[i].left]
		off += peers[i].left
	}
	// The Sends that leave, each at the place of its last message (in
	// emission order, so their places do not decrease).
	type placed struct {
		at  int
		to  automaton.NodeID
		msg []byte
	}
	var sbuf [16]placed
	out := sbuf[:0]
	for _, p := range s.list {
		q := find(p.to)
		q.left--
		if len(q.msgs) == 0 && q.left == 0 {
			out = append(out, placed{p.at, p.to, owned(p)}) // alone
			continue
		}
		q.msgs = append(q.msgs, p.msg)
		q.size += len(p.msg)
		if q.left == 0 || q.size >= MaxBatchBytes {
			b := h.batch(kind, q.msgs, q.size)
			if len(q.msgs) == 1 {
				b = owned(p) // one message travels as itself: p's
			}
			out = append(out, placed{p.at, p.to, b})
			q.msgs, q.size = q.msgs[len(q.msgs):], 0
		}
	}
	// Merge from the back: outs[i] moves up past the Sends placed after it.
	n := len(outs)
	outs = slices.Grow(outs, len(out))[:n+len(out)]
	i, j := n-1, len(out)-1
	for k := len(outs) - 1; j >= 0; k-- {
		if i >= out[j].at {
			outs[k] = outs[i]
			i--
		} else {
			outs[k] = automaton.Send{To: out[j].to, Msg: out[j].msg}
			j--
		}
	}
	clear(all) // keeps no message past the step
	s.msgs = all[:0]
	return outs
}

// owned is p's message, copied when it is in the protocol's scratch buffer.
func owned(p pendingSend) []byte {
	if p.scratch {
		return append([]byte(nil), p.msg...)
	}
	return p.msg
}
