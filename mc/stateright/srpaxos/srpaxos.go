// Package srpaxos is Stateright's single-decree Paxos example (stateright
// 0.31, examples/paxos.rs; Lamport, "Paxos Made Simple", §2) written as a
// Synod protocol: one automaton per server under the contract of package
// automaton, with the example's actions, messages and guards, so that
// Synod's model checker (mc.CheckActors, Stateright's actor semantics)
// and Stateright check the same state space (issue 32 item 6).
//
// The example, as it is: a server that receives a client's put while it
// has no proposal of its own starts a new term (ballot (round+1, itself)),
// counts its own promise and broadcasts Prepare; a server promises a
// higher ballot (Prepared, carrying its last accepted proposal); on a
// majority of promises the leader proposes the proposal of the highest
// ballot among them, or its client's, counts its own acceptance and
// broadcasts Accept; a server accepts a ballot at least its own
// (Accepted); on a majority of acceptances the leader is decided,
// broadcasts Decided and answers the proposal's requester (which may be
// another server's client: the proposal came from an earlier term). A
// decided server answers every get with the decided value and ignores
// everything else; an undecided server ignores gets (it cannot know that
// nothing was decided elsewhere). Each term is tied to one client request,
// as the example does (no leader stays leader).
//
// Decisions where the example is Rust and Synod is not: Stateright's
// proposal (request id, requester id, value) is (request id, value) here,
// since a Synod request id names its client; its value is a char, here
// one byte of "set x v" (a get of the undecided register is never
// answered, so nil is never returned); a ballot's id is the server's
// index (0 for the initial ballot (0, n1), as the example's Id 0).
// Proposals with equal ballots are equal, so the example's tie-break on
// the proposal when it takes the maximum of the promises never matters.
//
// Not registered with the runtimes: it decides one value for the life of
// the cluster (a register written once) and answers requests other
// servers received, which Synod's node and simulator do not route; it
// exists to be model checked.
//
// Node symmetry does not hold: a ballot orders terms by the proposer's
// index, so renaming servers changes which proposal wins, as ABD's tags
// do (mc/nodesym.go); and the clients' targets name servers.
package srpaxos

import (
	"encoding/binary"
	"fmt"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Protocol is the example (Broken false) or its broken variant, whose
// leader proposes its own client's value without looking at the
// proposals its promises carry (Paxos Made Simple §2.2's rule that the
// proposal of the highest-numbered promise wins, left out): two values
// can be chosen, which the linearizability check catches.
type Protocol struct{ Broken bool }

// Name implements automaton.Protocol.
func (p Protocol) Name() string {
	if p.Broken {
		return "sr-paxos-broken-ownvalue"
	}
	return "sr-paxos"
}

// IdempotentRetry implements automaton.Protocol.
func (Protocol) IdempotentRetry() bool { return false }

const maxNodes = 8

// New implements automaton.Protocol.
func (p Protocol) New(cfg automaton.Config) (automaton.Automaton, error) {
	if len(cfg.Nodes) > maxNodes {
		return nil, fmt.Errorf("srpaxos: at most %d servers", maxNodes)
	}
	n := &Node{ids: cfg.Nodes, self: -1, broken: p.Broken}
	for i, id := range cfg.Nodes {
		if id == cfg.Self {
			n.self = i
		}
	}
	if n.self < 0 {
		return nil, fmt.Errorf("srpaxos: %s is not a member", cfg.Self)
	}
	return n, nil
}

type ballot struct {
	round uint32
	id    uint8
}

func (b ballot) less(o ballot) bool {
	return b.round < o.round || b.round == o.round && b.id < o.id
}

type proposal struct {
	req   automaton.RequestID
	value byte
}

// accepted is an Option<(Ballot, Proposal)>.
type accepted struct {
	ok bool
	b  ballot
	p  proposal
}

// less orders as the example's Option<(Ballot, Proposal)>: None first.
func (a accepted) less(o accepted) bool {
	if !a.ok || !o.ok {
		return !a.ok && o.ok
	}
	if a.b != o.b {
		return a.b.less(o.b)
	}
	if a.p.req != o.p.req {
		return a.p.req.Less(o.p.req)
	}
	return a.p.value < o.p.value
}

// Node is one server.
type Node struct {
	ids    []automaton.NodeID // shared, never changed
	self   int
	broken bool

	// shared state
	ballot ballot
	// leader state
	hasProposal bool
	proposal    proposal
	prepared    uint16 // who promised this term (the example's prepares' keys)
	prepares    [maxNodes]accepted
	accepts     uint16 // who accepted this term
	// acceptor state
	accepted accepted
	decided  bool
}

// Message kinds.
const (
	mPrepare byte = 1 + iota
	mPrepared
	mAccept
	mAccepted
	mDecided
)

type message struct {
	kind byte
	b    ballot
	last accepted // Prepared's last accepted; Accept's and Decided's proposal in last.p
}

func (m message) encode() []byte {
	b := make([]byte, 0, 24)
	b = append(b, m.kind)
	b = binary.AppendUvarint(b, uint64(m.b.round))
	b = append(b, m.b.id)
	switch m.kind {
	case mPrepared:
		if !m.last.ok {
			return append(b, 0)
		}
		b = append(b, 1)
		b = binary.AppendUvarint(b, uint64(m.last.b.round))
		b = append(b, m.last.b.id)
		return appendProposal(b, m.last.p)
	case mAccept, mDecided:
		return appendProposal(b, m.last.p)
	}
	return b
}

func appendProposal(b []byte, p proposal) []byte {
	b = binary.AppendUvarint(b, p.req.Client)
	b = binary.AppendUvarint(b, p.req.Seq)
	return append(b, p.value)
}

type reader struct {
	b   []byte
	bad bool
}

func (r *reader) uvarint() uint64 {
	x, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return x
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.bad = true
		return 0
	}
	x := r.b[0]
	r.b = r.b[1:]
	return x
}

