package service

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/synod-dev/synod/wire"
)

// TestOpCodec: DecodeOp returns what EncodeOp wrote (a common kind and an
// uncommon one, empty and long arguments), its arguments are capped pieces
// that an append cannot spill into the next one (it fails when a piece's
// capacity runs on into the next).
func TestOpCodec(t *testing.T) {
	long := bytes.Repeat([]byte("v"), 300)
	for _, op := range []Op{
		{Kind: "set", Key: "k", Args: [][]byte{[]byte("value"), []byte("nx")}},
		{Kind: "zrangestore", Key: strings.Repeat("K", 200), Args: [][]byte{long, nil, []byte("x")}},
		{Kind: "get", Key: ""},
	} {
		var e wire.Encoder
		EncodeOp(&e, op)
		d := wire.NewDecoder(e.B)
		got := DecodeOp(d)
		if d.Err() != nil {
			t.Fatal(d.Err())
		}
		if got.Kind != op.Kind || got.Key != op.Key || len(got.Args) != len(op.Args) {
			t.Fatalf("decoded %+v, want %+v", got, op)
		}
		for i := range op.Args {
			if !bytes.Equal(got.Args[i], op.Args[i]) || (len(op.Args[i]) == 0 && got.Args[i] != nil) {
				t.Fatalf("%s arg %d = %q, want %q", op.Kind, i, got.Args[i], op.Args[i])
			}
		}
		e.B[len(e.B)-1] ^= 0xff // the decoded op owns its memory
		for i := range got.Args {
			_ = append(got.Args[i], '!')
		}
		for i := range op.Args {
			if !bytes.Equal(got.Args[i], op.Args[i]) {
				t.Fatalf("%s arg %d changed to %q", op.Kind, i, got.Args[i])
			}
		}
	}
}

// TestCopyOp: CopyOp gives what DecodeOp reads back from the encoding
// (nil for empty arguments and an empty list, each argument capped), and
// shares no argument memory with its source.
func TestCopyOp(t *testing.T) {
	long := bytes.Repeat([]byte("v"), 300)
	for _, op := range []Op{
		{Kind: "set", Key: "k", Args: [][]byte{[]byte("value"), []byte("nx")}},
		{Kind: "zrangestore", Key: strings.Repeat("K", 200), Args: [][]byte{long, nil, {}, []byte("x")}},
		{Kind: "get", Key: "", Args: [][]byte{}},
		{Kind: "ping"},
	} {
		var e wire.Encoder
		EncodeOp(&e, op)
		want := DecodeOp(wire.NewDecoder(e.B))
		src := Op{Kind: op.Kind, Key: op.Key}
		for _, a := range op.Args {
			src.Args = append(src.Args, append(make([]byte, 0, len(a)+8), a...)) // spare capacity, as a reader's buffers have
		}
		if op.Args != nil && src.Args == nil {
			src.Args = [][]byte{}
		}
		got := CopyOp(src)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("CopyOp(%v) = %#v, DecodeOp gives %#v", op, got, want)
		}
		for i := range got.Args {
			if cap(got.Args[i]) != len(got.Args[i]) {
				t.Fatalf("%s arg %d: capacity %d beyond its length %d", op.Kind, i, cap(got.Args[i]), len(got.Args[i]))
			}
			_ = append(got.Args[i], '!')
		}
		for i := range src.Args {
			for j := range src.Args[i] {
				src.Args[i][j] ^= 0xff // the copy owns its memory
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the copy changed with its source or with an append: %#v", op.Kind, got)
		}
	}
}
