package proto

import (
	"errors"
	"fmt"

	"github.com/synod-dev/synod/wire"
)

// Header errors, wrapped with the protocol and the values found.
var (
	ErrBadVersion  = errors.New("bad version")
	ErrUnknownType = errors.New("unknown message type")
)

// Header is a protocol's message and record header. A message starts with
// the version byte and a kind byte naming its type (kinds run from 1 to
// len(Kinds)); a record starts with the version byte alone.
type Header struct {
	Protocol string   // prefixes the errors
	Version  byte     // the version this code writes and reads
	Kinds    []string // Kinds[k-1] names message kind k
}

// Message starts encoding a message of kind k, with room for size bytes.
func (h Header) Message(k byte, size int) wire.Encoder {
	e := wire.Encoder{B: make([]byte, 0, size)}
	e.Byte(h.Version)
	e.Byte(k)
	return e
}

// Record starts encoding a record, with room for size bytes.
func (h Header) Record(size int) wire.Encoder { return h.RecordIn(make([]byte, 0, size)) }

// RecordIn starts encoding a record at the start of buf (its length is
// ignored; its capacity is the record's room before an append copies).
func (h Header) RecordIn(buf []byte) wire.Encoder {
	e := wire.Encoder{B: buf[:0]}
	e.Byte(h.Version)
	return e
}

// OpenMessage reads a message's header: the decoder positioned after it,
// and the kind. A truncated header, a version other than h.Version
// (ErrBadVersion) and a kind outside 1..len(Kinds) (ErrUnknownType) are
// errors.
func (h Header) OpenMessage(b []byte) (*wire.Decoder, byte, error) {
	d := wire.NewDecoder(b)
	k, err := h.readMessageHeader(d)
	return d, k, err
}

// MessageKind checks a message's header as OpenMessage does and returns
// its kind; the body is b[2:]. It allocates nothing for a good header
// (OpenMessage's decoder is on the heap), for decoders kept on the stack.
func (h Header) MessageKind(b []byte) (byte, error) {
	d := wire.Decoder{B: b}
	return h.readMessageHeader(&d)
}

func (h Header) readMessageHeader(d *wire.Decoder) (byte, error) {
	v := d.Byte()
	k := d.Byte()
	switch {
	case d.Err() != nil:
		return 0, fmt.Errorf("%s: message header: %w", h.Protocol, d.Err())
	case v != h.Version:
		return 0, fmt.Errorf("%s: message: %w %d, want %d", h.Protocol, ErrBadVersion, v, h.Version)
	case k == 0 || int(k) > len(h.Kinds):
		return 0, fmt.Errorf("%s: %w %d", h.Protocol, ErrUnknownType, k)
	}
	return k, nil
}

// OpenRecord reads a record's version byte; what names the record in the
// error (ErrBadVersion, or a truncated record).
func (h Header) OpenRecord(b []byte, what string) (*wire.Decoder, error) {
	d := wire.NewDecoder(b)
	v := d.Byte()
	switch {
	case d.Err() != nil:
		return d, fmt.Errorf("%s: %s record: %w", h.Protocol, what, d.Err())
	case v != h.Version:
		return d, fmt.Errorf("%s: %s record: %w %d, want %d", h.Protocol, what, ErrBadVersion, v, h.Version)
	}
	return d, nil
}

// KindName names message kind k ("kind 42" for an unknown one).
func (h Header) KindName(k byte) string {
	if k == 0 || int(k) > len(h.Kinds) {
		return fmt.Sprintf("kind %d", k)
	}
	return h.Kinds[k-1]
}
