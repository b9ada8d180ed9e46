package orcabcast

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Message kinds (seed 004 §4.1 and §4.2).
const (
	kSubmit  byte = iota + 1 // sender → sequencer: an update, small-message method (carries the sender's state)
	kData                    // sender → every node: an update, large-message method
	kOrdered                 // sequencer → every node: an update and its global sequence number
	kAccept                  // sequencer → every node: the sequence number of a large update (no data)
	kFetch                   // node → sequencer: "I have applied up to here; send what follows" (gap recovery)
	kState                   // node → sequencer: a state message; sequencer → node: its last sequence number
	kSnap                    // sequencer → node: the state at a sequence number (the history was trimmed past it)
	kFifo                    // broken variant only: a sender's update with its own FIFO number
)

var header = proto.Header{Protocol: Name, Version: 1,
	Kinds: []string{"submit", "data", "ordered", "accept", "fetch", "state", "snap", "fifo"}}

// entry is one update: the request (object, operation, parameters: §4.2's
// update message), the node it came from and, once ordered, its sequence
// number.
type entry struct {
	seq    uint64
	origin automaton.NodeID
	req    automaton.Request
}

func encodeEntry(e *wire.Encoder, x entry) {
	e.Uvarint(x.seq)
	e.String(string(x.origin))
	e.Uvarint(x.req.ID.Client)
	e.Uvarint(x.req.ID.Seq)
	service.EncodeOp(e, x.req.Op)
}

func decodeEntry(d *wire.Decoder) entry {
	x := entry{seq: d.Uvarint(), origin: automaton.NodeID(d.String())}
	x.req.ID = automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}
	x.req.Op = service.DecodeOp(d)
	return x
}

// message is every peer message decoded; which fields mean something
// depends on kind.
type message struct {
	kind byte
	n    uint64 // submit, fetch, state (node → seq): the sender's applied count; ordered, accept, snap, state (seq → node): the sequencer's last number; fifo: the sender's number
	x    entry  // submit, data, ordered, fifo; accept: seq, origin, id only
	snap snapshot
}

func (m message) encode() []byte {
	e := header.Message(m.kind, 64)
	e.Uvarint(m.n)
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
	}
	return e.B
}

func decodeMessage(b []byte) (message, error) {
	d, k, err := header.OpenMessage(b)
	if err != nil {
		return message{}, err
	}
	m := message{kind: k, n: d.Uvarint()}
	switch k {
	case kSubmit, kData, kOrdered, kFifo:
		m.x = decodeEntry(d)
	case kAccept:
		m.x.seq = d.Uvarint()
		m.x.origin = automaton.NodeID(d.String())
		m.x.req.ID = automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}
	case kSnap:
		m.snap = decodeSnapshot(d)
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

// Records (the sequencer's only): "m/<seq>" holds an ordered update,
// written before it is broadcast; "snap" holds a snapshot.
const snapKey = "snap"

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
