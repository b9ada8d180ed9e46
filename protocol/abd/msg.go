package abd

import (
	"fmt"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/wire"
)

// Tag orders writes: lexicographically by TS, then Node, then Seq. (Node, Seq)
// is the writer id: the coordinating node and its operation id.
type Tag struct {
	TS   uint64
	Node string
	Seq  uint64
}

// Less reports whether t orders before u. With tsOnly, only TS is compared
// (the seed's server rule; used by the broken variant).
func (t Tag) Less(u Tag, tsOnly bool) bool {
	if t.TS != u.TS || tsOnly {
		return t.TS < u.TS
	}
	if t.Node != u.Node {
		return t.Node < u.Node
	}
	return t.Seq < u.Seq
}

func (t Tag) String() string { return fmt.Sprintf("(%d,%s,%d)", t.TS, t.Node, t.Seq) }

// Message kinds.
const (
	kindQuery      = 1
	kindQueryReply = 2
	kindStore      = 3
	kindStoreAck   = 4
	// kindBatch carries several of the above to one peer (a client batch's
	// phases, a replica's answers to them): protocol/proto's batch message
	// (Header.Coalesce, SplitBatch). Added after version 1's four kinds,
	// whose encodings are unchanged.
	kindBatch = 5
	// kindQueryAbove is a query that names the coordinator's highest tag
	// for the key and whether the operation writes: the replica leaves its
	// value out of the answer (a query-reply, kindQueryReply) where the
	// coordinator cannot use it (the package doc, "Values the coordinator
	// holds").
	// Added after kindBatch; kindQuery is still answered with the value.
	kindQueryAbove = 6
)

// header is the messages' and records' version 1 header.
var header = proto.Header{Protocol: "abd", Version: 1, Kinds: []string{"query", "query-reply", "store", "store-ack", "batch", "query-above"}}

// message is the union of ABD's messages.
type message struct {
	Kind  byte
	Op    uint64 // coordinator operation id the message belongs to
	Key   string
	Tag   Tag // a query-above's: the coordinator's highest tag
	Tomb  bool
	Value []byte
	// Writes: a query-above's operation writes (it needs no value).
	Writes bool
}

func encodeTag(e *wire.Encoder, t Tag) {
	e.Uvarint(t.TS)
	e.String(t.Node)
	e.Uvarint(t.Seq)
}

func decodeTag(d *wire.Decoder) Tag {
	return Tag{TS: d.Uvarint(), Node: d.String(), Seq: d.Uvarint()}
}

// appendStoreAck appends a store-ack message for op to b (as marshal).
func appendStoreAck(b []byte, op uint64) []byte {
	e := wire.Encoder{B: b}
	e.Byte(header.Version)
	e.Byte(kindStoreAck)
	e.Uvarint(op)
	return e.B
}

// appendQuery appends a query message for op on key to b (as marshal).
func appendQuery(b []byte, op uint64, key string) []byte {
	e := wire.Encoder{B: b}
	e.Byte(header.Version)
	e.Byte(kindQuery)
	e.Uvarint(op)
	e.String(key)
	return e.B
}

// appendQueryAbove appends a query-above message for op on key to b:
// the coordinator's highest tag t and whether the operation writes.
func appendQueryAbove(b []byte, op uint64, key string, t Tag, writes bool) []byte {
	e := wire.Encoder{B: b}
	e.Byte(header.Version)
	e.Byte(kindQueryAbove)
	e.Uvarint(op)
	e.String(key)
	encodeTag(&e, t)
	e.Bool(writes)
	return e.B
}

func (m *message) marshal() []byte {
	switch m.Kind {
	case kindQueryReply, kindStore:
		return marshalRegister(m.Kind, m.Op, m.Key, m.Tag, m.Tomb, m.Value)
	case kindQueryAbove:
		return appendQueryAbove(make([]byte, 0, 32+len(m.Key)+len(m.Tag.Node)), m.Op, m.Key, m.Tag, m.Writes)
	}
	e := header.Message(m.Kind, 32+len(m.Key))
	e.Uvarint(m.Op)
	if m.Kind == kindQuery {
		e.String(m.Key)
	}
	return e.B
}

// marshalRegister encodes a query-reply or a store: the register (tag,
// tomb, value) of a key. The key is a string or the bytes of a received
// frame (a replica answers a query without making the key a string).
func marshalRegister[K string | []byte](kind byte, op uint64, key K, t Tag, tomb bool, value []byte) []byte {
	return appendRegister(make([]byte, 0, 32+len(key)+len(value)), kind, op, key, t, tomb, value)
}

// appendRegister appends marshalRegister's message to b.
func appendRegister[K string | []byte](b []byte, kind byte, op uint64, key K, t Tag, tomb bool, value []byte) []byte {
	e := wire.Encoder{B: b}
	e.Byte(header.Version)
	e.Byte(kind)
	e.Uvarint(op)
	e.Uvarint(uint64(len(key))) // as wire.Encoder.String and Bytes
	e.B = append(e.B, key...)
	encodeTag(&e, t)
	e.Bool(tomb)
	e.Bytes(value)
	return e.B
}

