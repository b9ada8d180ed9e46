package paxos

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Ballot is a proposal round (proto.Ballot, shared with the blocking
// protocol): ordered by Round, then by Node (the proposer's number in the
// configuration, from 1, so that the zero Ballot is below every real one
// and two nodes never share a ballot).
type Ballot = proto.Ballot

// maxBallotNode bounds a decoded ballot's node number.
const maxBallotNode = 1 << 16

func encodeBallot(e *wire.Encoder, b Ballot) { b.Encode(e) }
func decodeBallot(d *wire.Decoder) Ballot    { return proto.DecodeBallot(d, maxBallotNode) }

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
	kindTimeoutNow   = 13 // a leadership transfer's hand-off (transfer.go): ballot, commit index; OK: the target
)

// header is the messages' and simple records' header (log values and
// snapshots carry their own versions: encodeBatch, machine.snapshot).
var header = proto.Header{Protocol: "paxos", Version: msgVersion, Kinds: []string{
	"prepare", "promise", "accept", "accepted", "heartbeat", "heartbeat-ack",
	"catchup-req", "catchup", "snapshot", "forward", "forward-reply", "take-over", "timeout-now"}}

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
	Results  []service.Result // ForwardReply: an atomic group's results
}

const (
	maxEntries  = 1 << 20
	maxGroupOps = 1 << 20
)

// Forward trailer flags.
const (
	fwdEnv   = 1 << 0
	fwdGroup = 1 << 1
	// fwdNested marks a nested request (automaton.Request.Nested, seed
	// 003 §3): the leader orders and caches it even when it only reads.
	fwdNested = 1 << 2
	// fwdLow carries automaton.Request.Unanswered, as Seq minus it.
	fwdLow = 1 << 3
)

func (m *message) marshal() []byte {
	size := 32
	for _, en := range m.Entries {
		size += 24 + len(en.Value)
	}
	e := header.Message(m.Kind, size+len(m.Data))
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
	case kindTakeOver, kindTimeoutNow:
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
		// A trailer only when there is something to carry, so that a
		// single deterministic request is encoded as before groups and
		// environments existed: flags, the Env, the group's operations.
		var flags uint64
		if m.Req.Env != (service.Env{}) {
			flags |= fwdEnv
		}
		if len(m.Req.Ops) > 0 {
			flags |= fwdGroup
		}
		if m.Req.Nested {
			flags |= fwdNested
		}
		if m.Req.Unanswered > 0 {
			flags |= fwdLow
		}
		if flags != 0 {
			e.Uvarint(flags)
			if flags&fwdLow != 0 {
				e.Uvarint(m.Req.ID.Seq - min(m.Req.Unanswered, m.Req.ID.Seq))
			}
			if flags&fwdEnv != 0 {
				service.EncodeEnv(&e, m.Req.Env)
			}
			if flags&fwdGroup != 0 {
				e.Uvarint(uint64(len(m.Req.Ops)))
				for _, op := range m.Req.Ops {
					service.EncodeOp(&e, op)
				}
			}
		}
	case kindForwardReply:
		e.Uvarint(m.Req.ID.Client)
		e.Uvarint(m.Req.ID.Seq)
		service.EncodeResult(&e, m.Result)
		if m.Results != nil { // a group's results, as a trailer
			e.Uvarint(uint64(len(m.Results)))
			for _, r := range m.Results {
				service.EncodeResult(&e, r)
			}
		}
	}
	return e.B
}

