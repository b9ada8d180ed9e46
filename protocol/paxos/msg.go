package paxos

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Ballot is a proposal round: ordered by Round, then by Node (the proposer's
// index in the configuration plus one, so that the zero Ballot is below every
// real one and two nodes never share a ballot).
type Ballot struct {
	Round uint64
	Node  uint32
}

// Less reports whether b orders before c.
func (b Ballot) Less(c Ballot) bool {
	if b.Round != c.Round {
		return b.Round < c.Round
	}
	return b.Node < c.Node
}

func (b Ballot) String() string { return fmt.Sprintf("(%d,%d)", b.Round, b.Node) }

func encodeBallot(e *wire.Encoder, b Ballot) {
	e.Uvarint(b.Round)
	e.Uvarint(uint64(b.Node))
}

func decodeBallot(d *wire.Decoder) Ballot {
	r := d.Uvarint()
	n := d.Uvarint()
	if n > 1<<16 {
		d.Fail(fmt.Errorf("paxos: ballot node %d out of range", n))
	}
	return Ballot{Round: r, Node: uint32(n)}
}

// Message kinds.
const (
	msgVersion = 1

	kindPrepare      = 1 // phase 1a: ballot, first instance
	kindPromise      = 2 // phase 1b (OK) or a rejection carrying the promised ballot
	kindAccept       = 3 // phase 2a: ballot, commit index, entries
	kindAccepted     = 4 // phase 2b (OK) or a rejection
	kindHeartbeat    = 5 // leader liveness, commit notice, lease/confirm round
	kindHeartbeatAck = 6
	kindCatchupReq   = 7 // range [From, To] of chosen instances
	kindCatchup      = 8 // chosen entries
	kindSnapshot     = 9 // a service snapshot at Index
	kindForward      = 10
	kindForwardReply = 11
	kindTakeOver     = 12 // a removed leader's hand-off: its ballot, commit index; OK: start phase 1 now
)

// entry is one log instance in a message. In Promise it carries the
// acceptor's accepted ballot (and whether it knows the instance chosen); in
// Accept and Catchup only I and Value are used.
type entry struct {
	I      uint64
	Ballot Ballot
	Chosen bool
	Value  []byte
}

// message is the union of the protocol's messages; Kind says which fields count.
type message struct {
	Kind     byte
	Ballot   Ballot // sender's ballot (Prepare, Accept, Heartbeat) or the one answered
	OK       bool
	Promised Ballot // a rejection's promised ballot
	From     uint64 // Prepare: first instance; CatchupReq: first wanted
	To       uint64 // CatchupReq: last wanted
	Commit   uint64 // sender's contiguous chosen prefix
	Round    uint64 // heartbeat round
	Entries  []entry
	Acks     []uint64 // Accepted: instances accepted
	Index    uint64   // Snapshot
	Data     []byte   // Snapshot
	Req      automaton.Request
	Result   service.Result
}

const maxEntries = 1 << 20

func (m *message) marshal() []byte {
	size := 32
	for _, en := range m.Entries {
		size += 24 + len(en.Value)
	}
	e := wire.Encoder{B: make([]byte, 0, size+len(m.Data))}
	e.Byte(msgVersion)
	e.Byte(m.Kind)
	switch m.Kind {
	case kindPrepare:
		encodeBallot(&e, m.Ballot)
		e.Uvarint(m.From)
	case kindPromise:
		encodeBallot(&e, m.Ballot)
		e.Bool(m.OK)
		encodeBallot(&e, m.Promised)
		e.Uvarint(m.Commit)
		e.Uvarint(uint64(len(m.Entries)))
		for _, en := range m.Entries {
			e.Uvarint(en.I)
			encodeBallot(&e, en.Ballot)
			e.Bool(en.Chosen)
			e.Bytes(en.Value)
		}
	case kindAccept, kindCatchup:
		encodeBallot(&e, m.Ballot)
		e.Uvarint(m.Commit)
		e.Uvarint(uint64(len(m.Entries)))
		for _, en := range m.Entries {
			e.Uvarint(en.I)
			e.Bytes(en.Value)
		}
	case kindAccepted:
		encodeBallot(&e, m.Ballot)
		e.Bool(m.OK)
		encodeBallot(&e, m.Promised)
		e.Uvarint(uint64(len(m.Acks)))
		for _, a := range m.Acks {
			e.Uvarint(a)
		}
	case kindHeartbeat:
		encodeBallot(&e, m.Ballot)
		e.Uvarint(m.Commit)
		e.Uvarint(m.Round)
	case kindTakeOver:
		encodeBallot(&e, m.Ballot)
		e.Bool(m.OK)
		e.Uvarint(m.Commit)
	case kindHeartbeatAck:
		encodeBallot(&e, m.Ballot)
		e.Bool(m.OK)
		encodeBallot(&e, m.Promised)
		e.Uvarint(m.Round)
		e.Uvarint(m.Commit)
	case kindCatchupReq:
		e.Uvarint(m.From)
		e.Uvarint(m.To)
	case kindSnapshot:
		e.Uvarint(m.Index)
		e.Bytes(m.Data)
	case kindForward:
		e.Uvarint(m.Req.ID.Client)
		e.Uvarint(m.Req.ID.Seq)
		e.Byte(byte(m.Req.Opts.Read))
		service.EncodeOp(&e, m.Req.Op)
	case kindForwardReply:
		e.Uvarint(m.Req.ID.Client)
		e.Uvarint(m.Req.ID.Seq)
		service.EncodeResult(&e, m.Result)
	}
	return e.B
}

func unmarshal(b []byte) (*message, error) {
	d := wire.NewDecoder(b)
	m := &message{}
	if v := d.Byte(); v != msgVersion {
		if d.Err() != nil {
			return nil, d.Err()
		}
		return nil, fmt.Errorf("paxos: message version %d, want %d", v, msgVersion)
	}
	m.Kind = d.Byte()
	switch m.Kind {
	case kindPrepare:
		m.Ballot = decodeBallot(d)
		m.From = d.Uvarint()
	case kindPromise:
		m.Ballot = decodeBallot(d)
		m.OK = d.Bool()
		m.Promised = decodeBallot(d)
		m.Commit = d.Uvarint()
		n := d.Count(maxEntries, 4)
		for i := 0; i < n && d.Err() == nil; i++ {
			m.Entries = append(m.Entries, entry{I: d.Uvarint(), Ballot: decodeBallot(d), Chosen: d.Bool(), Value: d.BytesCopy()})
		}
	case kindAccept, kindCatchup:
		m.Ballot = decodeBallot(d)
		m.Commit = d.Uvarint()
		n := d.Count(maxEntries, 2)
		for i := 0; i < n && d.Err() == nil; i++ {
			m.Entries = append(m.Entries, entry{I: d.Uvarint(), Value: d.BytesCopy()})
		}
	case kindAccepted:
		m.Ballot = decodeBallot(d)
		m.OK = d.Bool()
		m.Promised = decodeBallot(d)
		n := d.Count(maxEntries, 1)
		for i := 0; i < n && d.Err() == nil; i++ {
			m.Acks = append(m.Acks, d.Uvarint())
		}
	case kindHeartbeat:
		m.Ballot = decodeBallot(d)
		m.Commit = d.Uvarint()
		m.Round = d.Uvarint()
	case kindTakeOver:
		m.Ballot = decodeBallot(d)
		m.OK = d.Bool()
		m.Commit = d.Uvarint()
	case kindHeartbeatAck:
		m.Ballot = decodeBallot(d)
		m.OK = d.Bool()
		m.Promised = decodeBallot(d)
		m.Round = d.Uvarint()
		m.Commit = d.Uvarint()
	case kindCatchupReq:
		m.From = d.Uvarint()
		m.To = d.Uvarint()
	case kindSnapshot:
		m.Index = d.Uvarint()
		m.Data = d.BytesCopy()
	case kindForward:
		m.Req.ID.Client = d.Uvarint()
		m.Req.ID.Seq = d.Uvarint()
		m.Req.Opts.Read = automaton.ReadMode(d.Byte())
		m.Req.Op = service.DecodeOp(d)
	case kindForwardReply:
		m.Req.ID.Client = d.Uvarint()
		m.Req.ID.Seq = d.Uvarint()
		m.Result = service.DecodeResult(d)
	default:
		d.Fail(fmt.Errorf("paxos: unknown message kind %d", m.Kind))
	}
	if err := d.Done(); err != nil {
		return nil, err
	}
	return m, nil
}

// cmd is one client command inside a log value.
type cmd struct {
	ID automaton.RequestID
	Op service.Op
}

// A log value is a batch of commands; the empty batch is the no-op that fills
// gaps after a leader change.
func encodeBatch(cmds []cmd) []byte {
	e := wire.Encoder{B: make([]byte, 0, 16+32*len(cmds))}
	e.Byte(msgVersion)
	e.Uvarint(uint64(len(cmds)))
	for _, c := range cmds {
		e.Uvarint(c.ID.Client)
		e.Uvarint(c.ID.Seq)
		service.EncodeOp(&e, c.Op)
	}
	return e.B
}

var noop = encodeBatch(nil)

func decodeBatch(b []byte) ([]cmd, error) {
	d := wire.NewDecoder(b)
	if isChangeValue(b) {
		d.Byte()
		c := cmd{ID: automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}}
		c.Op = service.DecodeOp(d)
		if d.Err() == nil && !automaton.IsMemberOp(c.Op) {
			d.Fail(fmt.Errorf("paxos: change value holds a %q operation", c.Op.Kind))
		}
		return []cmd{c}, d.Done()
	}
	if v := d.Byte(); v != msgVersion {
		return nil, fmt.Errorf("paxos: batch version %d", v)
	}
	n := d.Count(maxEntries, 5)
	out := make([]cmd, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		c := cmd{ID: automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}}
		c.Op = service.DecodeOp(d)
		out = append(out, c)
	}
	return out, d.Done()
}

