package orcabcast

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Message kinds (the Orca paper §4.1 and §4.2).
const (
	kSubmit  byte = iota + 1 // sender → sequencer: an update, small-message method (carries the sender's state)
	kData                    // sender → every node: an update, large-message method
	kOrdered                 // sequencer → every node: an update and its global sequence number
	kAccept                  // sequencer → every node: the sequence number of a large update (no data)
	kFetch                   // node → sequencer: "I have applied up to here; send what follows" (gap recovery)
	kState                   // node → sequencer: a state message; sequencer → node: its last sequence number
	kSnap                    // sequencer → node: the state at a sequence number (the history was trimmed past it)
	kFifo                    // broken variant only: a sender's update with its own FIFO number
	kAck                     // member → sequencer: "I hold every update up to n of your ballot" ([21]'s acknowledgement)
	kCommit                  // sequencer → every node: updates up to c are held by r+1 nodes and may be delivered
	kPrepare                 // candidate → every node: phase 1a of the election, with the candidate's applied count
	kPromise                 // member → candidate: phase 1b, the updates it holds above the candidate's count
	kNack                    // node → a node in an older ballot: the newer ballot
)

var header = proto.Header{Protocol: Name, Version: 1,
	Kinds: []string{"submit", "data", "ordered", "accept", "fetch", "state", "snap", "fifo", "ack", "commit", "prepare", "promise", "nack"}}

// entry is one update: the request (object, operation, parameters: §4.2's
// update message), the node it came from and, once ordered, its sequence
// number and the ballot of the sequencer that gave it that number (the
// election keeps, for each number, the update of the highest ballot).
type entry struct {
	seq    uint64
	bal    uint64
	origin automaton.NodeID
	req    automaton.Request
}

func encodeEntry(e *wire.Encoder, x entry) {
	e.Uvarint(x.seq)
	e.Uvarint(x.bal)
	e.String(string(x.origin))
	e.Uvarint(x.req.ID.Client)
	e.Uvarint(x.req.ID.Seq)
	service.EncodeOp(e, x.req.Op)
}

func decodeEntry(d *wire.Decoder) entry {
	x := entry{seq: d.Uvarint(), bal: d.Uvarint(), origin: automaton.NodeID(d.String())}
	x.req.ID = automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}
	x.req.Op = service.DecodeOp(d)
	return x
}

// message is every peer message decoded; which fields mean something
// depends on kind.
type message struct {
	kind    byte
	bal     uint64  // the sender's ballot (every kind)
	c       uint64  // ordered, commit, state (seq → node): the sequencer's commit point
	xs      []entry // promise: the updates the member holds above the candidate's count
	hasSnap bool    // promise: snap is set (the member's history does not reach the candidate's count)
	n       uint64  // submit, fetch, state (node → seq): the sender's applied count; ordered, accept, snap, state (seq → node): the sequencer's last number; fifo: the sender's number
	x       entry   // submit, data, ordered, fifo; accept: seq, origin, id only
	snap    snapshot
}

func (m message) encode() []byte {
	e := header.Message(m.kind, 64)
	e.Uvarint(m.bal)
	e.Uvarint(m.n)
	e.Uvarint(m.c)
	switch m.kind {
	case kSubmit, kData, kOrdered, kFifo:
		encodeEntry(&e, m.x)
	case kAccept:
		e.Uvarint(m.x.seq)
		e.String(string(m.x.origin))
		e.Uvarint(m.x.req.ID.Client)
		e.Uvarint(m.x.req.ID.Seq)
	case kSnap:
		m.snap.encode(&e)
	case kPromise:
		e.Uvarint(uint64(len(m.xs)))
		for _, x := range m.xs {
			encodeEntry(&e, x)
		}
		e.Bool(m.hasSnap)
		if m.hasSnap {
			m.snap.encode(&e)
		}
	}
	return e.B
}

func decodeMessage(b []byte) (message, error) {
	d, k, err := header.OpenMessage(b)
	if err != nil {
		return message{}, err
	}
	m := message{kind: k, bal: d.Uvarint(), n: d.Uvarint(), c: d.Uvarint()}
	switch k {
	case kSubmit, kData, kOrdered, kFifo:
		m.x = decodeEntry(d)
	case kAccept:
		m.x.seq = d.Uvarint()
		m.x.origin = automaton.NodeID(d.String())
		m.x.req.ID = automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}
	case kSnap:
		m.snap = decodeSnapshot(d)
	case kPromise:
		n := d.Count(1<<24, 5)
		for i := 0; i < n && d.Err() == nil; i++ {
			m.xs = append(m.xs, decodeEntry(d))
		}
		if m.hasSnap = d.Bool(); m.hasSnap {
			m.snap = decodeSnapshot(d)
		}
	}
	return m, d.Done()
}

// snapshot is a replica's state at sequence number seq: the objects, the
// deduplication table and the guarded updates still blocked.
type snapshot struct {
	seq     uint64
	state   []byte
	dedup   orca.Dedup
	blocked []entry
}

func (s snapshot) encode(e *wire.Encoder) {
	e.Uvarint(s.seq)
	e.Bytes(s.state)
	s.dedup.Encode(e)
	e.Uvarint(uint64(len(s.blocked)))
	for _, x := range s.blocked {
		encodeEntry(e, x)
	}
}

func decodeSnapshot(d *wire.Decoder) snapshot {
	s := snapshot{seq: d.Uvarint(), state: d.BytesCopy()}
	s.dedup = orca.DecodeDedup(d)
	n := d.Count(1<<24, 5)
	for i := 0; i < n && d.Err() == nil; i++ {
		s.blocked = append(s.blocked, decodeEntry(d))
	}
	return s
}

// Records (every node's): "m/<seq>" holds an ordered update, written by
// the sequencer before it is broadcast and by a member before it
// acknowledges it; "snap" holds a snapshot; "ballot" the highest ballot
// the node promised (written before the promise is sent).
const (
	snapKey   = "snap"
	ballotKey = "ballot"
)

func entryKey(seq uint64) string { return "m/" + uitoa(seq) }

func uitoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}

func encodeEntryRecord(x entry) []byte {
	e := header.Record(64)
	encodeEntry(&e, x)
	return e.B
}

func encodeSnapRecord(s snapshot) []byte {
	e := header.Record(64 + len(s.state))
	s.encode(&e)
	return e.B
}
