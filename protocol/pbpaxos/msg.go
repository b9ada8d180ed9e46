package pbpaxos

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Ballot is a leader's round: proto.Ballot, ordered by round then by the
// proposer's number (its position in Config.Nodes plus one).
type Ballot = proto.Ballot

// pn is a proposal number (the Grid Services thesis VI.A.2): the ballot and the instance
// of an accept request, ordered lexicographically, ballot first.
type pn struct {
	Bal Ballot
	I   uint64
}

func (p pn) less(q pn) bool {
	if p.Bal != q.Bal {
		return p.Bal.Less(q.Bal)
	}
	return p.I < q.I
}

func (p pn) String() string { return fmt.Sprintf("<%s,%d>", p.Bal, p.I) }

const maxBallotNode = 1 << 16

func encodeBallot(e *wire.Encoder, b Ballot) { b.Encode(e) }
func decodeBallot(d *wire.Decoder) Ballot    { return proto.DecodeBallot(d, maxBallotNode) }

// Message kinds.
const (
	msgVersion = 1

	kindPrepare      = 1  // phase 1a: ballot, the gaps, and everything after After
	kindPromise      = 2  // phase 1b: OK, or (request, pn) per gap, or (requests, pns, latest state)
	kindAccept       = 3  // phase 2a: ballot, commit index, entries
	kindAccepted     = 4  // phase 2b, or a rejection with the promised ballot
	kindHeartbeat    = 5  // leader liveness and commit notice
	kindHeartbeatAck = 6  // answer, or a rejection with the promised ballot
	kindCatchupReq   = 7  // a lagging replica asks for the applied state
	kindSnapshot     = 8  // the sender's applied state
	kindForward      = 9  // a request from the node a client reached, to the leader
	kindForwardReply = 10 // the leader's answer to it
	kindRead         = 11 // X-Paxos: a read relayed to every replica
	kindConfirm      = 12 // X-Paxos: a replica confirms a read to its highest accepted ballot
	kindReadReply    = 13 // X-Paxos: the leader's answer to a relayed read
)

var header = proto.Header{Protocol: "pbpaxos", Version: msgVersion, Kinds: []string{
	"prepare", "promise", "accept", "accepted", "heartbeat", "heartbeat-ack",
	"catchup-req", "snapshot", "forward", "forward-reply", "read", "confirm", "read-reply"}}

// Update kinds: how an instance's value carries the leader's state.
const (
	// updCovered: no state; a later entry of the same accept batch carries
	// it (takeover, the Grid Services thesis VI.A.2: the batch holds one latest state).
	updCovered = 0
	// updReplay: the requests with their environments; every replica
	// executes them (state-size option 1, "the request and some
	// additional information").
	updReplay = 1
	// updDelta: the service's changes since the previous instance
	// (option 2, "only the updated state") and the requests' results.
	updDelta = 2
	// updFull: the whole replicated state (service and duplicate table).
	updFull = 3
)

var updNames = []string{"covered", "replay", "delta", "full"}

// entry is one instance in a message. In Accept: I, Cmds, Kind, Upd. In
// Promise: I, Bal (the pn's ballot) and Cmds (Known false: the acceptor
// lost the requests to a snapshot and reports the pn only).
type entry struct {
	I     uint64
	Bal   Ballot
	Known bool
	Cmds  []byte
	Kind  byte
	Upd   []byte
}

// message is the union of the messages; Kind says which fields count.
type message struct {
	Kind     byte
	Ballot   Ballot
	OK       bool
	Promised Ballot
	After    uint64   // Prepare: the candidate's applied instance
	Gaps     []uint64 // Prepare: instances <= After whose requests the candidate lacks
	Commit   uint64   // applied (chosen) prefix of the sender
	Entries  []entry
	StatePN  pn     // Promise: the latest state's proposal number
	State    []byte // Promise, Snapshot: a machine snapshot
	Acks     []uint64
	Req      automaton.Request
	Origin   automaton.NodeID // Read: the node answering the client
	ID       automaton.RequestID
	Result   service.Result
	Results  []service.Result
}

const (
	maxEntries = 1 << 20
	maxOps     = 1 << 20
)

