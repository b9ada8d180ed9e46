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
	}
	return &Result{Value: &Result_Err{Err: fmt.Sprintf("ERR internal error: result type %d", r.Type)}}
}

// ToResult converts a result message to a service result. A message without
// a value is an error: every server sets one.
func ToResult(m *Result) (service.Result, error) {
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