// Persisted records.
//
//	"p"            promised ballot
//	"c"            contiguous chosen prefix: every slot record up to it holds the chosen value
//	"s"            snapshot: instance index, service snapshot, dedup table
//	"a/%016x"      slot: accepted ballot, chosen flag, value
const (
	recPromised = "p"
	recCommit   = "c"
	recSnapshot = "s"
	recSlotPfx  = "a/"
)

func slotKey(i uint64) string { return fmt.Sprintf("%s%016x", recSlotPfx, i) }

func encodeSlot(s *slot) []byte {
	e := wire.Encoder{B: make([]byte, 0, 16+len(s.val))}
	e.Byte(msgVersion)
	encodeBallot(&e, s.bal)
	e.Bool(s.chosen)
	e.Bytes(s.val)
	return e.B
}

func decodeSlot(b []byte) (*slot, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != msgVersion {
		return nil, fmt.Errorf("paxos: slot record version %d", v)
	}
	s := &slot{bal: decodeBallot(d), chosen: d.Bool(), val: d.BytesCopy()}
	return s, d.Done()
}

func encodeBallotRec(b Ballot) []byte {
	e := wire.Encoder{}
	e.Byte(msgVersion)
	encodeBallot(&e, b)
	return e.B
}

func encodeUint(v uint64) []byte {
	e := wire.Encoder{}
	e.Byte(msgVersion)
	e.Uvarint(v)
	return e.B
}

func decodeUint(b []byte) (uint64, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != msgVersion {
		return 0, fmt.Errorf("paxos: record version %d", v)
	}
	x := d.Uvarint()
	return x, d.Done()
}

func unmarshalBallotRec(b []byte) (Ballot, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != msgVersion {
		return Ballot{}, fmt.Errorf("paxos: record version %d", v)
	}
	bl := decodeBallot(d)
	return bl, d.Done()
}

// snapshotIndex reads the instance index of a snapshot without restoring it.
func snapshotIndex(b []byte) (uint64, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != msgVersion {
		return 0, fmt.Errorf("paxos: snapshot version %d", v)
	}
	i := d.Uvarint()
	return i, d.Err()
}
