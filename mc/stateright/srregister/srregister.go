// Package srregister is Stateright's linearizable register example
// (stateright 0.31, examples/linearizable-register.rs: ABD, Attiya, Bar-
// Noy and Dolev, "Sharing Memory Robustly in Message-Passing Systems",
// §3, with the reader's write-back) written as a Synod protocol: one
// automaton per server under the contract of package automaton, with the
// example's actions, messages and guards, so that Synod's model checker
// (mc.CheckActors, Stateright's actor semantics) and Stateright check the
// same state space (issue 32 item 6).
//
// The example, as it is: the server a client contacts coordinates its
// operation (one at a time: a request that arrives while another is in
// progress is left waiting). Phase 1 queries every server for its
// (sequence, value), counting its own; on a majority it takes the highest
// sequence, for a write one more (clock + 1, itself) with the new value,
// for a read that value as found; phase 2 records that (sequence, value)
// at every server (each keeps it when it is higher than its own, the
// coordinator too) and, on a majority of acknowledgements, answers.
//
// Decisions where the example is Rust and Synod is not: request ids are
// Synod's (they name the client, Stateright's requester id); a value is
// one byte of "set x v" (0, the example's '\0' default, answers nil).
//
// Not registered with the runtimes: Synod's own ABD (protocol/abd) is the
// deployable register; this one exists to be model checked side by side
// with Stateright.
//
// Node symmetry does not hold: a sequence breaks ties between writers by
// the coordinator's index (as protocol/abd's tags do by node name), and
// the clients' targets name servers.
package srregister

