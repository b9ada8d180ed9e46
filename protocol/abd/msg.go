package abd

import (
	"fmt"

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
	msgVersion = 1

	kindQuery      = 1
	kindQueryReply = 2
	kindStore      = 3
	kindStoreAck   = 4
)

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
	e := wire.Encoder{B: make([]byte, 0, 32+len(m.Key)+len(m.Value))}
	e.Byte(msgVersion)
	e.Byte(m.Kind)
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
	d := wire.NewDecoder(b)
	var m message
	if v := d.Byte(); v != msgVersion {
		if d.Err() != nil {
			return m, d.Err()
		}
		return m, fmt.Errorf("abd: message version %d, want %d", v, msgVersion)
	}
	m.Kind = d.Byte()
	m.Op = d.Uvarint()
	switch m.Kind {
	case kindQuery:
		m.Key = d.String()
	case kindQueryReply, kindStore:
		m.Key = d.String()
		m.Tag = decodeTag(d)
		m.Tomb = d.Bool()
		m.Value = d.BytesCopy()
	case kindStoreAck:
	default:
		d.Fail(fmt.Errorf("abd: unknown message kind %d", m.Kind))
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
	w := wire.Encoder{B: make([]byte, 0, 24+len(e.Value))}
	w.Byte(msgVersion)
	encodeTag(&w, e.Tag)
	w.Bool(e.Tomb)
	w.Bytes(e.Value)
	return w.B
}

func unmarshalEntry(b []byte) (entry, error) {
	d := wire.NewDecoder(b)
	var e entry
	if v := d.Byte(); v != msgVersion {
		return e, fmt.Errorf("abd: record version %d, want %d", v, msgVersion)
	}
	e.Tag = decodeTag(d)
	e.Tomb = d.Bool()
	e.Value = d.BytesCopy()
	return e, d.Done()
}
