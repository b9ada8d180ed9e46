package wire

import (
	"errors"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	var e Encoder
	e.Byte(7)
	e.Uvarint(1 << 40)
	e.Varint(-12345)
	e.Bool(true)
	e.Bytes([]byte("hello"))
	e.String("")
	e.Uvarint(3)
	d := NewDecoder(e.B)
	if d.Byte() != 7 || d.Uvarint() != 1<<40 || d.Varint() != -12345 || !d.Bool() ||
		string(d.Bytes()) != "hello" || d.String() != "" {
		t.Fatalf("fields did not round-trip (err %v)", d.Err())
	}
	// The count 3 claims three elements of at least one byte, but none remain.
	if d.Count(10, 1) != 0 || d.Err() == nil {
		t.Fatal("a count larger than the remaining bytes was accepted")
	}
	d = NewDecoder(e.B)
	d.Byte()
	d.Uvarint()
	d.Varint()
	d.Bool()
	if got := d.BytesCopy(); string(got) != "hello" {
		t.Fatalf("bytes: %q", got)
	}
	_ = d.String()
	d.Uvarint()
	if err := d.Done(); err != nil {
		t.Fatal(err)
	}
}

func TestTruncationAndTrailingBytes(t *testing.T) {
	var e Encoder
	e.Bytes([]byte("abcdef"))
	d := NewDecoder(e.B[:4])
	if d.Bytes() != nil || !errors.Is(d.Err(), ErrTruncated) {
		t.Fatalf("truncated field: err %v", d.Err())
	}
	// The first error sticks.
	if d.Uvarint() != 0 || !errors.Is(d.Err(), ErrTruncated) {
		t.Fatal("error did not stick")
	}
	d = NewDecoder(append(e.B, 1))
	d.Bytes()
	if d.Done() == nil {
		t.Fatal("trailing byte not reported")
	}
	d = NewDecoder([]byte{2})
	if d.Bool(); d.Err() == nil {
		t.Fatal("bool 2 accepted")
	}
	// A forged huge length must fail without allocating.
	var h Encoder
	h.Uvarint(1 << 62)
	d = NewDecoder(h.B)
	if d.Bytes() != nil || d.Err() == nil {
		t.Fatal("forged length accepted")
	}
}
