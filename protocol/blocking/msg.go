package blocking

import (
	"fmt"
	"sort"

	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/wire"
)

// Ballot numbers views: (Round, Node), compared lexicographically
// (proto.Ballot, shared with Paxos). Node is the proposer's index in the
// configuration, so two proposers never pick the same ballot; rounds start
// at 1, so the zero ballot means "no view". Views are spelled "round.node"
// (Ballot.Dotted) in traces and errors.
type Ballot = proto.Ballot

// Tag orders the writes of one key: the view the write was made in, then its
// sequence number within that view for its lock (the global lock, or the
// key's own lock in per-key mode).
type Tag struct {
	View Ballot
	Seq  uint64
}

// Less orders tags.
func (t Tag) Less(u Tag) bool {
	if t.View != u.View {
		return t.View.Less(u.View)
	}
	return t.Seq < u.Seq
}

func (t Tag) String() string { return fmt.Sprintf("(%s,%d)", t.View.Dotted(), t.Seq) }

// entry is a key's register: the tag of its last write, and the value or a
// tombstone.
type entry struct {
	Tag   Tag
	Tomb  bool
	Value []byte
}

func (e entry) present() bool { return !e.Tomb && e.Tag != (Tag{}) }

// kentry is an entry with its key (snapshots, pending writes).
type kentry struct {
	Key string
	E   entry
}

// Message kinds.
const (
	kindState      = 1 // heartbeat and Lamport request / reply / release
	kindWrite      = 2
	kindWriteAck   = 3
	kindCommit     = 4
	kindCommitAck  = 5
	kindPrepare    = 6
	kindPromise    = 7
	kindNack       = 8
	kindInstall    = 9
	kindInstallAck = 10
)

// header is the messages' and records' version 1 header.
var header = proto.Header{Protocol: "blocking", Version: 1, Kinds: []string{
	"state", "write", "write-ack", "commit", "commit-ack", "prepare", "promise", "nack", "install", "install-ack"}}

// lockReq is one outstanding lock request: Lamport timestamp TS for Lock.
type lockReq struct {
	Lock string
	TS   uint64
}

// message is the union of the protocol's messages; fields are used by kind.
type message struct {
	Kind byte

	// State: the sender's installed view and whether it is active, the
	// highest ballot it promised, its members, its Lamport clock and its
	// outstanding lock requests (only while it takes part in locking).
	View     Ballot
	Active   bool
	Promised Ballot
	Members  []bool
	Clock    uint64
	Reqs     []lockReq

	// Write, WriteAck, Commit, CommitAck: View, Lock and the write's Seq; Write
	// carries the key and entry.
	Lock string
	Seq  uint64
	W    kentry

	// Prepare, Promise, Nack, Install, InstallAck: Ballot (Nack: Promised).
	// Promise carries the promiser's installed view (View) and its latest
	// state (Snap: committed entries plus pending writes, or its staged
	// install); Install carries Members and the view's start state.
	Ballot Ballot
	Snap   []kentry
}

func encBallot(e *wire.Encoder, b Ballot) { b.Encode(e) }
func decBallot(d *wire.Decoder) Ballot    { return proto.DecodeBallot(d, maxNodes-1) }

func encKEntry(e *wire.Encoder, k kentry) {
	e.String(k.Key)
	encBallot(e, k.E.Tag.View)
	e.Uvarint(k.E.Tag.Seq)
	e.Bool(k.E.Tomb)
	e.Bytes(k.E.Value)
}

func decKEntry(d *wire.Decoder) kentry {
	var k kentry
	k.Key = d.String()
	k.E.Tag.View = decBallot(d)
	k.E.Tag.Seq = d.Uvarint()
	k.E.Tomb = d.Bool()
	k.E.Value = d.BytesCopy()
	return k
}

func encMembers(e *wire.Encoder, m []bool) {
	e.Uvarint(uint64(len(m)))
	for _, b := range m {
		e.Bool(b)
	}
}

const maxNodes = 1024

func decMembers(d *wire.Decoder) []bool {
	n := d.Count(maxNodes, 1)
	var m []bool
	for i := 0; i < n; i++ {
		m = append(m, d.Bool())
	}
	return m
}