func (r *reader) ballot() ballot { return ballot{uint32(r.uvarint()), r.byte()} }

func (r *reader) proposal() proposal {
	return proposal{automaton.RequestID{Client: r.uvarint(), Seq: r.uvarint()}, r.byte()}
}

func decode(data []byte) (message, bool) {
	r := &reader{b: data}
	m := message{kind: r.byte()}
	m.b = r.ballot()
	switch m.kind {
	case mPrepared:
		if r.byte() == 1 {
			m.last.ok = true
			m.last.b = r.ballot()
			m.last.p = r.proposal()
		}
	case mAccept, mDecided:
		m.last.ok = true
		m.last.p = r.proposal()
	case mPrepare, mAccepted:
	default:
		return m, false
	}
	return m, !r.bad && len(r.b) == 0
}

// Step implements automaton.Automaton: one handler per action of the
// example's on_msg, in its order.
func (n *Node) Step(in automaton.Input) []automaton.Output {
	switch in := in.(type) {
	case automaton.ClientRequest:
		req := in.Req
		if n.decided {
			if req.Op.Kind == "get" {
				return n.onGetDecided(req)
			}
			return nil
		}
		if req.Op.Kind == "set" && len(req.Op.Args) == 1 && len(req.Op.Args[0]) == 1 && !n.hasProposal {
			return n.onPut(req)
		}
	case automaton.PeerMessage:
		if n.decided {
			return nil
		}
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
		case m.kind == mPrepare && n.ballot.less(m.b):
			return n.onPrepare(from, m)
		case m.kind == mPrepared && m.b == n.ballot:
			return n.onPrepared(from, m)
		case m.kind == mAccept && !m.b.less(n.ballot):
			return n.onAccept(from, m)
		case m.kind == mAccepted && m.b == n.ballot:
			return n.onAccepted(from, m)
		case m.kind == mDecided:
			return n.onDecided(m)
		}
	}
	return nil
}

// onGetDecided: a decided server answers a get with the decided value
// (examples/paxos.rs, on_msg's first branch).
func (n *Node) onGetDecided(req automaton.Request) []automaton.Output {
	r := service.Nil()
	if v := n.accepted.p.value; n.accepted.ok && v != 0 {
		r = service.Bytes([]byte{v})
	}
	return []automaton.Output{automaton.Respond{Resp: automaton.Response{ID: req.ID, Result: r}}}
}

// onPut starts a term for the client's value: phase 1a with the
// leader's own promise counted (Paxos Made Simple §2.2; paxos.rs Put).
func (n *Node) onPut(req automaton.Request) []automaton.Output {
	n.hasProposal = true
	n.proposal = proposal{req.ID, req.Op.Args[0][0]}
	n.prepared, n.prepares, n.accepts = 0, [maxNodes]accepted{}, 0
	n.ballot = ballot{n.ballot.round + 1, uint8(n.self)}
	n.prepared |= 1 << n.self
	n.prepares[n.self] = n.accepted
	return n.broadcast(message{kind: mPrepare, b: n.ballot})
}