func (m *message) marshal() []byte {
	size := 32 + len(m.State)
	for _, en := range m.Entries {
		size += 24 + len(en.Cmds) + len(en.Upd)
	}
	e := header.Message(m.Kind, size)
	switch m.Kind {
	case kindPrepare:
		encodeBallot(&e, m.Ballot)
		e.Uvarint(m.After)
		e.Uvarint(uint64(len(m.Gaps)))
		for _, g := range m.Gaps {
			e.Uvarint(g)
		}
	case kindPromise:
		encodeBallot(&e, m.Ballot)
		e.Bool(m.OK)
		encodeBallot(&e, m.Promised)
		e.Uvarint(m.Commit)
		e.Uvarint(uint64(len(m.Entries)))
		for _, en := range m.Entries {
			e.Uvarint(en.I)
			encodeBallot(&e, en.Bal)
			e.Bool(en.Known)
			e.Bytes(en.Cmds)
		}
		encodeBallot(&e, m.StatePN.Bal)
		e.Uvarint(m.StatePN.I)
		e.Bytes(m.State)
	case kindAccept:
		encodeBallot(&e, m.Ballot)
		e.Uvarint(m.Commit)
		e.Uvarint(uint64(len(m.Entries)))
		for _, en := range m.Entries {
			e.Uvarint(en.I)
			e.Bytes(en.Cmds)
			e.Byte(en.Kind)
			e.Bytes(en.Upd)
		}
	case kindAccepted:
		encodeBallot(&e, m.Ballot)
		e.Bool(m.OK)
		encodeBallot(&e, m.Promised)
		e.Uvarint(m.Commit)
		e.Uvarint(uint64(len(m.Acks)))
		for _, a := range m.Acks {
			e.Uvarint(a)
		}
	case kindHeartbeat:
		encodeBallot(&e, m.Ballot)
		e.Uvarint(m.Commit)
	case kindHeartbeatAck:
		encodeBallot(&e, m.Ballot)
		e.Bool(m.OK)
		encodeBallot(&e, m.Promised)
		e.Uvarint(m.Commit)
	case kindCatchupReq:
		e.Uvarint(m.Commit)
	case kindSnapshot:
		e.Uvarint(m.Commit)
		encodeBallot(&e, m.StatePN.Bal)
		e.Uvarint(m.StatePN.I)
		e.Bytes(m.State)
	case kindForward:
		encodeRequest(&e, m.Req)
	case kindRead:
		encodeRequest(&e, m.Req)
		e.String(string(m.Origin))
	case kindForwardReply, kindReadReply:
		encodeID(&e, m.ID)
		service.EncodeResult(&e, m.Result)
		e.Uvarint(uint64(len(m.Results)))
		for _, r := range m.Results {
			service.EncodeResult(&e, r)
		}
	case kindConfirm:
		encodeID(&e, m.ID)
		encodeBallot(&e, m.Ballot)
	}
	return e.B
}

func unmarshal(b []byte) (*message, error) {
	d, k, err := header.OpenMessage(b)
	if err != nil {
		return nil, err
	}
	m := &message{Kind: k}
	switch k {
	case kindPrepare:
		m.Ballot = decodeBallot(d)
		m.After = d.Uvarint()
		n := d.Count(maxEntries, 1)
		for i := 0; i < n && d.Err() == nil; i++ {
			m.Gaps = append(m.Gaps, d.Uvarint())
		}
	case kindPromise:
		m.Ballot = decodeBallot(d)
		m.OK = d.Bool()
		m.Promised = decodeBallot(d)
		m.Commit = d.Uvarint()
		n := d.Count(maxEntries, 4)
		for i := 0; i < n && d.Err() == nil; i++ {
			m.Entries = append(m.Entries, entry{I: d.Uvarint(), Bal: decodeBallot(d), Known: d.Bool(), Cmds: d.BytesCopy()})
		}
		m.StatePN = pn{Bal: decodeBallot(d), I: d.Uvarint()}
		m.State = d.BytesCopy()
	case kindAccept:
		m.Ballot = decodeBallot(d)
		m.Commit = d.Uvarint()
		n := d.Count(maxEntries, 4)
		for i := 0; i < n && d.Err() == nil; i++ {
			en := entry{I: d.Uvarint(), Cmds: d.BytesCopy(), Kind: d.Byte(), Upd: d.BytesCopy()}
			if en.Kind > updFull {
				d.Fail(fmt.Errorf("pbpaxos: bad update kind %d", en.Kind))
			}
			m.Entries = append(m.Entries, en)
		}
	case kindAccepted:
		m.Ballot = decodeBallot(d)
		m.OK = d.Bool()
		m.Promised = decodeBallot(d)
		m.Commit = d.Uvarint()
		n := d.Count(maxEntries, 1)
		for i := 0; i < n && d.Err() == nil; i++ {
			m.Acks = append(m.Acks, d.Uvarint())
		}
	case kindHeartbeat:
		m.Ballot = decodeBallot(d)
		m.Commit = d.Uvarint()
	case kindHeartbeatAck:
		m.Ballot = decodeBallot(d)
		m.OK = d.Bool()
		m.Promised = decodeBallot(d)
		m.Commit = d.Uvarint()
	case kindCatchupReq:
		m.Commit = d.Uvarint()
	case kindSnapshot:
		m.Commit = d.Uvarint()
		m.StatePN = pn{Bal: decodeBallot(d), I: d.Uvarint()}
		m.State = d.BytesCopy()
	case kindForward:
		m.Req = decodeRequest(d)
	case kindRead:
		m.Req = decodeRequest(d)
		m.Origin = automaton.NodeID(d.String())
	case kindForwardReply, kindReadReply:
		m.ID = decodeID(d)
		m.Result = service.DecodeResult(d)
		n := d.Count(maxOps, 1)
		for i := 0; i < n && d.Err() == nil; i++ {
			m.Results = append(m.Results, service.DecodeResult(d))
		}
	case kindConfirm:
		m.ID = decodeID(d)
		m.Ballot = decodeBallot(d)
	}
	if err := d.Done(); err != nil {
		return nil, fmt.Errorf("pbpaxos: %s: %w", header.KindName(k), err)
	}
	return m, nil
}

