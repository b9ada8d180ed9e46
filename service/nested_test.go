package service

import (
	"bytes"
	"testing"
)

// A suspended request is part of the state: its hash, its snapshot, its
// clone; the resume finishes it with the answer.
func TestNestedStateSteps(t *testing.T) {
	s := NewNestedState()
	s.Apply(Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("old")}})
	h0 := s.StateHash()
	begin := Op{Kind: NestedBegin, Key: "k", Args: [][]byte{[]byte("new"), []byte("id1"), []byte("tag")}}
	if r := s.Apply(begin); !IsNestedPending(r) {
		t.Fatalf("begin answered %v", r)
	}
	c := s.Cont("id1")
	if c == nil || c.Step != 1 || c.Call.Kind != "append" || c.Call.Key != "trail:k" || string(c.Call.Args[0]) != "old;" {
		t.Fatalf("suspended request %+v", c)
	}
	if s.StateHash() == h0 {
		t.Fatal("the hash does not cover the suspended request")
	}
	r := NewNestedState()
	if err := r.Restore(s.Snapshot()); err != nil || r.StateHash() != s.StateHash() || r.Cont("id1") == nil {
		t.Fatalf("restore: %v", err)
	}
	cl := s.Clone().(*NestedState)
	var e = EncodeResultBytes(Int(4))
	if res := s.Apply(Op{Kind: NestedResume, Key: "k", Args: [][]byte{[]byte("id1"), e}}); res.Type != ResultOK {
		t.Fatalf("resume answered %v", res)
	}
	if got := s.Apply(Op{Kind: "get", Key: "k"}); string(got.Bytes) != "new" || s.Cont("id1") != nil {
		t.Fatalf("after resume: k=%v", got)
	}
	if got := s.Apply(Op{Kind: "get", Key: "trail-len:k"}); string(got.Bytes) != "4" {
		t.Fatalf("trail-len:k=%v", got)
	}
	if cl.Cont("id1") == nil || string(cl.Apply(Op{Kind: "get", Key: "k"}).Bytes) != "old" {
		t.Fatal("the clone (a rollback's checkpoint) changed with the state")
	}
}

// A failed nested call fails its request: the SET answers the callee's
// error and stores nothing (never OK with the call dropped).
func TestNestedResumeWithErrorAnswer(t *testing.T) {
	s := NewNestedState()
	s.Apply(Op{Kind: NestedBegin, Key: "k", Args: [][]byte{[]byte("new"), []byte("id1"), []byte("tag")}})
	e := EncodeResultBytes(Errorf("nested call: no namespace \"remote\" in this cluster"))
	res := s.Apply(Op{Kind: NestedResume, Key: "k", Args: [][]byte{[]byte("id1"), e}})
	if !res.IsErr() || !bytes.Contains([]byte(res.Err), []byte("no namespace")) {
		t.Fatalf("resume with an error answer answered %v", res)
	}
	if got := s.Apply(Op{Kind: "exists", Key: "k"}); got.Int != 0 || s.Cont("id1") != nil {
		t.Fatalf("after a failed call: exists k = %v, cont %v", got, s.Cont("id1"))
	}
}