func (m *message) marshal() []byte {
	e := header.Message(m.Kind, 64)
	switch m.Kind {
	case kindState:
		encBallot(&e, m.View)
		e.Bool(m.Active)
		encBallot(&e, m.Promised)
		encMembers(&e, m.Members)
		e.Uvarint(m.Clock)
		e.Uvarint(uint64(len(m.Reqs)))
		for _, r := range m.Reqs {
			e.String(r.Lock)
			e.Uvarint(r.TS)
		}
	case kindWrite:
		encBallot(&e, m.View)
		e.String(m.Lock)
		e.Uvarint(m.Seq)
		encKEntry(&e, m.W)
	case kindWriteAck, kindCommit, kindCommitAck:
		encBallot(&e, m.View)
		e.String(m.Lock)
		e.Uvarint(m.Seq)
	case kindPrepare, kindInstallAck:
		encBallot(&e, m.Ballot)
	case kindNack:
		encBallot(&e, m.Ballot)
		encBallot(&e, m.Promised)
	case kindPromise, kindInstall:
		encBallot(&e, m.Ballot)
		encBallot(&e, m.View)
		encMembers(&e, m.Members)
		e.Uvarint(uint64(len(m.Snap)))
		for _, k := range m.Snap {
			encKEntry(&e, k)
		}
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
	switch m.Kind {
	case kindState:
		m.View = decBallot(d)
		m.Active = d.Bool()
		m.Promised = decBallot(d)
		m.Members = decMembers(d)
		m.Clock = d.Uvarint()
		n := d.Count(1<<20, 2)
		for i := 0; i < n; i++ {
			m.Reqs = append(m.Reqs, lockReq{Lock: d.String(), TS: d.Uvarint()})
		}
	case kindWrite:
		m.View = decBallot(d)
		m.Lock = d.String()
		m.Seq = d.Uvarint()
		m.W = decKEntry(d)
	case kindWriteAck, kindCommit, kindCommitAck:
		m.View = decBallot(d)
		m.Lock = d.String()
		m.Seq = d.Uvarint()
	case kindPrepare, kindInstallAck:
		m.Ballot = decBallot(d)
	case kindNack:
		m.Ballot = decBallot(d)
		m.Promised = decBallot(d)
	case kindPromise, kindInstall:
		m.Ballot = decBallot(d)
		m.View = decBallot(d)
		m.Members = decMembers(d)
		n := d.Count(1<<24, 6)
		for i := 0; i < n && d.Err() == nil; i++ {
			m.Snap = append(m.Snap, decKEntry(d))
		}
	}
	return m, d.Done()
}

// Durable records.

func marshalBallot(b Ballot) []byte {
	e := header.Record(8)
	encBallot(&e, b)
	return e.B
}

func unmarshalBallot(b []byte) (Ballot, error) {
	d, err := header.OpenRecord(b, "ballot")
	if err != nil {
		return Ballot{}, err
	}
	r := decBallot(d)
	return r, d.Done()
}

// viewRecord is the installed view: ballot, members, and whether it was
// activated.
type viewRecord struct {
	View    Ballot
	Members []bool
	Active  bool
}

func (v viewRecord) marshal() []byte {
	e := header.Record(16 + len(v.Members))
	encBallot(&e, v.View)
	encMembers(&e, v.Members)
	e.Bool(v.Active)
	return e.B
}

func unmarshalView(b []byte) (viewRecord, error) {
	var v viewRecord
	d, err := header.OpenRecord(b, "view")
	if err != nil {
		return v, err
	}
	v.View = decBallot(d)
	v.Members = decMembers(d)
	v.Active = d.Bool()
	return v, d.Done()
}

func marshalKEntry(k kentry) []byte {
	e := header.Record(24 + len(k.Key) + len(k.E.Value))
	encKEntry(&e, k)
	return e.B
}

func unmarshalKEntry(b []byte) (kentry, error) {
	d, err := header.OpenRecord(b, "entry")
	if err != nil {
		return kentry{}, err
	}
	k := decKEntry(d)
	return k, d.Done()
}

func marshalSnap(s []kentry) []byte {
	e := header.Record(64)
	e.Uvarint(uint64(len(s)))
	for _, k := range s {
		encKEntry(&e, k)
	}
	return e.B
}

func unmarshalSnap(b []byte) ([]kentry, error) {
	d, err := header.OpenRecord(b, "snapshot")
	if err != nil {
		return nil, err
	}
	n := d.Count(1<<24, 6)
	var s []kentry
	for i := 0; i < n && d.Err() == nil; i++ {
		s = append(s, decKEntry(d))
	}
	return s, d.Done()
}

// sortedKeys returns a map's keys in order (automata must not let Go's map
// order leak into their outputs).
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
