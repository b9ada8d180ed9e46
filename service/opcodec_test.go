package service

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"unsafe"

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

// TestOpDecoder: a run decoded by one OpDecoder gives, operation by
// operation, what DecodeOp gives (kinds, keys repeated and not, empty and
// missing arguments, a run longer than one shared array); an append to one
// operation's argument list does not change the next operation's (fails
// when the lists are carved from the shared array without capping them);
// a repeated key is the previous key's string; and a run of one key's
// SETs takes one allocation per operation, not DecodeOp's three.
func TestOpDecoder(t *testing.T) {
	long := bytes.Repeat([]byte("v"), 300)
	var ops []Op
	for i := range 3000 {
		switch i % 7 {
		case 0, 1, 2:
			ops = append(ops, Op{Kind: "set", Key: "key:__rand_int__", Args: [][]byte{[]byte("value")}})
		case 3:
			ops = append(ops, Op{Kind: "zrangestore", Key: strings.Repeat("K", 200), Args: [][]byte{long, nil, {}, []byte("x")}})
		case 4:
			ops = append(ops, Op{Kind: "get", Key: "", Args: [][]byte{}})
		case 5:
			ops = append(ops, Op{Kind: "ping"})
		case 6:
			ops = append(ops, Op{Kind: "mset", Key: "a", Args: [][]byte{[]byte("1"), []byte("b"), []byte("2")}})
		}
	}
	var e wire.Encoder
	for _, op := range ops {
		EncodeOp(&e, op)
	}
	d := wire.NewDecoder(e.B)
	var od OpDecoder
	got := make([]Op, len(ops))
	for i := range ops {
		got[i] = od.Decode(d, len(ops)-1-i)
	}
	if err := d.Done(); err != nil {
		t.Fatal(err)
	}
	for i, op := range ops {
		var e1 wire.Encoder
		EncodeOp(&e1, op)
		if want := DecodeOp(wire.NewDecoder(e1.B)); !reflect.DeepEqual(got[i], want) {
			t.Fatalf("op %d: OpDecoder gives %#v, DecodeOp %#v", i, got[i], want)
		}
		if cap(got[i].Args) != len(got[i].Args) {
			t.Fatalf("op %d: argument list capacity %d beyond its length %d", i, cap(got[i].Args), len(got[i].Args))
		}
		if i > 0 && op.Key == ops[i-1].Key && op.Key != "" && unsafe.StringData(got[i].Key) != unsafe.StringData(got[i-1].Key) {
			t.Fatalf("op %d: repeated key %q not shared", i, op.Key)
		}
	}
	for i := range got {
		got[i].Args = append(got[i].Args, []byte("extra"))
	}
	for i, op := range ops {
		if len(op.Args) > 0 && !bytes.Equal(got[i].Args[0], op.Args[0]) {
			t.Fatalf("op %d: argument 0 = %q after the previous op's append, want %q", i, got[i].Args[0], op.Args[0])
		}
	}

	var run wire.Encoder
	const n = 64
	for range n {
		EncodeOp(&run, Op{Kind: "set", Key: "key:__rand_int__", Args: [][]byte{bytes.Repeat([]byte("x"), 100)}})
	}
	allocs := testing.AllocsPerRun(20, func() {
		d := wire.NewDecoder(run.B)
		var od OpDecoder
		for i := range n {
			od.Decode(d, n-1-i)
		}
	})
	// One value buffer per SET; one key string, one argument-list array
	// and the decoder for the run.
	if allocs > n+3 {
		t.Fatalf("%v allocations for a run of %d SETs of one key, want at most %d", allocs, n, n+3)
	}
}