func encodeID(e *wire.Encoder, id automaton.RequestID) {
	e.Uvarint(id.Client)
	e.Uvarint(id.Seq)
}

func decodeID(d *wire.Decoder) automaton.RequestID {
	return automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}
}

// Request flags in a forwarded or relayed request.
const (
	reqGroup = 1 << 0
	reqTxn   = 1 << 1
	reqEnv   = 1 << 2
	// reqNested marks a nested request (Request.Nested, nested.go).
	reqNested = 1 << 3
)

func encodeRequest(e *wire.Encoder, r automaton.Request) {
	encodeID(e, r.ID)
	var fl byte
	if len(r.Ops) > 0 {
		fl |= reqGroup
	}
	if r.Txn != nil {
		fl |= reqTxn
	}
	if r.Env != (service.Env{}) {
		fl |= reqEnv
	}
	if r.Nested {
		fl |= reqNested
	}
	e.Byte(fl)
	e.Byte(byte(r.Opts.Read))
	if fl&reqGroup != 0 {
		e.Uvarint(uint64(len(r.Ops)))
		for _, op := range r.Ops {
			service.EncodeOp(e, op)
		}
	} else {
		service.EncodeOp(e, r.Op)
	}
	if fl&reqTxn != 0 {
		encodeID(e, r.Txn.Txn)
		e.Byte(byte(r.Txn.Action))
	}
	if fl&reqEnv != 0 {
		service.EncodeEnv(e, r.Env)
	}
}

func decodeRequest(d *wire.Decoder) automaton.Request {
	r := automaton.Request{ID: decodeID(d)}
	fl := d.Byte()
	r.Opts.Read = automaton.ReadMode(d.Byte())
	if fl&reqGroup != 0 {
		n := d.Count(maxOps, 3)
		for i := 0; i < n && d.Err() == nil; i++ {
			r.Ops = append(r.Ops, service.DecodeOp(d))
		}
	} else {
		r.Op = service.DecodeOp(d)
	}
	if fl&reqTxn != 0 {
		r.Txn = &automaton.TxnStep{Txn: decodeID(d), Action: automaton.TxnAction(d.Byte())}
	}
	if fl&reqEnv != 0 {
		r.Env = service.DecodeEnv(d)
	}
	r.Nested = fl&reqNested != 0
	return r
}

// Commands: the requests of one instance (the Grid Services thesis VI.A.2: the req of
// <req, state>), each with the results the leader's execution gave, so
// that every replica's duplicate table answers a retry alike.
const (
	cmdOp    = 1 // a single operation
	cmdGroup = 2 // an atomic group
	cmdTxn   = 3 // a T-Paxos commit: the transaction's writes, each with its Env
	cmdNoop  = 4 // a new leader's no-op
	cmdRead  = 5 // a read ordered through the log (read mode "log")
)

type cmd struct {
	Kind    byte
	ID      automaton.RequestID
	Op      service.Op
	Ops     []service.Op
	Envs    []service.Env // cmdOp, cmdGroup: one; cmdTxn: one per operation
	Result  service.Result
	Results []service.Result
}

// writes reports whether the command changes the state (and so enters the
// duplicate table).
func (c cmd) writes() bool { return c.Kind == cmdOp || c.Kind == cmdGroup || c.Kind == cmdTxn }

const cmdsVersion = 1

