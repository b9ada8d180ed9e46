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

// TestOverlongVarintRefused: a varint padded with a zero last byte decodes
// to ErrOverlong, so every value has one encoding (FuzzDecoder's crasher
// 3a7646ea9e3a26bd: a count that fit the bytes after a padded varint no
// longer fit once the varint was re-encoded in its shortest form).
func TestOverlongVarintRefused(t *testing.T) {
	for _, c := range []struct {
		b      []byte
		signed bool
	}{
		{[]byte{0x80, 0x00}, false},
		{[]byte{0xf9, 0x80, 0x00}, false},
		{[]byte{0x80, 0x00}, true},
		{[]byte{0x81, 0x80, 0x80, 0x00}, true},
	} {
		d := NewDecoder(c.b)
		if c.signed {
			d.Varint()
		} else {
			d.Uvarint()
		}
		if !errors.Is(d.Err(), ErrOverlong) {
			t.Errorf("%x (signed %v): err %v, want ErrOverlong", c.b, c.signed, d.Err())
		}
	}
	for _, v := range []uint64{0, 1, 127, 128, 300, 1 << 63} {
		var e Encoder
		e.Uvarint(v)
		e.Varint(int64(v))
		d := NewDecoder(e.B)
		if got, got2 := d.Uvarint(), d.Varint(); got != v || got2 != int64(v) || d.Done() != nil {
			t.Errorf("%d: decoded %d, %d, err %v", v, got, got2, d.Done())
		}
	}
}
