package pb

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Peer messages (the package doc, "Globus notifications in Synod", says
// which of the seed's notifications each one carries).
const (
	kindUpdate    = 1  // primary -> backups and joiners: one state update (STATE_UPDATE)
	kindAck       = 2  // backup or joiner -> primary: cumulative acknowledgement
	kindHeartbeat = 3  // primary -> every node: the view (HEARTBEAT)
	kindNewView   = 4  // new primary -> every node: the fail-over (FAILURE, switch_to_primary)
	kindStale     = 5  // any node -> a node of an older view: "your view is over"
	kindJoin      = 6  // restarted or removed node -> primary: send me the state
	kindChunk     = 7  // primary -> joiner: a piece of the state transfer
	kindChunkAck  = 8  // joiner -> primary: bytes received so far
	kindForward   = 9  // non-primary -> primary: a client's request
	kindReply     = 10 // primary -> forwarder: its answer
	kindReport    = 11 // restarted node -> every node: its durable view (durable.go)
	kindPromise   = 12 // node -> collecting new primary: the state it holds (takeover.go)
	kindBatch     = 13 // several of the above to one peer, from a batch step (batch.go)
)

// header is the messages' header. Version 2 (session 44): the take-over
// rules (takeover.go) added the promise, the report's state view, and
// acknowledgements that always name the transfer the member joined by;
// a version 1 node would misread or drop them without a word, so each
// version refuses the other's messages (proto.ErrBadVersion). Version 3
// (session 54): the batch message (batch.go), which a version 2 node
// would drop as an unknown kind, losing a batch's entries and forwards.
var header = proto.Header{Protocol: "pb", Version: 3, Kinds: []string{
	"update", "ack", "heartbeat", "newview", "stale", "join", "chunk", "chunk-ack", "forward", "reply", "report", "promise", "batch"}}

// recordHeader is the records' header, version 1: their formats did not
// change with the messages' (a view record without the state view, from
// before 1975ce1, still opens: viewRecord), so a data directory of the
// earlier version is read as it is.
var recordHeader = proto.Header{Protocol: "pb", Version: 1}

// Decoding bounds.
const (
	maxOps     = 1 << 16
	maxMembers = 1 << 12
)

// outcome is the answer to one request: its result, and for an atomic
// group one result per operation (Result is then OK).
type outcome struct {
	res     service.Result
	results []service.Result
}

func encodeOutcome(e *wire.Encoder, o outcome) {
	service.EncodeResult(e, o.res)
	e.Uvarint(uint64(len(o.results)))
	for _, r := range o.results {
		service.EncodeResult(e, r)
	}
}

func decodeOutcome(d *wire.Decoder) outcome {
	o := outcome{res: service.DecodeResult(d)}
	if n := d.Count(maxOps, 1); n > 0 {
		o.results = make([]service.Result, n)
		for i := range o.results {
			o.results[i] = service.DecodeResult(d)
		}
	}
	return o
}

// message is the union of the peer messages; each kind uses the fields its
// comment names.
type message struct {
	Kind byte
	// Every message but join, chunk-ack, forward and reply: the sender's view.
	View proto.Ballot
	// heartbeat, newview, stale: the view's description.
	Prev    proto.Ballot // the view the primary was a backup in before it took over
	Base    uint64       // the primary's applied count when the view began
	Epoch   uint64       // the member list's version within the view
	Members []automaton.NodeID
	// update: the entry's index; ack: the sender's applied (or received)
	// count; heartbeat, newview: the primary's applied count.
	Index uint64
	// update, heartbeat, newview: every member holds the entries up to Stable.
	Stable uint64
	// update.
	ID      automaton.RequestID
	Full    bool   // Payload is a snapshot, not a delta
	Payload []byte // service.DeltaState delta, or snapshot
	Out     outcome
	Low     uint64 // the entry's session fields (machine.go entry)
	End     bool
	// ack: the sender has installed a transferred state and asks to be a member.
	Joined bool
	// chunk, chunk-ack, and a joiner's ack: the transfer session.
	Nonce  uint64
	Offset uint64
	Total  uint64
	Data   []byte
	// forward.
	Req automaton.Request
	// report, promise: the view of the primary whose stream the sender's
	// state follows (takeover.go).
	SV proto.Ballot
}

func encodeNodes(e *wire.Encoder, ns []automaton.NodeID) {
	e.Uvarint(uint64(len(ns)))
	for _, n := range ns {
		e.String(string(n))
	}
}

func decodeNodes(d *wire.Decoder) []automaton.NodeID {
	n := d.Count(maxMembers, 1)
	out := make([]automaton.NodeID, n)
	for i := range out {
		out[i] = automaton.NodeID(d.String())
	}
	return out
}

func encodeOps(e *wire.Encoder, op service.Op, ops []service.Op) {
	if len(ops) == 0 {
		e.Uvarint(0)
		service.EncodeOp(e, op)
		return
	}
	e.Uvarint(uint64(len(ops)))
	for _, o := range ops {
		service.EncodeOp(e, o)
	}
}

func decodeOps(d *wire.Decoder) (service.Op, []service.Op) {
	n := d.Count(maxOps, 1)
	if n == 0 {
		return service.DecodeOp(d), nil
	}
	ops := make([]service.Op, n)
	for i := range ops {
		ops[i] = service.DecodeOp(d)
	}
	return service.Op{}, ops
}

func (m *message) marshal() []byte {
	e := header.Message(m.Kind, 64+len(m.Payload)+len(m.Data))
	switch m.Kind {
	case kindUpdate:
		m.View.Encode(&e)
		e.Uvarint(m.Index)
		e.Uvarint(m.Stable)
		e.Uvarint(m.ID.Client)
		e.Uvarint(m.ID.Seq)
		e.Bool(m.Full)
		e.Bytes(m.Payload)
		encodeOutcome(&e, m.Out)
		encodeSession(&e, m.Low, m.End)
	case kindAck:
		m.View.Encode(&e)
		e.Uvarint(m.Index)
		e.Bool(m.Joined)
		e.Uvarint(m.Nonce)
	case kindHeartbeat, kindNewView, kindStale:
		m.View.Encode(&e)
		m.Prev.Encode(&e)
		e.Uvarint(m.Base)
		e.Uvarint(m.Epoch)
		encodeNodes(&e, m.Members)
		e.Uvarint(m.Index)
		e.Uvarint(m.Stable)
	case kindReport:
		m.View.Encode(&e)
		m.Prev.Encode(&e)
		e.Uvarint(m.Base)
		e.Uvarint(m.Epoch)
		encodeNodes(&e, m.Members)
		e.Uvarint(m.Index)
		e.Bool(m.Joined)
		e.Uvarint(m.Nonce)
		m.SV.Encode(&e)
	case kindPromise:
		m.View.Encode(&e)
		m.SV.Encode(&e)
		e.Uvarint(m.Index)
		e.Bool(m.Joined)
		e.Bytes(m.Data)
	case kindJoin:
	case kindChunk:
		m.View.Encode(&e)
		e.Uvarint(m.Nonce)
		e.Uvarint(m.Index)
		e.Uvarint(m.Offset)
		e.Uvarint(m.Total)
		e.Bytes(m.Data)
	case kindChunkAck:
		e.Uvarint(m.Nonce)
		e.Uvarint(m.Offset)
	case kindForward:
		e.Uvarint(m.Req.ID.Client)
		e.Uvarint(m.Req.ID.Seq)
		encodeOps(&e, m.Req.Op, m.Req.Ops)
		service.EncodeEnv(&e, m.Req.Env)
		e.Byte(byte(m.Req.Opts.Read))
		if m.Req.Unanswered > 0 { // client sessions: only when told, so as before without
			e.Uvarint(m.Req.Unanswered)
		}
	case kindReply:
		e.Uvarint(m.ID.Client)
		e.Uvarint(m.ID.Seq)
		encodeOutcome(&e, m.Out)
	}
	return e.B
}

func unmarshal(b []byte) (message, error) {
	var m message
	d, kind, err := header.OpenMessage(b)
	if err != nil {
		return m, err
	}
	m.Kind = kind
	ballot := func() proto.Ballot { return proto.DecodeBallot(d, maxMembers) }
	switch kind {
	case kindUpdate:
		m.View = ballot()
		m.Index = d.Uvarint()
		m.Stable = d.Uvarint()
		m.ID = automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}
		m.Full = d.Bool()
		m.Payload = d.BytesCopy()
		m.Out = decodeOutcome(d)
		m.Low, m.End = decodeSession(d)
	case kindAck:
		m.View = ballot()
		m.Index = d.Uvarint()
		m.Joined = d.Bool()
		m.Nonce = d.Uvarint()
	case kindHeartbeat, kindNewView, kindStale:
		m.View = ballot()
		m.Prev = ballot()
		m.Base = d.Uvarint()
		m.Epoch = d.Uvarint()
		m.Members = decodeNodes(d)
		m.Index = d.Uvarint()
		m.Stable = d.Uvarint()
	case kindReport:
		m.View = ballot()
		m.Prev = ballot()
		m.Base = d.Uvarint()
		m.Epoch = d.Uvarint()
		m.Members = decodeNodes(d)
		m.Index = d.Uvarint()
		m.Joined = d.Bool()
		m.Nonce = d.Uvarint()
		m.SV = ballot()
	case kindPromise:
		m.View = ballot()
		m.SV = ballot()
		m.Index = d.Uvarint()
		m.Joined = d.Bool()
		m.Data = d.BytesCopy()
	case kindJoin:
	case kindChunk:
		m.View = ballot()
		m.Nonce = d.Uvarint()
		m.Index = d.Uvarint()
		m.Offset = d.Uvarint()
		m.Total = d.Uvarint()
		m.Data = d.BytesCopy()
	case kindChunkAck:
		m.Nonce = d.Uvarint()
		m.Offset = d.Uvarint()
	case kindForward:
		m.Req.ID = automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}
		m.Req.Op, m.Req.Ops = decodeOps(d)
		m.Req.Env = service.DecodeEnv(d)
		m.Req.Opts.Read = automaton.ReadMode(d.Byte())
		if d.Err() == nil && len(d.B) > 0 {
			m.Req.Unanswered = d.Uvarint()
		}
	case kindReply:
		m.ID = automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}
		m.Out = decodeOutcome(d)
	}
	if err := d.Done(); err != nil {
		return m, fmt.Errorf("pb: %s: %w", header.KindName(kind), err)
	}
	return m, nil
}

// --- durable record ---

// bootKey names the record pb persisted before its state was durable
// (issue 29): a node whose data holds only it rejoins as a backup. New
// nodes write the records of durable.go instead.
const bootKey = "pb/booted"

// marshalBoot encodes the boot record: the view the node first started in.
func marshalBoot(v proto.Ballot) []byte {
	e := recordHeader.Record(8)
	v.Encode(&e)
	return e.B
}

func unmarshalBoot(b []byte) (proto.Ballot, error) {
	d, err := recordHeader.OpenRecord(b, "boot")
	if err != nil {
		return proto.Ballot{}, err
	}
	v := proto.DecodeBallot(d, maxMembers)
	return v, d.Done()
}