func encodeCmds(cs []cmd) []byte {
	e := wire.Encoder{B: []byte{cmdsVersion}}
	e.Uvarint(uint64(len(cs)))
	for _, c := range cs {
		e.Byte(c.Kind)
		encodeID(&e, c.ID)
		switch c.Kind {
		case cmdOp, cmdRead:
			service.EncodeOp(&e, c.Op)
		case cmdGroup, cmdTxn:
			e.Uvarint(uint64(len(c.Ops)))
			for _, op := range c.Ops {
				service.EncodeOp(&e, op)
			}
		}
		e.Uvarint(uint64(len(c.Envs)))
		for _, v := range c.Envs {
			service.EncodeEnv(&e, v)
		}
		service.EncodeResult(&e, c.Result)
		e.Uvarint(uint64(len(c.Results)))
		for _, r := range c.Results {
			service.EncodeResult(&e, r)
		}
	}
	return e.B
}

func decodeCmds(b []byte) ([]cmd, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != cmdsVersion && d.Err() == nil {
		return nil, fmt.Errorf("pbpaxos: commands version %d", v)
	}
	n := d.Count(maxEntries, 3)
	out := make([]cmd, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		c := cmd{Kind: d.Byte(), ID: decodeID(d)}
		switch c.Kind {
		case cmdOp, cmdRead:
			c.Op = service.DecodeOp(d)
		case cmdGroup, cmdTxn:
			k := d.Count(maxOps, 3)
			for j := 0; j < k && d.Err() == nil; j++ {
				c.Ops = append(c.Ops, service.DecodeOp(d))
			}
		case cmdNoop:
		default:
			d.Fail(fmt.Errorf("bad command kind %d", c.Kind))
		}
		k := d.Count(maxOps, 2)
		for j := 0; j < k && d.Err() == nil; j++ {
			c.Envs = append(c.Envs, service.DecodeEnv(d))
		}
		c.Result = service.DecodeResult(d)
		k = d.Count(maxOps, 1)
		for j := 0; j < k && d.Err() == nil; j++ {
			c.Results = append(c.Results, service.DecodeResult(d))
		}
		out = append(out, c)
	}
	return out, d.Done()
}

// Durable records.
const (
	recPromised = "p"    // the promised ballot
	recCommit   = "c"    // the applied prefix, for restarts
	recSnapshot = "snap" // a machine snapshot with its instance and pn
	recSlotPfx  = "s/"   // s/<instance, 16 hex digits>: an accepted entry
)

func slotKey(i uint64) string { return fmt.Sprintf("%s%016x", recSlotPfx, i) }

func encodeBallotRec(b Ballot) []byte {
	e := header.Record(16)
	encodeBallot(&e, b)
	return e.B
}

func decodeBallotRec(b []byte) (Ballot, error) {
	d, err := header.OpenRecord(b, "promise")
	if err != nil {
		return Ballot{}, err
	}
	bal := decodeBallot(d)
	return bal, d.Done()
}

func encodeUintRec(v uint64) []byte {
	e := header.Record(10)
	e.Uvarint(v)
	return e.B
}

func decodeUintRec(b []byte) (uint64, error) {
	d, err := header.OpenRecord(b, "commit")
	if err != nil {
		return 0, err
	}
	v := d.Uvarint()
	return v, d.Done()
}

// encodeSlotRec: ballot, whether the requests are known, requests, update kind, update.
func encodeSlotRec(s *slot) []byte {
	e := header.Record(32 + len(s.cmds) + len(s.upd))
	encodeBallot(&e, s.bal)
	e.Bool(s.known)
	e.Bytes(s.cmds)
	e.Byte(s.kind)
	e.Bytes(s.upd)
	return e.B
}

func decodeSlotRec(b []byte) (*slot, error) {
	d, err := header.OpenRecord(b, "slot")
	if err != nil {
		return nil, err
	}
	s := &slot{bal: decodeBallot(d), known: d.Bool(), cmds: d.BytesCopy(), kind: d.Byte(), upd: d.BytesCopy()}
	return s, d.Done()
}

func encodeSnapRec(i uint64, p pn, state []byte) []byte {
	e := header.Record(32 + len(state))
	e.Uvarint(i)
	encodeBallot(&e, p.Bal)
	e.Uvarint(p.I)
	e.Bytes(state)
	return e.B
}

func decodeSnapRec(b []byte) (uint64, pn, []byte, error) {
	d, err := header.OpenRecord(b, "snapshot")
	if err != nil {
		return 0, pn{}, nil, err
	}
	i := d.Uvarint()
	p := pn{Bal: decodeBallot(d), I: d.Uvarint()}
	st := d.BytesCopy()
	return i, p, st, d.Done()
}
