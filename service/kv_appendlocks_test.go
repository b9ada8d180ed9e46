package service

import (
	"reflect"
	"testing"
)

// TestKVAppendLocks holds AppendLocks to Locks (the same locks, after
// what dst held, the duplicate check looking only at the new ones) and
// shows a single-key operation's lock takes no allocation when dst has
// room (protocol/esds's opLocks and readLocks; session 50).
func TestKVAppendLocks(t *testing.T) {
	ops := []Op{
		{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}},
		{Kind: "get", Key: "k"},
		{Kind: "rename", Key: "a", Args: [][]byte{[]byte("b")}},
		{Kind: "rename", Key: "a", Args: [][]byte{[]byte("a")}},
		{Kind: "sinter", Key: "s1", Args: [][]byte{[]byte("s2"), []byte("s1"), []byte("s3")}},
		{Kind: "flushdb"},
		{Kind: "sort", Key: "l", Args: [][]byte{[]byte("by"), []byte("w_*")}},
	}
	for _, op := range ops {
		want := KV{}.Locks(op)
		if got := (KV{}).AppendLocks(nil, op); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: AppendLocks(nil) = %v, Locks = %v", op.Kind, got, want)
		}
		// dst already holds locks on keys the operation names too (RENAME's
		// second, SINTER's): they are kept, and the new ones are the same
		// as Locks's (not deduplicated against dst's).
		pre := []Lock{{Key: "b", Write: true}, {Key: "s2"}}
		got := (KV{}).AppendLocks(pre, op)
		if !reflect.DeepEqual(got[:2], pre) || !reflect.DeepEqual(got[2:], want) {
			t.Errorf("%s: AppendLocks(%v) = %v, want %v then %v", op.Kind, pre, got, pre, want)
		}
	}
	var buf [1]Lock
	set := ops[0]
	if n := testing.AllocsPerRun(100, func() { _ = (KV{}).AppendLocks(buf[:0], set) }); n != 0 {
		t.Errorf("AppendLocks of a SET into a buffer with room: %v allocations, want 0", n)
	}
}