func unmarshal(b []byte) (*message, error) {
	kind, err := header.MessageKind(b)
	if err != nil {
		return nil, err
	}
	d := &wire.Decoder{B: b[2:]} // on the stack (MessageKind: the body is b[2:])
	m := &message{Kind: kind}
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
	case kindTakeOver, kindTimeoutNow:
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
		if d.Err() == nil && len(d.B) > 0 {
			flags := d.Uvarint()
			if flags&^(fwdEnv|fwdGroup|fwdNested|fwdLow) != 0 {
				d.Fail(fmt.Errorf("paxos: forward flags %x", flags))
			}
			m.Req.Nested = flags&fwdNested != 0
			if flags&fwdLow != 0 {
				m.Req.Unanswered = m.Req.ID.Seq - min(d.Uvarint(), m.Req.ID.Seq)
			}
			if flags&fwdEnv != 0 {
				m.Req.Env = service.DecodeEnv(d)
			}
			if flags&fwdGroup != 0 {
				n := d.Count(maxGroupOps, 2)
				if n == 0 && d.Err() == nil {
					d.Fail(fmt.Errorf("paxos: forward: empty group"))
				}
				for i := 0; i < n && d.Err() == nil; i++ {
					m.Req.Ops = append(m.Req.Ops, service.DecodeOp(d))
				}
			}
		}
	case kindForwardReply:
		m.Req.ID.Client = d.Uvarint()
		m.Req.ID.Seq = d.Uvarint()
		m.Result = service.DecodeResult(d)
		if d.Err() == nil && len(d.B) > 0 {
			n := d.Count(maxGroupOps, 1)
			m.Results = make([]service.Result, 0, n)
			for i := 0; i < n && d.Err() == nil; i++ {
				m.Results = append(m.Results, service.DecodeResult(d))
			}
		}
	}
	if err := d.Done(); err != nil {
		return nil, err
	}
	return m, nil
}

// cmd is one client command inside a log value: a single operation, or an
// atomic group (Ops, one command in one instance, never split), with the
// environment the leader put beside it (nondeterministic services only;
// zero otherwise).
type cmd struct {
	ID  automaton.RequestID
	Op  service.Op
	Ops []service.Op
	Env service.Env
	// part of parts: paxos-broken-splitgroup orders the operations of a
	// group as separate commands; Op is then the part-th operation.
	part, parts int
	// nested: a nested request (automaton.Request.Nested): its outcome is
	// recorded in the deduplication table even when it only reads.
	nested bool
	// low: the client's lowest unanswered sequence number
	// (automaton.Request.Unanswered, at most ID.Seq; 0: not told).
	low uint64
}

// Batch versions. Version 1 is the batch of plain commands (client, seq,
// operation); version 3 (2 marks a membership change) adds per command a
// flags field, the environment, a group's operations. A batch with no
// environment and no group is written as version 1, byte for byte as
// before, so deterministic services without groups log exactly what the
// previous release logged.
const batchVersion3 = 3

// Command flags of a version 3 batch.
const (
	cmdEnv    = 1 << 0
	cmdGroup  = 1 << 1
	cmdPart   = 1 << 2
	cmdNested = 1 << 3
	cmdLow    = 1 << 4 // low, encoded as ID.Seq minus it
)

// A log value is a batch of commands; the empty batch is the no-op that fills
// gaps after a leader change.
func encodeBatch(cmds []cmd) []byte {
	e := wire.Encoder{B: make([]byte, 0, batchBound(cmds))}
	appendBatch(&e, cmds)
	return e.B
}

// batchBound bounds encodeBatch(cmds)'s length from above, so that its
// buffer is allocated once.
func batchBound(cmds []cmd) int {
	size := 16
	for _, c := range cmds {
		size += 48 + opSize(c.Op)
		for _, op := range c.Ops {
			size += opSize(op)
		}
	}
	return size
}

