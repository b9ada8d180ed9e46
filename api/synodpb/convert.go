package synodpb

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// FromResult converts a service result to its message.
func FromResult(r service.Result) *Result {
	switch r.Type {
	case service.ResultNil:
		return &Result{Value: &Result_Nil{Nil: &Empty{}}}
	case service.ResultOK:
		return &Result{Value: &Result_Ok{Ok: &Empty{}}}
	case service.ResultBytes:
		b := r.Bytes
		if b == nil {
			b = []byte{}
		}
		return &Result{Value: &Result_Bytes{Bytes: b}}
	case service.ResultInt:
		return &Result{Value: &Result_Int{Int: r.Int}}
	case service.ResultErr:
		return &Result{Value: &Result_Err{Err: r.Err}}
	case service.ResultArray:
		a := &ResultArray{Elems: make([]*Result, len(r.Elems))}
		for i, e := range r.Elems {
			a.Elems[i] = FromResult(e)
		}
		return &Result{Value: &Result_Array{Array: a}}
	}
	return &Result{Value: &Result_Err{Err: fmt.Sprintf("ERR internal error: result type %d", r.Type)}}
}

// ToResult converts a result message to a service result. A message without
// a value is an error: every server sets one.
func ToResult(m *Result) (service.Result, error) { return toResult(m, 0) }

func toResult(m *Result, depth int) (service.Result, error) {
	switch v := m.GetValue().(type) {
	case *Result_Nil:
		return service.Nil(), nil
	case *Result_Ok:
		return service.OK(), nil
	case *Result_Bytes:
		b := v.Bytes
		if b == nil {
			b = []byte{}
		}
		return service.Bytes(b), nil
	case *Result_Int:
		return service.Int(v.Int), nil
	case *Result_Err:
		return service.Result{Type: service.ResultErr, Err: v.Err}, nil
	case *Result_Array:
		if depth >= service.MaxArrayDepth {
			return service.Result{}, fmt.Errorf("synodpb: array results nested deeper than %d", service.MaxArrayDepth)
		}
		var elems []service.Result
		if n := len(v.Array.GetElems()); n > 0 {
			elems = make([]service.Result, n)
		}
		for i, e := range v.Array.GetElems() {
			r, err := toResult(e, depth+1)
			if err != nil {
				return service.Result{}, err
			}
			elems[i] = r
		}
		return service.Array(elems...), nil
	}
	return service.Result{}, fmt.Errorf("synodpb: result without a value")
}

// FromReadMode converts a read mode to its enum value (the numbers agree).
func FromReadMode(m automaton.ReadMode) ReadMode { return ReadMode(m) }

// ToReadMode converts an enum value, refusing values this version does not know.
func ToReadMode(m ReadMode) (automaton.ReadMode, error) {
	if _, ok := ReadMode_name[int32(m)]; !ok {
		return 0, fmt.Errorf("unknown read mode %d", int32(m))
	}
	return automaton.ReadMode(m), nil
}

// FromOp converts a service operation to its message.
func FromOp(op service.Op) *Op { return &Op{Kind: op.Kind, Key: op.Key, Args: op.Args} }

// ToOp converts an operation message to a service operation.
func ToOp(m *Op) service.Op { return service.Op{Kind: m.GetKind(), Key: m.GetKey(), Args: m.GetArgs()} }

// FromOptions converts request options (automaton.Options.Ext) to the
// options map of a message; nil for none.
func FromOptions(ext map[string][]string) map[string]*OptionValues {
	if len(ext) == 0 {
		return nil
	}
	m := make(map[string]*OptionValues, len(ext))
	for k, v := range ext {
		m[k] = &OptionValues{Values: v}
	}
	return m
}

// ToOptions converts a message's options map to automaton.Options.Ext form;
// nil for none. An entry without values becomes an empty, non-nil list (a
// list option given with no values is set, not absent).
func ToOptions(m map[string]*OptionValues) map[string][]string {
	if len(m) == 0 {
		return nil
	}
	ext := make(map[string][]string, len(m))
	for k, v := range m {
		vals := v.GetValues()
		if vals == nil {
			vals = []string{}
		}
		ext[k] = vals
	}
	return ext
}

// FromOptionSpecs describes a protocol's request options.
func FromOptionSpecs(specs []automaton.OptionSpec) []*OptionSpec {
	var out []*OptionSpec
	for _, s := range specs {
		out = append(out, &OptionSpec{Name: s.Name, Type: s.Type.String(), Sticky: s.Sticky, Doc: s.Doc})
	}
	return out
}

// FromTxnStep converts a transaction step to its message; nil for none.
// The action numbers agree with automaton.TxnAction's.
func FromTxnStep(t *automaton.TxnStep) *TxnStep {
	if t == nil {
		return nil
	}
	return &TxnStep{TxnClient: t.Txn.Client, TxnSeq: t.Txn.Seq, Action: TxnStep_Action(t.Action)}
}

// ToTxnStep converts a step message of request id (its BEGIN names the
// transaction by id itself); nil for none. It refuses an action this
// version does not know and a step that names no transaction.
func ToTxnStep(m *TxnStep, id automaton.RequestID) (*automaton.TxnStep, error) {
	if m == nil {
		return nil, nil
	}
	a := automaton.TxnAction(m.GetAction())
	switch a {
	case automaton.TxnBegin:
		return &automaton.TxnStep{Txn: id, Action: a}, nil
	case automaton.TxnOp, automaton.TxnCommit, automaton.TxnAbort:
	default:
		return nil, fmt.Errorf("unknown transaction action %d", int32(m.GetAction()))
	}
	if m.GetTxnClient() == 0 || m.GetTxnSeq() == 0 {
		return nil, fmt.Errorf("a %v step must name its transaction (txn_client, txn_seq: the BEGIN request's client_id and seq)", a)
	}
	return &automaton.TxnStep{Txn: automaton.RequestID{Client: m.GetTxnClient(), Seq: m.GetTxnSeq()}, Action: a}, nil
}
