package service

import (
	"bytes"
	"testing"

	"github.com/synod-dev/synod/wire"
)

// TestSkipOp: SkipOp reads exactly the bytes DecodeOp reads, of every
// operation of a run (a marker written after each is read next either
// way), allocates nothing, and fails on every truncation DecodeOp fails
// on. A skip that forgot the argument count or an argument fails it.
func TestSkipOp(t *testing.T) {
	long := bytes.Repeat([]byte("v"), 300)
	ops := []Op{
		{Kind: "set", Key: "key:1", Args: [][]byte{[]byte("value")}},
		{Kind: "zrangestore", Key: "K", Args: [][]byte{long, nil, {}, []byte("x")}},
		{Kind: "get", Key: ""},
		{Kind: "ping"},
		{Kind: "mset", Key: "a", Args: [][]byte{[]byte("1"), []byte("b"), []byte("2")}},
	}
	var e wire.Encoder
	for i, op := range ops {
		EncodeOp(&e, op)
		e.Uvarint(uint64(1000 + i))
	}
	d := wire.NewDecoder(e.B)
	for i := range ops {
		SkipOp(d)
		if m := d.Uvarint(); m != uint64(1000+i) {
			t.Fatalf("op %d: after the skip, marker %d (err %v)", i, m, d.Err())
		}
	}
	if err := d.Done(); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		d := wire.NewDecoder(e.B)
		for range ops {
			SkipOp(d)
			d.Uvarint()
		}
	}); n != 0 {
		t.Errorf("SkipOp allocates %.0f times a run", n)
	}
	var one wire.Encoder
	EncodeOp(&one, ops[1])
	for cut := range len(one.B) {
		d1, d2 := wire.NewDecoder(one.B[:cut]), wire.NewDecoder(one.B[:cut])
		DecodeOp(d1)
		SkipOp(d2)
		if (d1.Done() == nil) != (d2.Done() == nil) {
			t.Fatalf("cut at %d of %d: DecodeOp's error %v, SkipOp's %v", cut, len(one.B), d1.Done(), d2.Done())
		}
	}
}