// appendBatch appends encodeBatch(cmds) to e.
func appendBatch(e *wire.Encoder, cmds []cmd) {
	plain := true
	for _, c := range cmds {
		plain = plain && c.Env == (service.Env{}) && len(c.Ops) == 0 && c.parts == 0 && !c.nested && c.low == 0
	}
	if plain {
		e.Byte(msgVersion)
		e.Uvarint(uint64(len(cmds)))
		for _, c := range cmds {
			e.Uvarint(c.ID.Client)
			e.Uvarint(c.ID.Seq)
			service.EncodeOp(e, c.Op)
		}
		return
	}
	e.Byte(batchVersion3)
	e.Uvarint(uint64(len(cmds)))
	for _, c := range cmds {
		e.Uvarint(c.ID.Client)
		e.Uvarint(c.ID.Seq)
		var flags uint64
		if c.Env != (service.Env{}) {
			flags |= cmdEnv
		}
		if len(c.Ops) > 0 {
			flags |= cmdGroup
		}
		if c.parts > 0 {
			flags |= cmdPart
		}
		if c.nested {
			flags |= cmdNested
		}
		if c.low > 0 {
			flags |= cmdLow
		}
		e.Uvarint(flags)
		if flags&cmdLow != 0 {
			e.Uvarint(c.ID.Seq - min(c.low, c.ID.Seq))
		}
		if flags&cmdEnv != 0 {
			service.EncodeEnv(e, c.Env)
		}
		if flags&cmdPart != 0 {
			e.Uvarint(uint64(c.part))
			e.Uvarint(uint64(c.parts))
		}
		if flags&cmdGroup != 0 {
			e.Uvarint(uint64(len(c.Ops)))
			for _, op := range c.Ops {
				service.EncodeOp(e, op)
			}
		} else {
			service.EncodeOp(e, c.Op)
		}
	}
}

// marshalAccept is m.marshal() for an Accept whose entries k with
// batches[k] != nil are the values encodeBatch(batches[k]) not yet
// encoded: each is encoded straight into the message, where marshal would
// copy it, and the entry's Value is set to its bytes there (capped), the
// value the leader keeps in its slot. The message is then the value's
// buffer: what the slot keeps alive with it is the Accept's other values
// and a few bytes of header. The bytes are marshal's, byte for byte
// (TestMarshalAccept): a value's length is written in its shortest form,
// the value moved down when its bound's form was longer.
func marshalAccept(m *message, batches [][]cmd) []byte {
	size := 48
	for k, en := range m.Entries {
		if batches[k] != nil {
			size += 16 + batchBound(batches[k])
		} else {
			size += 16 + len(en.Value)
		}
	}
	e := header.Message(kindAccept, size)
	encodeBallot(&e, m.Ballot)
	e.Uvarint(m.Commit)
	e.Uvarint(uint64(len(m.Entries)))
	for k := range m.Entries {
		en := &m.Entries[k]
		e.Uvarint(en.I)
		if batches[k] == nil {
			e.Bytes(en.Value)
			continue
		}
		w := uvarintLen(uint64(batchBound(batches[k])))
		at := len(e.B)
		e.B = append(e.B, make([]byte, w)...) // the length's room, filled below
		appendBatch(&e, batches[k])
		n := len(e.B) - at - w
		if nw := uvarintLen(uint64(n)); nw < w {
			copy(e.B[at+nw:], e.B[at+w:])
			e.B, w = e.B[:at+nw+n], nw
		}
		binary.PutUvarint(e.B[at:at+w], uint64(n))
		en.Value = e.B[at+w : at+w+n : at+w+n]
	}
	return e.B
}

// uvarintLen is the length of v's shortest uvarint form.
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

var noop = encodeBatch(nil)

