package service

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/wire"
)

func op(kind, key string, args ...string) Op {
	o := Op{Kind: kind, Key: key}
	for _, a := range args {
		o.Args = append(o.Args, []byte(a))
	}
	return o
}

func TestKVSemantics(t *testing.T) {
	s := KV{}.NewState()
	steps := []struct {
		op   Op
		want Result
	}{
		{op("get", "a"), Nil()},
		{op("exists", "a"), Int(0)},
		{op("set", "a", "1", "xx"), Nil()},
		{op("set", "a", "1", "nx"), OK()},
		{op("set", "a", "2", "nx"), Nil()},
		{op("get", "a"), Bytes([]byte("1"))},
		{op("set", "a", "3", "xx"), OK()},
		{op("incr", "a", "4"), Int(7)},
		{op("append", "a", "x"), Int(2)},
		{op("incr", "a", "1"), Errorf("value is not an integer or out of range")},
		{op("cas", "a", "nope", "z"), Int(0)},
		{op("cas", "a", "7x", "z"), Int(1)},
		{op("get", "a"), Bytes([]byte("z"))},
		{op("del", "a"), Int(1)},
		{op("del", "a"), Int(0)},
		{op("incr", "n", "-5"), Int(-5)},
		{op("set", "big", "9223372036854775807"), OK()},
		{op("incr", "big", "1"), Errorf("increment or decrement would overflow")},
		{op("get", "a", "extra"), Errorf("wrong number of arguments for 'get' command")},
		{op("frob", "a"), Errorf(`unknown kv operation "frob"`)},
	}
	for i, st := range steps {
		if got := s.Apply(st.op); !got.Equal(st.want) {
			t.Fatalf("step %d %v: got %v, want %v", i, st.op, got, st.want)
		}
	}
}

func TestKVReadClassification(t *testing.T) {
	for kind, read := range map[string]bool{"get": true, "exists": true, "set": false, "del": false, "incr": false, "append": false, "cas": false} {
		if (KV{}).IsRead(Op{Kind: kind}) != read {
			t.Errorf("IsRead(%s) = %v", kind, !read)
		}
	}
}

func TestKVValueLimit(t *testing.T) {
	big := make([]byte, MaxValueSize+1)
	err := (KV{}).Validate(Op{Kind: "set", Key: "k", Args: [][]byte{big}})
	if err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("oversized value: %v", err)
	}
}

func TestSnapshotRestoreIsDeterministic(t *testing.T) {
	a, b := KV{}.NewState(), KV{}.NewState()
	for _, k := range []string{"x", "b", "a", "q"} {
		a.Apply(op("set", k, "v"+k))
	}
	for _, k := range []string{"q", "a", "x", "b"} {
		b.Apply(op("set", k, "v"+k))
	}
	if string(a.Snapshot()) != string(b.Snapshot()) {
		t.Fatal("equal states give different snapshots")
	}
	c := KV{}.NewState()
	if err := c.Restore(a.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if got := c.Apply(op("get", "q")); !got.Equal(Bytes([]byte("vq"))) {
		t.Fatalf("restored state: %v", got)
	}
	if err := c.Restore([]byte{1, 5, 1}); err == nil {
		t.Fatal("truncated snapshot accepted")
	}
	if err := c.Restore([]byte{9}); err == nil {
		t.Fatal("unknown snapshot version accepted")
	}

	ctr := Counter{}.NewState()
	ctr.Apply(op("add", "", "5"))
	ctr.Apply(op("add", "", "-2"))
	if got := ctr.Apply(op("read", "")); !got.Equal(Int(3)) {
		t.Fatalf("counter: %v", got)
	}
	ctr2 := Counter{}.NewState()
	if err := ctr2.Restore(ctr.Snapshot()); err != nil || !ctr2.Apply(op("read", "")).Equal(Int(3)) {
		t.Fatalf("counter restore: %v", err)
	}
}

func TestOpAndResultCodec(t *testing.T) {
	o := op("set", "key", "value", "nx")
	b := MarshalOp(o)
	got, err := UnmarshalOp(b)
	if err != nil || got.String() != o.String() {
		t.Fatalf("round trip: %v %v", got, err)
	}
	if _, err := UnmarshalOp(b[:len(b)-1]); err == nil {
		t.Fatal("truncated op accepted")
	}
	for _, r := range []Result{Nil(), OK(), Bytes([]byte("x")), Bytes([]byte{}), Int(-9), Errorf("boom"),
		Array(), BytesArray([]byte("a"), []byte{}), Array(Bytes([]byte("0")), Array(Int(1), Nil(), Errorf("WRONGTYPE x")))} {
		var e wire.Encoder
		EncodeResult(&e, r)
		d := wire.NewDecoder(e.B)
		if got := DecodeResult(d); !got.Equal(r) || d.Done() != nil {
			t.Fatalf("result %v round-tripped to %v", r, got)
		}
	}
}

func TestArrayResults(t *testing.T) {
	a := Array(Int(1), BytesArray([]byte("x")))
	if a.Equal(Array(Int(1), BytesArray([]byte("y")))) || a.Equal(Array(Int(1))) || !a.Equal(Array(Int(1), BytesArray([]byte("x")))) {
		t.Fatal("Equal does not compare array elements")
	}
	if got := a.String(); got != `[(integer) 1 ["x"]]` {
		t.Fatalf("String: %s", got)
	}
	// Arrays nested deeper than MaxArrayDepth are refused on decoding
	// (written by hand: EncodeResult no longer writes them, see
	// TestEncodeResultTooDeep).
	var e wire.Encoder
	for range MaxArrayDepth + 1 {
		e.Byte(byte(ResultArray))
		e.Uvarint(1)
	}
	e.Byte(byte(ResultInt))
	e.Varint(0)
	d := wire.NewDecoder(e.B)
	DecodeResult(d)
	if d.Done() == nil {
		t.Fatal("an array nested too deep was decoded")
	}
}

func TestGuardFailure(t *testing.T) {
	if !IsGuardFailure(GuardFailure("version changed")) || IsGuardFailure(Errorf("ERR x")) || IsGuardFailure(OK()) {
		t.Fatal("IsGuardFailure misclassifies")
	}
}

func FuzzUnmarshalOp(f *testing.F) {
	f.Add(MarshalOp(op("set", "k", "v")))
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := UnmarshalOp(b)
		if err != nil {
			return
		}
		o2, err := UnmarshalOp(MarshalOp(o))
		if err != nil || o2.String() != o.String() {
			t.Fatalf("round trip: %v vs %v (%v)", o, o2, err)
		}
	})
}
