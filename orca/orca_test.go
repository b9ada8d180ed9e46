package orca

import (
	"slices"
	"strings"
	"testing"

	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// A type whose read changes its object is caught under CheckReads.
func TestReadThatWritesIsAnError(t *testing.T) {
	bad := &Type{Name: "bad",
		New:    func([][]byte) (Value, error) { return &IntObj{}, nil },
		Decode: func(d *wire.Decoder) Value { return &IntObj{V: d.Varint()} },
		Ops: map[string]Operation{"peek": {Arity: 0, Do: func(v Value, _ [][]byte) service.Result {
			v.(*IntObj).V++ // declared a read, writes
			return service.Int(v.(*IntObj).V)
		}}}}
	svc := &Service{Types: NewTypes(bad, IntType), CheckReads: true}
	st := svc.NewState()
	st.Apply(New("bad", "o"))
	if r := st.Apply(Call("bad", "o", "peek")); !r.IsErr() || !strings.Contains(r.Err, ErrReadWrote) {
		t.Fatalf("a read that writes answered %v", r)
	}
	// The built-in types' reads pass the check.
	st.Apply(New("int", "i", Int(3)))
	if r := st.Apply(Call("int", "i", "value")); r.IsErr() || r.Int != 3 {
		t.Fatalf("int.value = %v", r)
	}
}

// Guards: get blocks on an empty open queue, not on a closed one; an
// operation on a missing object waits when guarded.
func TestGuards(t *testing.T) {
	svc := &Service{Types: Builtin, CheckReads: true}
	st := svc.NewState().(*State)
	if st.Ready(Call("queue", "q", "get")) {
		t.Fatal("get on a missing queue is ready")
	}
	st.Apply(New("queue", "q"))
	if st.Ready(Call("queue", "q", "get")) {
		t.Fatal("get on an empty queue is ready")
	}
	st.Apply(Call("queue", "q", "add", []byte("a")))
	if !st.Ready(Call("queue", "q", "get")) {
		t.Fatal("get on a non-empty queue is not ready")
	}
	if r := st.Apply(Call("queue", "q", "get")); string(r.Bytes) != "a" {
		t.Fatalf("get = %v", r)
	}
	st.Apply(Call("queue", "q", "close"))
	if !st.Ready(Call("queue", "q", "get")) || st.Apply(Call("queue", "q", "get")).Type != service.ResultNil {
		t.Fatal("get on a closed empty queue must answer nil")
	}
	if !svc.IsRead(Call("rows", "r", "get", Int(0))) || svc.IsRead(Call("queue", "q", "get")) {
		t.Fatal("read/write declarations")
	}
}

// Snapshots round-trip every built-in type.
func TestSnapshotRoundTrip(t *testing.T) {
	svc := &Service{Types: Builtin}
	st := svc.NewState()
	st.Apply(New("int", "i", Int(7)))
	st.Apply(New("queue", "q"))
	st.Apply(Call("queue", "q", "add", []byte("j")))
	st.Apply(New("rows", "r"))
	st.Apply(Call("rows", "r", "put", Int(2), []byte{1, 2}))
	st.Apply(New("array", "a", Int(4)))
	st.Apply(Call("array", "a", "set", Int(1), []byte{9}))
	snap := st.Snapshot()
	st2 := svc.NewState()
	if err := st2.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if string(st2.Snapshot()) != string(snap) {
		t.Fatal("snapshot does not round-trip")
	}
}

// RegisterType adds a type every orca namespace serves, and refuses one it
// could not serve.
func TestRegisterType(t *testing.T) {
	flag := &Type{Name: "testflag",
		New:    func([][]byte) (Value, error) { return &IntObj{}, nil },
		Decode: func(d *wire.Decoder) Value { return &IntObj{V: d.Varint()} },
		Ops: map[string]Operation{"raise": {Write: true, Do: func(v Value, _ [][]byte) service.Result {
			v.(*IntObj).V = 1
			return service.OK()
		}}}}
	if err := RegisterType(flag); err != nil {
		t.Fatal(err)
	}
	defer delete(Builtin, flag.Name)
	svc, err := service.Lookup(ServiceName)
	if err != nil {
		t.Fatal(err)
	}
	st := svc.NewState()
	if r := st.Apply(New("testflag", "f")); r.IsErr() {
		t.Fatalf("new testflag: %v", r)
	}
	if r := st.Apply(Call("testflag", "f", "raise")); r.Type != service.ResultOK {
		t.Fatalf("testflag.raise: %v", r)
	}
	for _, bad := range []*Type{
		flag, // twice
		{Name: "int", New: flag.New, Decode: flag.Decode, Ops: flag.Ops}, // a built-in name
		{Name: "a.b", New: flag.New, Decode: flag.Decode, Ops: flag.Ops},
		{Name: "nodecode", New: flag.New, Ops: flag.Ops},
		{Name: "nodo", New: flag.New, Decode: flag.Decode, Ops: map[string]Operation{"x": {}}},
	} {
		if err := RegisterType(bad); err == nil {
			t.Errorf("RegisterType(%q) accepted", bad.Name)
		}
	}
	if !slices.Contains(TypeNames(), "testflag") {
		t.Errorf("TypeNames %v", TypeNames())
	}
}