// opSize bounds op's encoded length from above for lengths below 2^28
// (service.EncodeOp: each string and argument after a varint of at most 4
// bytes), so that encodeBatch allocates its buffer once.
func opSize(op service.Op) int {
	n := 12 + len(op.Kind) + len(op.Key)
	for _, a := range op.Args {
		n += 4 + len(a)
	}
	return n
}

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
	v := d.Byte()
	if v != msgVersion && v != batchVersion3 {
		return nil, fmt.Errorf("paxos: batch version %d", v)
	}
	n := d.Count(maxEntries, 5)
	out := make([]cmd, 0, n)
	var od service.OpDecoder // the batch's operations share argument-list arrays and repeated keys
	for i := 0; i < n && d.Err() == nil; i++ {
		c := cmd{ID: automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}}
		if v == msgVersion {
			c.Op = od.Decode(d, n-1-i)
			out = append(out, c)
			continue
		}
		flags := d.Uvarint()
		if flags&^(cmdEnv|cmdGroup|cmdPart|cmdNested|cmdLow) != 0 || flags&(cmdGroup|cmdPart) == cmdGroup|cmdPart {
			d.Fail(fmt.Errorf("paxos: command flags %x", flags))
		}
		c.nested = flags&cmdNested != 0
		if flags&cmdLow != 0 {
			c.low = c.ID.Seq - min(d.Uvarint(), c.ID.Seq)
		}
		if flags&cmdEnv != 0 {
			c.Env = service.DecodeEnv(d)
		}
		if flags&cmdPart != 0 {
			part, parts := d.Uvarint(), d.Uvarint()
			if parts == 0 || part >= parts || parts > maxGroupOps {
				d.Fail(fmt.Errorf("paxos: command part %d of %d", part, parts))
			}
			c.part, c.parts = int(part), int(parts)
		}
		if flags&cmdGroup != 0 {
			k := d.Count(maxGroupOps, 2)
			if k == 0 && d.Err() == nil {
				d.Fail(fmt.Errorf("paxos: empty group"))
			}
			c.Ops = make([]service.Op, 0, k)
			for j := 0; j < k && d.Err() == nil; j++ {
				c.Ops = append(c.Ops, od.Decode(d, n-1-i+k-1-j))
			}
		} else {
			c.Op = od.Decode(d, n-1-i)
		}
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

// slotKey is instance i's slot record key: recSlotPfx and i in 16
// lower-case hexadecimal digits (the stored format, fmt's "%s%016x"), built
// by hand: one allocation, the string, where fmt.Sprintf took two and ~10 %
// of a follower's allocations under pipelined SETs (one key per instance
// persisted, on every node).
func slotKey(i uint64) string {
	const digits = "0123456789abcdef"
	var b [len(recSlotPfx) + 16]byte
	copy(b[:], recSlotPfx)
	for k := len(b) - 1; k >= len(recSlotPfx); k-- {
		b[k] = digits[i&0xf]
		i >>= 4
	}
	return string(b[:])
}

// slotOfKey is the instance of slot record key k; false if k is not one.
func slotOfKey(k string) (uint64, bool) {
	hex, ok := strings.CutPrefix(k, recSlotPfx)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseUint(hex, 16, 64)
	return i, err == nil
}

func encodeSlot(s *slot) []byte {
	e := header.Record(16 + len(s.val))
	encodeBallot(&e, s.bal)
	e.Bool(s.chosen)
	e.Bytes(s.val)
	return e.B
}

func decodeSlot(b []byte) (*slot, error) {
	d, err := header.OpenRecord(b, "slot")
	if err != nil {
		return nil, err
	}
	s := &slot{bal: decodeBallot(d), chosen: d.Bool(), val: d.BytesCopy()}
	return s, d.Done()
}

func encodeBallotRec(b Ballot) []byte {
	e := header.Record(8)
	encodeBallot(&e, b)
	return e.B
}

func encodeUint(v uint64) []byte {
	e := header.Record(8)
	e.Uvarint(v)
	return e.B
}

func decodeUint(b []byte) (uint64, error) {
	d, err := header.OpenRecord(b, "number")
	if err != nil {
		return 0, err
	}
	x := d.Uvarint()
	return x, d.Done()
}

func unmarshalBallotRec(b []byte) (Ballot, error) {
	d, err := header.OpenRecord(b, "ballot")
	if err != nil {
		return Ballot{}, err
	}
	bl := decodeBallot(d)
	return bl, d.Done()
}

// snapshotIndex reads the instance index of a snapshot without restoring it.
func snapshotIndex(b []byte) (uint64, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != snapVersion1 && v != snapVersion2 {
		return 0, fmt.Errorf("paxos: snapshot version %d", v)
	}
	i := d.Uvarint()
	return i, d.Err()
}
