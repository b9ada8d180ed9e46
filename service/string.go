package service

import (
	"fmt"

	"github.com/synod-dev/synod/wire"
)

func init() { Register(String{}) }

// String is the String Concatenation Service of seed 000 (chapter 4.4): one
// string; read returns it, append s (the seed's Concatenate) appends s and
// returns the new value. Appends do not commute (unless one operand is empty),
// which is why the seed uses it beside Counter. The key is ignored: a String
// namespace is one object.
//
//	read         -> bytes: the current value ("" initially)
//	append s     -> bytes: the value after appending s
//
// The value is bounded by MaxValueSize: an append that would exceed it is
// refused with an error and leaves the state unchanged.
type String struct{}

// Name implements Service.
func (String) Name() string { return "string" }

// Validate implements Service.
func (String) Validate(op Op) error {
	switch op.Kind {
	case "read":
		return arity(op, 0)
	case "append":
		if err := arity(op, 1); err != nil {
			return err
		}
		if len(op.Args[0]) > MaxValueSize {
			return fmt.Errorf("value too large (%d bytes, limit %d)", len(op.Args[0]), MaxValueSize)
		}
		return nil
	}
	return fmt.Errorf("unknown string operation %q (want read or append)", op.Kind)
}

// IsRead implements Service.
func (String) IsRead(op Op) bool { return op.Kind == "read" }

// NewState implements Service.
func (String) NewState() State { return &StringState{} }

// StringState is a String replica's state.
type StringState struct{ V []byte }

// Apply implements State.
func (s *StringState) Apply(op Op) Result {
	if err := (String{}).Validate(op); err != nil {
		return Errorf("%v", err)
	}
	if op.Kind == "append" {
		if len(s.V)+len(op.Args[0]) > MaxValueSize {
			return Errorf("string would exceed %d bytes", MaxValueSize)
		}
		// Never share the backing array with a previous result.
		v := make([]byte, len(s.V)+len(op.Args[0]))
		copy(v, s.V)
		copy(v[len(s.V):], op.Args[0])
		s.V = v
	}
	return Bytes(append([]byte{}, s.V...))
}

// Snapshot implements State.
func (s *StringState) Snapshot() []byte {
	e := wire.Encoder{B: []byte{codecVersion}}
	e.Bytes(s.V)
	return e.B
}

// Restore implements State.
func (s *StringState) Restore(snap []byte) error {
	d := wire.NewDecoder(snap)
	if v := d.Byte(); v != codecVersion {
		return fmt.Errorf("string: snapshot version %d, want %d", v, codecVersion)
	}
	v := d.BytesCopy()
	if err := d.Done(); err != nil {
		return fmt.Errorf("string: bad snapshot: %w", err)
	}
	s.V = v
	return nil
}
