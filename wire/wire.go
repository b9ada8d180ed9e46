// Package wire is the binary encoding shared by Synod's peer messages and
// records: unsigned varints, zig-zag signed varints and length-prefixed byte
// strings, with hard size limits so that a hostile or corrupt frame can never
// make a decoder allocate more than the frame itself.
//
// Every message type starts with a one-byte version and a one-byte kind, chosen
// by the protocol package that owns it; a decoder rejects versions it does not
// know instead of guessing.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MaxBytes bounds one length-prefixed field (values are limited well below it
// by the gateway; see service.MaxValueSize).
const MaxBytes = 64 << 20

// ErrTruncated is returned when a field runs past the end of the buffer.
var ErrTruncated = errors.New("wire: truncated")

// ErrOverlong is returned for a varint written in more bytes than it needs
// (a last byte of zero after the first). The Encoder writes every varint in
// its shortest form, so each value has exactly one encoding: data that
// decodes re-encodes to the same bytes. Accepting padded varints let a
// count that fit the bytes left fail after re-encoding (Count bounds a
// count by the bytes that follow it), found by FuzzDecoder's 10-minute run.
var ErrOverlong = errors.New("wire: varint not in its shortest form")

// overlong reports whether the varint binary.Uvarint read in the first n
// bytes of b was padded: its last byte carries no bits.
func overlong(b []byte, n int) bool { return n > 1 && b[n-1] == 0 }

// Encoder appends fields to a byte slice.
type Encoder struct{ B []byte }

// Uvarint appends an unsigned varint.
func (e *Encoder) Uvarint(v uint64) { e.B = binary.AppendUvarint(e.B, v) }

// Varint appends a zig-zag signed varint.
func (e *Encoder) Varint(v int64) { e.B = binary.AppendVarint(e.B, v) }

// Byte appends one byte.
func (e *Encoder) Byte(b byte) { e.B = append(e.B, b) }

// Bool appends a byte 0 or 1.
func (e *Encoder) Bool(b bool) {
	if b {
		e.B = append(e.B, 1)
	} else {
		e.B = append(e.B, 0)
	}
}

// Bytes appends a length-prefixed byte string.
func (e *Encoder) Bytes(b []byte) {
	e.Uvarint(uint64(len(b)))
	e.B = append(e.B, b...)
}

// String appends a length-prefixed string.
func (e *Encoder) String(s string) {
	e.Uvarint(uint64(len(s)))
	e.B = append(e.B, s...)
}

// Decoder reads fields from a byte slice. The first error sticks: later reads
// return zero values, so callers check Err once at the end.
type Decoder struct {
	B   []byte
	err error
}

// NewDecoder returns a decoder over b.
func NewDecoder(b []byte) *Decoder { return &Decoder{B: b} }

// Err returns the first decoding error.
func (d *Decoder) Err() error { return d.err }

// Fail records err as the decoder's error if none is set yet.
func (d *Decoder) Fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// Done returns the sticky error, or an error if bytes remain unread.
func (d *Decoder) Done() error {
	if d.err != nil {
		return d.err
	}
	if len(d.B) != 0 {
		return fmt.Errorf("wire: %d trailing bytes", len(d.B))
	}
	return nil
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.Fail(ErrTruncated)
		return 0
	}
	if overlong(d.B, n) {
		d.Fail(ErrOverlong)
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Varint reads a zig-zag signed varint.
func (d *Decoder) Varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.B)
	if n <= 0 {
		d.Fail(ErrTruncated)
		return 0
	}
	if overlong(d.B, n) {
		d.Fail(ErrOverlong)
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.B) < 1 {
		d.Fail(ErrTruncated)
		return 0
	}
	b := d.B[0]
	d.B = d.B[1:]
	return b
}

// Bool reads a byte that must be 0 or 1.
func (d *Decoder) Bool() bool {
	b := d.Byte()
	if b > 1 {
		d.Fail(fmt.Errorf("wire: bad bool %d", b))
	}
	return b == 1
}

// Bytes reads a length-prefixed byte string. The result aliases the input
// buffer; copy it to keep it.
func (d *Decoder) Bytes() []byte {
	n := d.Uvarint()
	if d.err != nil {
		return nil
	}
	if n > MaxBytes || n > uint64(len(d.B)) {
		d.Fail(ErrTruncated)
		return nil
	}
	b := d.B[:n:n]
	d.B = d.B[n:]
	return b
}

// BytesCopy reads a length-prefixed byte string into fresh memory.
func (d *Decoder) BytesCopy() []byte {
	b := d.Bytes()
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

// String reads a length-prefixed string.
func (d *Decoder) String() string { return string(d.Bytes()) }

// Count reads a varint element count and checks it against max and against the
// bytes left (each element takes at least minSize bytes), so that a forged count
// cannot force a huge allocation.
func (d *Decoder) Count(max int, minSize int) int {
	n := d.Uvarint()
	if d.err != nil {
		return 0
	}
	if minSize < 1 {
		minSize = 1
	}
	if n > uint64(max) || n*uint64(minSize) > uint64(len(d.B)) {
		d.Fail(fmt.Errorf("wire: count %d too large", n))
		return 0
	}
	return int(n)
}
