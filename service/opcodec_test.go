package service

import (
	"bytes"
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
