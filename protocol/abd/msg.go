package abd

import (
	"fmt"

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
)

// header is the messages' and records' version 1 header.
var header = proto.Header{Protocol: "abd", Version: 1, Kinds: []string{"query", "query-reply", "store", "store-ack"}}

// message is the union of ABD's four messages.
type message struct {
	Kind  byte
	Op    uint64 // coordinator operation id the message belongs to
	Key   string
	Tag   Tag
	Tomb  bool
	Value []byte
}

func encodeTag(e *wire.Encoder, t Tag) {
	e.Uvarint(t.TS)
	e.String(t.Node)
	e.Uvarint(t.Seq)
}

func decodeTag(d *wire.Decoder) Tag {
	return Tag{TS: d.Uvarint(), Node: d.String(), Seq: d.Uvarint()}
}

func (m *message) marshal() []byte {
	e := header.Message(m.Kind, 32+len(m.Key)+len(m.Value))
	e.Uvarint(m.Op)
	switch m.Kind {
	case kindQuery:
		e.String(m.Key)
	case kindQueryReply, kindStore:
		e.String(m.Key)
		encodeTag(&e, m.Tag)
		e.Bool(m.Tomb)
		e.Bytes(m.Value)
	case kindStoreAck:
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
	m.Op = d.Uvarint()
	switch m.Kind {
	case kindQuery:
		m.Key = d.String()
	case kindQueryReply, kindStore:
		m.Key = d.String()
		m.Tag = decodeTag(d)
		m.Tomb = d.Bool()
		m.Value = d.BytesCopy()
	}
	return m, d.Done()
}

// entry is a replica's register for one key.
type entry struct {
	Tag   Tag
	Tomb  bool
	Value []byte
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