import (
	"encoding/binary"
	"fmt"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Protocol is the example (Broken false) or its broken variant, whose
// coordinator answers a get from its own copy without asking a quorum
// (ABD §3's read phases, left out): a server that missed a completed
// write returns the older value, which the linearizability check catches
// with 3 servers (with 2 a write completes only once both servers hold
// it).
type Protocol struct{ Broken bool }

// Name implements automaton.Protocol.
func (p Protocol) Name() string {
	if p.Broken {
		return "sr-register-broken-localread"
	}
	return "sr-register"
}

// IdempotentRetry implements automaton.Protocol.
func (Protocol) IdempotentRetry() bool { return false }

const maxNodes = 8

// New implements automaton.Protocol.
func (p Protocol) New(cfg automaton.Config) (automaton.Automaton, error) {
	if len(cfg.Nodes) > maxNodes {
		return nil, fmt.Errorf("srregister: at most %d servers", maxNodes)
	}
	n := &Node{ids: cfg.Nodes, self: -1, broken: p.Broken}
	for i, id := range cfg.Nodes {
		if id == cfg.Self {
			n.self = i
		}
	}
	if n.self < 0 {
		return nil, fmt.Errorf("srregister: %s is not a member", cfg.Self)
	}
	n.seq = seq{0, uint8(n.self)}
	return n, nil
}

// seq is the example's (LogicalClock, Id).
type seq struct {
	clock uint64
	id    uint8
}

func (s seq) less(o seq) bool { return s.clock < o.clock || s.clock == o.clock && s.id < o.id }

type response struct {
	s seq
	v byte
}

// Node is one server.
type Node struct {
	ids    []automaton.NodeID // shared, never changed
	self   int
	broken bool

	seq seq
	val byte
	// phase: 0 none, 1 querying, 2 recording.
	phase     uint8
	req       automaton.RequestID
	hasWrite  bool // phase 1: a write (of write)
	write     byte
	responded uint16 // phase 1: who answered the query
	responses [maxNodes]response
	hasRead   bool // phase 2: a read (of read)
	read      byte
	acks      uint16 // phase 2: who acknowledged the record
}

// Message kinds.
const (
	mQuery byte = 1 + iota
	mAckQuery
	mRecord
	mAckRecord
)

type message struct {
	kind byte
	req  automaton.RequestID
	s    seq
	v    byte
}

func (m message) encode() []byte {
	b := make([]byte, 0, 24)
	b = append(b, m.kind)
	b = binary.AppendUvarint(b, m.req.Client)
	b = binary.AppendUvarint(b, m.req.Seq)
	if m.kind == mAckQuery || m.kind == mRecord {
		b = binary.AppendUvarint(b, m.s.clock)
		b = append(b, m.s.id, m.v)
	}
	return b
}

func decode(data []byte) (message, bool) {
	var m message
	if len(data) == 0 {
		return m, false
	}
	m.kind, data = data[0], data[1:]
	var n int
	if m.req.Client, n = binary.Uvarint(data); n <= 0 {
		return m, false
	}
	data = data[n:]
	if m.req.Seq, n = binary.Uvarint(data); n <= 0 {
		return m, false
	}
	data = data[n:]
	switch m.kind {
	case mAckQuery, mRecord:
		if m.s.clock, n = binary.Uvarint(data); n <= 0 || len(data) != n+2 {
			return m, false
		}
		m.s.id, m.v = data[n], data[n+1]
		return m, true
	case mQuery, mAckRecord:
		return m, len(data) == 0
	}
	return m, false
}

// Step implements automaton.Automaton: one handler per action of the
// example's on_msg, in its order.
func (n *Node) Step(in automaton.Input) []automaton.Output {
	switch in := in.(type) {
	case automaton.ClientRequest:
		op := in.Req.Op
		switch {
		case n.phase != 0:
		case op.Kind == "set" && len(op.Args) == 1 && len(op.Args[0]) == 1:
			return n.onInvoke(in.Req.ID, true, op.Args[0][0])
		case op.Kind == "get" && n.broken:
			return n.onGetLocal(in.Req.ID)
		case op.Kind == "get":
			return n.onInvoke(in.Req.ID, false, 0)
		}
	case automaton.PeerMessage:
		m, ok := decode(in.Msg)
		if !ok {
			return nil
		}
		from := -1
		for i, id := range n.ids {
			if id == in.From {
				from = i
			}
		}
		if from < 0 {
			return nil
		}
		switch {
		case m.kind == mQuery:
			return n.onQuery(from, m)
		case m.kind == mAckQuery && n.phase == 1 && n.req == m.req:
			return n.onAckQuery(from, m)
		case m.kind == mRecord:
			return n.onRecord(from, m)
		case m.kind == mAckRecord && n.phase == 2 && n.req == m.req && n.acks&(1<<from) == 0:
			return n.onAckRecord(from)
		}
	}
	return nil
}

// onInvoke starts a put or a get: phase 1 queries every server, the
// coordinator's own answer counted (ABD §3; the example's Put and Get).
func (n *Node) onInvoke(id automaton.RequestID, write bool, v byte) []automaton.Output {
	n.phase, n.req = 1, id
	n.hasWrite, n.write = write, v
	n.responded, n.responses = 1<<n.self, [maxNodes]response{}
	n.responses[n.self] = response{n.seq, n.val}
	return n.broadcast(message{kind: mQuery, req: id})
}

// onGetLocal is the broken variant's get: the coordinator's own value.
func (n *Node) onGetLocal(id automaton.RequestID) []automaton.Output {
	r := service.Nil()
	if n.val != 0 {
		r = service.Bytes([]byte{n.val})
	}
	return []automaton.Output{automaton.Respond{Resp: automaton.Response{ID: id, Result: r}}}
}

// onQuery answers a query with the server's (sequence, value).
func (n *Node) onQuery(from int, m message) []automaton.Output {
	return []automaton.Output{automaton.Send{To: n.ids[from], Msg: message{kind: mAckQuery, req: m.req, s: n.seq, v: n.val}.encode()}}
}

// onAckQuery counts an answer; on a majority phase 2 records the highest
// (sequence, value), a write's with the next sequence and its value.
func (n *Node) onAckQuery(from int, m message) []automaton.Output {
	n.responded |= 1 << from
	n.responses[from] = response{m.s, m.v}
	if count(n.responded) != automaton.Majority(len(n.ids)) {
		return nil
	}
	var best response
	first := true
	for i := range n.ids {
		if n.responded&(1<<i) != 0 && (first || best.s.less(n.responses[i].s)) {
			best, first = n.responses[i], false
		}
	}
	s, v := best.s, best.v
	n.hasRead, n.read = false, 0
	if n.hasWrite {
		s, v = seq{s.clock + 1, uint8(n.self)}, n.write
	} else {
		n.hasRead, n.read = true, v
	}
	out := n.broadcast(message{kind: mRecord, req: n.req, s: s, v: v})
	if n.seq.less(s) {
		n.seq, n.val = s, v
	}
	n.phase = 2
	n.hasWrite, n.write, n.responded, n.responses = false, 0, 0, [maxNodes]response{}
	n.acks = 1 << n.self
	return out
}

// onRecord keeps a higher (sequence, value) and acknowledges.
func (n *Node) onRecord(from int, m message) []automaton.Output {
	if n.seq.less(m.s) {
		n.seq, n.val = m.s, m.v
	}
	return []automaton.Output{automaton.Send{To: n.ids[from], Msg: message{kind: mAckRecord, req: m.req}.encode()}}
}

// onAckRecord counts an acknowledgement; on a majority the operation is
// answered.
func (n *Node) onAckRecord(from int) []automaton.Output {
	n.acks |= 1 << from
	if count(n.acks) != automaton.Majority(len(n.ids)) {
		return nil
	}
	r := service.OK()
	if n.hasRead {
		r = service.Nil()
		if n.read != 0 {
			r = service.Bytes([]byte{n.read})
		}
	}
	id := n.req
	n.phase, n.req, n.hasRead, n.read, n.acks = 0, automaton.RequestID{}, false, 0, 0
	return []automaton.Output{automaton.Respond{Resp: automaton.Response{ID: id, Result: r}}}
}

func (n *Node) broadcast(m message) []automaton.Output {
	out := make([]automaton.Output, 0, len(n.ids))
	msg := m.encode()
	for i, id := range n.ids {
		if i != n.self {
			out = append(out, automaton.Send{To: id, Msg: msg})
		}
	}
	return out
}

func count(x uint16) int {
	c := 0
	for ; x != 0; x &= x - 1 {
		c++
	}
	return c
}

// AppendModelState implements automaton.ModelStater: every field but the
// constant membership (a phase's fields are zero outside it).
func (n *Node) AppendModelState(b []byte, rename func(automaton.RequestID) automaton.RequestID) []byte {
	b = binary.LittleEndian.AppendUint64(b, n.seq.clock)
	b = append(b, n.seq.id, n.val, n.phase)
	b = automaton.AppendModelID(b, n.req, rename)
	b = append(b, boolByte(n.hasWrite), n.write, byte(n.responded), byte(n.responded>>8))
	for i := range n.ids {
		if n.responded&(1<<i) != 0 {
			r := n.responses[i]
			b = binary.LittleEndian.AppendUint64(b, r.s.clock)
			b = append(b, r.s.id, r.v)
		}
	}
	return append(b, boolByte(n.hasRead), n.read, byte(n.acks), byte(n.acks>>8))
}

func boolByte(x bool) byte {
	if x {
		return 1
	}
	return 0
}

// CloneModel implements automaton.ModelStater (the state is one value).
func (n *Node) CloneModel() automaton.Automaton {
	c := *n
	return &c
}

// CopyModelTo implements mc.ModelCopier.
func (n *Node) CopyModelTo(dst automaton.Automaton) automaton.Automaton {
	if d, ok := dst.(*Node); ok {
		*d = *n
		return d
	}
	return n.CloneModel()
}

// DescribeModelMessage names a message as the example's Debug does.
func (n *Node) DescribeModelMessage(data []byte) string {
	m, ok := decode(data)
	if !ok {
		return fmt.Sprintf("%x", data)
	}
	id := fmt.Sprintf("%x/%d", m.req.Client, m.req.Seq)
	sv := fmt.Sprintf("(%d, n%d), %q", m.s.clock, m.s.id+1, m.v)
	switch m.kind {
	case mQuery:
		return "Query(" + id + ")"
	case mAckQuery:
		return "AckQuery(" + id + ", " + sv + ")"
	case mRecord:
		return "Record(" + id + ", " + sv + ")"
	default:
		return "AckRecord(" + id + ")"
	}
}
