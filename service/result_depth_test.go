package service

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/synod-dev/synod/wire"
)

func nestedResult(depth int) Result {
	r := Result{Type: ResultInt, Int: 7}
	for i := 0; i < depth; i++ {
		r = Result{Type: ResultArray, Elems: []Result{r, {Type: ResultBytes, Bytes: []byte("x")}}}
	}
	return r
}

// TestEncodeResultTooDeep: a result nested deeper than MaxArrayDepth is
// written so that it decodes (as ErrResultTooDeep where the nesting goes too
// deep) instead of making the record that carries it undecodable; results
// within the bound round-trip unchanged.
func TestEncodeResultTooDeep(t *testing.T) {
	if !strings.Contains(ErrResultTooDeep, fmt.Sprint(MaxArrayDepth)) {
		t.Fatalf("%q does not name the bound %d", ErrResultTooDeep, MaxArrayDepth)
	}
	for depth := 0; depth <= MaxArrayDepth+3; depth++ {
		in := nestedResult(depth)
		var e wire.Encoder
		EncodeResult(&e, in)
		d := wire.NewDecoder(e.B)
		out := DecodeResult(d)
		if err := d.Done(); err != nil {
			t.Fatalf("depth %d: encoded result does not decode: %v", depth, err)
		}
		if depth <= MaxArrayDepth {
			if !reflect.DeepEqual(in, out) {
				t.Fatalf("depth %d: round trip changed the result", depth)
			}
			continue
		}
		r := out
		for i := 0; i < MaxArrayDepth; i++ {
			if r.Type != ResultArray {
				t.Fatalf("depth %d: level %d is %v, want an array", depth, i, r.Type)
			}
			r = r.Elems[0]
		}
		if r.Type != ResultErr || r.Err != ErrResultTooDeep {
			t.Fatalf("depth %d: the too-deep part decoded as %+v", depth, r)
		}
	}
}