// onPrepare promises a higher ballot and reports the last accepted
// proposal (phase 1b).
func (n *Node) onPrepare(from int, m message) []automaton.Output {
	n.ballot = m.b
	return []automaton.Output{automaton.Send{To: n.ids[from], Msg: message{kind: mPrepared, b: m.b, last: n.accepted}.encode()}}
}

// onPrepared counts a promise; on a majority the leader proposes the
// proposal of the highest ballot among the promises, or its client's
// (phase 2a), accepting it itself.
func (n *Node) onPrepared(from int, m message) []automaton.Output {
	n.prepared |= 1 << from
	n.prepares[from] = m.last
	if count(n.prepared) != automaton.Majority(len(n.ids)) {
		return nil
	}
	var best accepted
	for i := range n.ids {
		if n.prepared&(1<<i) != 0 && best.less(n.prepares[i]) {
			best = n.prepares[i]
		}
	}
	p := n.proposal
	if best.ok && !n.broken {
		p = best.p
	}
	n.proposal = p
	n.accepted = accepted{true, m.b, p}
	n.accepts |= 1 << n.self
	return n.broadcast(message{kind: mAccept, b: m.b, last: accepted{ok: true, p: p}})
}

// onAccept accepts a ballot at least the promised one (phase 2b).
func (n *Node) onAccept(from int, m message) []automaton.Output {
	n.ballot = m.b
	n.accepted = accepted{true, m.b, m.last.p}
	return []automaton.Output{automaton.Send{To: n.ids[from], Msg: message{kind: mAccepted, b: m.b}.encode()}}
}

// onAccepted counts an acceptance; on a majority the value is chosen:
// the leader is decided, tells the others and answers the requester.
func (n *Node) onAccepted(from int, m message) []automaton.Output {
	n.accepts |= 1 << from
	if count(n.accepts) != automaton.Majority(len(n.ids)) {
		return nil
	}
	n.decided = true
	out := n.broadcast(message{kind: mDecided, b: m.b, last: accepted{ok: true, p: n.proposal}})
	return append(out, automaton.Respond{Resp: automaton.Response{ID: n.proposal.req, Result: service.OK()}})
}

// onDecided learns the chosen value.
func (n *Node) onDecided(m message) []automaton.Output {
	n.ballot = m.b
	n.accepted = accepted{true, m.b, m.last.p}
	n.decided = true
	return nil
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
// constant membership.
func (n *Node) AppendModelState(b []byte, rename func(automaton.RequestID) automaton.RequestID) []byte {
	b = appendBallot(b, n.ballot)
	b = automaton.AppendModelBool(b, n.hasProposal)
	b = appendProp(b, n.proposal, rename)
	b = append(b, byte(n.prepared), byte(n.prepared>>8))
	for i := range n.ids {
		if n.prepared&(1<<i) != 0 {
			b = appendAccepted(b, n.prepares[i], rename)
		}
	}
	b = append(b, byte(n.accepts), byte(n.accepts>>8))
	b = appendAccepted(b, n.accepted, rename)
	return automaton.AppendModelBool(b, n.decided)
}

func appendBallot(b []byte, x ballot) []byte {
	return append(binary.LittleEndian.AppendUint32(b, x.round), x.id)
}

func appendProp(b []byte, p proposal, rename func(automaton.RequestID) automaton.RequestID) []byte {
	return append(automaton.AppendModelID(b, p.req, rename), p.value)
}

func appendAccepted(b []byte, a accepted, rename func(automaton.RequestID) automaton.RequestID) []byte {
	if !a.ok {
		return append(b, 0)
	}
	return appendProp(appendBallot(append(b, 1), a.b), a.p, rename)
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
	bal := fmt.Sprintf("(%d, n%d)", m.b.round, m.b.id+1)
	prop := func(p proposal) string { return fmt.Sprintf("(%x/%d, %q)", p.req.Client, p.req.Seq, p.value) }
	switch m.kind {
	case mPrepare:
		return "Prepare " + bal
	case mPrepared:
		if !m.last.ok {
			return "Prepared " + bal + " last None"
		}
		return fmt.Sprintf("Prepared %s last (%d, n%d) %s", bal, m.last.b.round, m.last.b.id+1, prop(m.last.p))
	case mAccept:
		return "Accept " + bal + " " + prop(m.last.p)
	case mAccepted:
		return "Accepted " + bal
	default:
		return "Decided " + bal + " " + prop(m.last.p)
	}
}
