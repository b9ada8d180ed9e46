package synodpb

import (
	"fmt"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// FuzzRequest decodes a gRPC Request message and converts each of its
// parts as the server does. Every conversion that succeeds is undone by
// its inverse: ToOp(FromOp(op)) == op, ToTxnStep(FromTxnStep(s)) == s,
// ToReadMode(FromReadMode(m)) == m, ToOptions(FromOptions(o)) == o; a step
// other than BEGIN names its transaction; the message re-marshals to one
// that decodes equal.
func FuzzRequest(f *testing.F) {
	for _, in := range []*Request{
		{Namespace: "kv", ClientId: 3, Seq: 4, Op: &Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}, Read: ReadMode_READ_MODE_LEASE},
		{Namespace: "kv", Ops: []*Op{{Kind: "incr", Key: "a"}, {Kind: "get", Key: "b"}}, OpId: "x", Prev: []string{"y", "z"}, Strict: true},
		{ClientId: 3, Seq: 5, Txn: &TxnStep{TxnClient: 3, TxnSeq: 4, Action: TxnStep_COMMIT}, Options: map[string]*OptionValues{"prev": {Values: []string{"a"}}, "flag": {}}},
		{ClientId: 3, Seq: 4, Txn: &TxnStep{Action: TxnStep_BEGIN}, Fanout: true},
		{Txn: &TxnStep{Action: 99}, Read: 77},
	} {
		b, err := proto.Marshal(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x52, 0xff, 0xff, 0xff, 0xff, 0x0f}) // ops claiming 4 GB
	f.Fuzz(func(t *testing.T, data []byte) {
		var in Request
		if proto.Unmarshal(data, &in) != nil {
			return
		}
		ops := in.GetOps()
		if in.GetOp() != nil {
			ops = append(ops, in.GetOp())
		}
		for _, m := range ops {
			if op := ToOp(m); !sameOp(ToOp(FromOp(op)), op) {
				t.Fatalf("op %v converts back to %v", op, ToOp(FromOp(op)))
			}
		}
		id := automaton.RequestID{Client: in.GetClientId(), Seq: in.GetSeq()}
		if s, err := ToTxnStep(in.GetTxn(), id); err == nil && s != nil {
			if s.Action != automaton.TxnBegin && (s.Txn.Client == 0 || s.Txn.Seq == 0) {
				t.Fatalf("%v step names no transaction: %+v", s.Action, s)
			}
			if again, err := ToTxnStep(FromTxnStep(s), id); err != nil || *again != *s {
				t.Fatalf("txn step %+v converts back to %+v (%v)", s, again, err)
			}
		}
		if m, err := ToReadMode(in.GetRead()); err == nil {
			if again, err := ToReadMode(FromReadMode(m)); err != nil || again != m {
				t.Fatalf("read mode %v converts back to %v (%v)", m, again, err)
			}
		}
		if o := ToOptions(in.GetOptions()); !reflect.DeepEqual(ToOptions(FromOptions(o)), o) {
			t.Fatalf("options %q convert back to %q", o, ToOptions(FromOptions(o)))
		}
		b, err := proto.Marshal(&in)
		if err != nil {
			t.Fatalf("decoded request does not marshal: %v", err)
		}
		var again Request
		if err := proto.Unmarshal(b, &again); err != nil || !proto.Equal(&in, &again) {
			t.Fatalf("request %v re-marshals to %v (%v)", &in, &again, err)
		}
	})
}

// sameOp compares operations (a nil argument list equals an empty one).
func sameOp(a, b service.Op) bool {
	return a.Kind == b.Kind && a.Key == b.Key && fmt.Sprintf("%q", a.Args) == fmt.Sprintf("%q", b.Args)
}

// FuzzResult decodes a Result message and converts it: a result that
// converts is a valid service result no deeper than service.MaxArrayDepth,
// and FromResult then ToResult gives it back.
func FuzzResult(f *testing.F) {
	for _, r := range []service.Result{service.OK(), service.Nil(), service.Int(-5), service.Bytes([]byte("v")), service.Bytes(nil),
		{Type: service.ResultErr, Err: "ERR no"}, service.Array(service.Int(1), service.Array(service.Bytes([]byte("x"))), service.Nil())} {
		b, err := proto.Marshal(FromResult(r))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var m Result
		if proto.Unmarshal(data, &m) != nil {
			return
		}
		r, err := ToResult(&m)
		if err != nil {
			return
		}
		if d := depth(r); d > service.MaxArrayDepth+1 {
			t.Fatalf("result nested %d deep", d)
		}
		again, err := ToResult(FromResult(r))
		if err != nil || again.String() != r.String() || !reflect.DeepEqual(again, r) {
			t.Fatalf("result %v converts back to %v (%v)", r, again, err)
		}
	})
}

func depth(r service.Result) int {
	d := 0
	for _, e := range r.Elems {
		d = max(d, depth(e))
	}
	return d + 1
}
