package service

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/synod-dev/synod/wire"
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

// tally is a user's type for the nested state over a service other than
// the KV: "add K N" adds N to K's tally (answers the tally), "get K"
// reads it. It declares its conflicts and has no Clone, Merkle tree or
// environment of its own.
type tally struct{ nondet bool }

func (tally) Name() string { return "test-tally" }
func (tally) Validate(op Op) error {
	if (op.Kind == "add" && len(op.Args) == 1) || (op.Kind == "get" && len(op.Args) == 0) {
		return nil
	}
	return errors.New("tally: add K N or get K")
}
func (tally) IsRead(op Op) bool         { return op.Kind == "get" }
func (tally) ConflictKeys(op Op) []Lock { return []Lock{{Key: op.Key, Write: op.Kind == "add"}} }
func (t tally) Nondeterministic() bool  { return t.nondet }
func (tally) NewState() State           { return &tallyState{m: map[string]int64{}} }

type tallyState struct{ m map[string]int64 }

func (s *tallyState) Apply(op Op) Result {
	if op.Kind == "add" {
		n, _ := strconv.ParseInt(string(op.Args[0]), 10, 64)
		s.m[op.Key] += n
	}
	return Int(s.m[op.Key])
}
func (s *tallyState) Snapshot() []byte {
	var e wire.Encoder
	ks := slices.Sorted(maps.Keys(s.m))
	e.Uvarint(uint64(len(ks)))
	for _, k := range ks {
		e.String(k)
		e.Varint(s.m[k])
	}
	return e.B
}
func (s *tallyState) Restore(b []byte) error {
	d := wire.NewDecoder(b)
	m := map[string]int64{}
	for i, n := 0, d.Count(1<<20, 2); i < n && d.Err() == nil; i++ {
		m[d.String()] = d.Varint()
	}
	s.m = m
	return d.Done()
}

// forward is a program over tally: "add K N" calls "add K N" at the callee
// and then adds the callee's answer to K here.
type forward struct{}

func (forward) Name() string                            { return "test-forward" }
func (forward) Nested(op Op) bool                       { return op.Kind == "add" }
func (forward) Encode(op Op) []byte                     { return EncodeNestedOp(op) }
func (forward) Decode(key string, b []byte) (Op, error) { return DecodeNestedOp(key, b) }
func (forward) Keys(key string) []string                { return []string{key} }
func (forward) Begin(op Op, read func(Op) Result) (Op, [][]byte) {
	return op, [][]byte{[]byte(read(Op{Kind: "get", Key: op.Key}).String())}
}
func (forward) Resume(key string, _ [][]byte, ans Result, apply func(Op) Result) Result {
	return apply(Op{Kind: "add", Key: key, Args: [][]byte{[]byte(strconv.FormatInt(ans.Int, 10))}})
}

// The nested state over a service other than the KV (issue 31, "any
// service"): the service's operations, reads and conflict keys are its
// own; a suspended request is hashed, snapshotted and cloned with the
// service's state (by snapshot: tally has no Clone), and a clone is
// independent of the state.
func TestNestedStateOverAnyService(t *testing.T) {
	svc := NestedKV{}.WithProgram(forward{}).WithService(tally{})
	if svc.Validate(Op{Kind: "set", Key: "k", Args: [][]byte{nil}}) == nil || svc.Validate(Op{Kind: "add", Key: "k", Args: [][]byte{[]byte("2")}}) != nil {
		t.Fatal("Validate is not the inner service's")
	}
	if !svc.IsRead(Op{Kind: "get", Key: "k"}) || svc.IsRead(Op{Kind: "add", Key: "k"}) {
		t.Fatal("IsRead is not the inner service's")
	}
	if ls := svc.ConflictKeys(Op{Kind: "get", Key: "k"}); len(ls) != 1 || ls[0].Key != "k" || ls[0].Write {
		t.Fatalf("conflict keys of get: %+v", ls)
	}
	s := svc.NewState().(*NestedState)
	if r := s.Apply(Op{Kind: "add", Key: "k", Args: [][]byte{[]byte("5")}}); r.Int != 5 {
		t.Fatalf("add answered %v", r)
	}
	h0 := s.StateHash()
	add := Op{Kind: "add", Key: "k", Args: [][]byte{[]byte("2")}}
	if r := s.Apply(Op{Kind: NestedBegin, Key: "k", Args: [][]byte{forward{}.Encode(add), []byte("id1"), nil}}); !IsNestedPending(r) {
		t.Fatalf("begin answered %v", r)
	}
	if c := s.Cont("id1"); c == nil || c.Call.Kind != "add" || string(c.Locals[0]) != "(integer) 5" {
		t.Fatalf("suspended %+v", c)
	}
	if s.StateHash() == h0 {
		t.Fatal("the hash does not cover the suspended request")
	}
	if s.MerkleTree() == nil {
		t.Fatal("no Merkle tree for a state without one")
	}
	r := svc.NewState().(*NestedState)
	if err := r.Restore(s.Snapshot()); err != nil || r.StateHash() != s.StateHash() || r.Cont("id1") == nil {
		t.Fatalf("restore: %v", err)
	}
	cl := s.Clone().(*NestedState)
	if res := s.Apply(Op{Kind: NestedResume, Key: "k", Args: [][]byte{[]byte("id1"), EncodeResultBytes(Int(40))}}); res.Int != 45 {
		t.Fatalf("resume answered %v, want 45 (5 + the callee's 40)", res)
	}
	if got := cl.Apply(Op{Kind: "get", Key: "k"}); got.Int != 5 || cl.Cont("id1") == nil {
		t.Fatalf("the clone changed with the state: k=%v", got)
	}
	if res := cl.Apply(Op{Kind: NestedResume, Key: "k", Args: [][]byte{[]byte("id1"), EncodeResultBytes(Int(40))}}); res.Int != 45 || cl.StateHash() != s.StateHash() {
		t.Fatalf("the clone resumed to %v, hashes equal %v", res, cl.StateHash() == s.StateHash())
	}
	if r.StateHash() == s.StateHash() {
		t.Fatal("the hash does not cover the inner state's change")
	}
}

// Adam's refusals: a service that declares no conflicts, or a
// nondeterministic one, cannot be the state under a nested program; kv
// and a deterministic declaring service can.
func TestCheckNestedService(t *testing.T) {
	for _, c := range []struct {
		svc  Service
		want string
	}{
		{KV{}, ""}, {ShardedKV{}, ""}, {tally{}, ""},
		{Counter{}, "declares no conflicts"},
		{tally{nondet: true}, "nondeterministic"},
	} {
		err := CheckNestedService(c.svc)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.svc.Name(), err, c.want)
		}
	}
}
