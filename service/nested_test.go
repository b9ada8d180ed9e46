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

// receipt is a program other than Trail: SET k v calls INCR sold:<v> and
// stores v in k and "v #n" in receipt:k.
type receipt struct{}

func (receipt) Name() string                            { return "test-receipt" }
func (receipt) Nested(op Op) bool                       { return op.Kind == "set" && len(op.Args) == 1 }
func (receipt) Encode(op Op) []byte                     { return EncodeNestedOp(op) }
func (receipt) Decode(key string, b []byte) (Op, error) { return DecodeNestedOp(key, b) }
func (receipt) Keys(key string) []string                { return []string{key, "receipt:" + key} }
func (receipt) Begin(op Op, _ func(Op) Result) (Op, [][]byte) {
	return Op{Kind: "incr", Key: "sold:" + string(op.Args[0])}, [][]byte{op.Args[0]}
}
func (receipt) Resume(key string, locals [][]byte, ans Result, apply func(Op) Result) Result {
	apply(Op{Kind: "set", Key: key, Args: [][]byte{locals[0]}})
	apply(Op{Kind: "set", Key: "receipt:" + key, Args: [][]byte{[]byte(string(locals[0]) + " #" + ans.String())}})
	return OK()
}

// A registered program runs its own steps; its steps lock its keys.
func TestNestedProgram(t *testing.T) {
	svc := NestedKV{}.WithProgram(receipt{})
	s := svc.NewState()
	op := Op{Kind: "set", Key: "o1", Args: [][]byte{[]byte("apples")}}
	begin := Op{Kind: NestedBegin, Key: "o1", Args: [][]byte{receipt{}.Encode(op), []byte("id1"), nil}}
	if r := s.Apply(begin); !IsNestedPending(r) {
		t.Fatalf("begin answered %v", r)
	}
	c := s.(*NestedState).Cont("id1")
	if c == nil || c.Call.Kind != "incr" || c.Call.Key != "sold:apples" {
		t.Fatalf("suspended %+v", c)
	}
	// A clone (a rollback's checkpoint) keeps the program.
	cl := s.(*NestedState).Clone()
	for _, st := range []State{s, cl} {
		if r := st.Apply(Op{Kind: NestedResume, Key: "o1", Args: [][]byte{[]byte("id1"), EncodeResultBytes(Int(3))}}); r.Type != ResultOK {
			t.Fatalf("resume answered %v", r)
		}
		if got := st.Apply(Op{Kind: "get", Key: "receipt:o1"}); string(got.Bytes) != "apples #(integer) 3" {
			t.Fatalf("receipt:o1 = %v", got)
		}
	}
	if ls := svc.ConflictKeys(begin); len(ls) != 2 || !ls[0].Write || ls[1].Key != "receipt:o1" {
		t.Fatalf("conflict keys %+v", ls)
	}
	if _, err := DecodeNestedOp("other", receipt{}.Encode(op)); err == nil {
		t.Fatal("DecodeNestedOp accepted a request under another key")
	}
}