// frame is a decoded message whose byte strings (Key, Node: the tag's
// writer, Value) alias the received buffer. OnMessage reads it without
// copying and copies only what it keeps: the automaton contract forbids
// keeping an input's bytes beyond the step.
type frame struct {
	Kind   byte
	Op     uint64
	Key    []byte
	TS     uint64
	Node   []byte
	Seq    uint64
	Tomb   bool
	Value  []byte
	Writes bool // a query-above's
}

func decodeFrame(b []byte) (frame, error) {
	var f frame
	// MessageKind, not OpenMessage, so that the decoder stays on the stack
	// (OpenMessage returns it on the heap: one allocation per message).
	k, err := header.MessageKind(b)
	if err != nil {
		return f, err
	}
	f.Kind = k
	d := &wire.Decoder{B: b[2:]}
	f.Op = d.Uvarint()
	switch f.Kind {
	case kindQuery:
		f.Key = shortBytes(d)
	case kindQueryReply, kindStore:
		f.Key = shortBytes(d)
		f.TS, f.Node, f.Seq = d.Uvarint(), shortBytes(d), shortUvarint(d)
		f.Tomb = d.Bool()
		f.Value = shortBytes(d)
	case kindQueryAbove:
		f.Key = shortBytes(d)
		f.TS, f.Node, f.Seq = d.Uvarint(), shortBytes(d), shortUvarint(d)
		f.Writes = d.Bool()
	}
	return f, d.Done()
}

// shortUvarint is d.Uvarint with its usual case, one byte, inlined (a
// one-byte varint is never overlong); shortBytes is d.Bytes with a length
// of one byte read in place. decodeFrame's calls of d.Uvarint were about
// half its CPU (BenchmarkReplica, session 59). Both fall back to d's own
// method for anything else. After an error they may read on where d's
// methods return zeros; decodeFrame then returns d's error (Done) and the
// frame is dropped, so what they read is never used.
func shortUvarint(d *wire.Decoder) uint64 {
	if len(d.B) > 0 && d.B[0] < 0x80 {
		v := uint64(d.B[0])
		d.B = d.B[1:]
		return v
	}
	return d.Uvarint()
}

func shortBytes(d *wire.Decoder) []byte {
	if len(d.B) > 0 && d.B[0] < 0x80 && int(d.B[0]) < len(d.B) {
		n := 1 + int(d.B[0])
		b := d.B[1:n:n]
		d.B = d.B[n:]
		return b
	}
	return d.Bytes()
}

// below reports whether the frame's tag orders before t (Tag.Less, the
// writer compared as bytes: nothing is made a string).
func (f *frame) below(t Tag) bool {
	if f.TS != t.TS {
		return f.TS < t.TS
	}
	if string(f.Node) != t.Node {
		return string(f.Node) < t.Node
	}
	return f.Seq < t.Seq
}

// tag is the frame's tag, its writer's name taken from nodes when it is
// one of them (no allocation), else copied.
func (f *frame) tag(nodes []automaton.NodeID) Tag {
	t := Tag{TS: f.TS, Seq: f.Seq}
	for _, n := range nodes {
		if string(n) == string(f.Node) {
			t.Node = string(n)
			return t
		}
	}
	t.Node = string(f.Node)
	return t
}

// unmarshal decodes a message into memory of its own.
func unmarshal(b []byte) (message, error) {
	f, err := decodeFrame(b)
	if err != nil {
		return message{}, err
	}
	return message{Kind: f.Kind, Op: f.Op, Key: string(f.Key), Tag: f.tag(nil), Tomb: f.Tomb, Value: copyBytes(f.Value), Writes: f.Writes}, nil
}

// copyBytes copies b into fresh memory (nil for an empty b, as
// wire.Decoder.BytesCopy).
func copyBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// recKeyPfx starts a register's record key: recKeyPfx and the key (the
// other record is "inc"; doc.go, "Persisted records").
const recKeyPfx = "k/"

// registerKey returns the key of register record k; false if k is not one.
func registerKey(k string) (string, bool) {
	key, ok := strings.CutPrefix(k, recKeyPfx)
	return key, ok && key != ""
}

// entry is a replica's register for one key.
type entry struct {
	Tag   Tag
	Tomb  bool
	Value []byte
	// rkey is a held register's record key (recKeyPfx and the key; the
	// store's map key is its tail): kept so that a store to a key already
	// held does not build it again. Empty in an entry that is not a
	// register of the store (a reply, an operation's tag and value).
	rkey string
}

// present reports whether the register holds a value (not nothing, not a tombstone).
func (e entry) present() bool { return e.Tag != (Tag{}) && !e.Tomb }

func (e entry) marshal() []byte {
	w := header.Record(24 + len(e.Value))
	encodeTag(&w, e.Tag)
	w.Bool(e.Tomb)
	w.Bytes(e.Value)
	return w.B
}

// recordValue is the value of the register record rec (marshal), its
// last n bytes, as a slice of rec capped at its end; nil when n is 0
// (as copyBytes).
func recordValue(rec []byte, n int) []byte {
	if n == 0 {
		return nil
	}
	return rec[len(rec)-n : len(rec) : len(rec)]
}

func unmarshalEntry(b []byte) (entry, error) {
	var e entry
	d, err := header.OpenRecord(b, "register")
	if err != nil {
		return e, err
	}
	e.Tag = decodeTag(d)
	e.Tomb = d.Bool()
	e.Value = d.BytesCopy()
	return e, d.Done()
}
