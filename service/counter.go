package service

import (
	"fmt"
	"strconv"

	"github.com/synod-dev/synod/wire"
)

// Counter is the integer counter of seed 000 (chapter 4.4): read returns the
// value, add n adds n and returns the new value. The key is ignored: a Counter
// namespace is one object.
type Counter struct{}

// Name implements Service.
func (Counter) Name() string { return "counter" }

// Validate implements Service.
func (Counter) Validate(op Op) error {
	switch op.Kind {
	case "read":
		return arity(op, 0)
	case "add":
		if err := arity(op, 1); err != nil {
			return err
		}
		if _, err := strconv.ParseInt(string(op.Args[0]), 10, 64); err != nil {
			return fmt.Errorf("value is not an integer or out of range")
		}
		return nil
	}
	return fmt.Errorf("unknown counter operation %q", op.Kind)
}

// IsRead implements Service.
func (Counter) IsRead(op Op) bool { return op.Kind == "read" }

// NewState implements Service.
func (Counter) NewState() State { return &CounterState{} }

// CounterState is a Counter replica's state.
type CounterState struct{ V int64 }

// Apply implements State.
func (s *CounterState) Apply(op Op) Result {
	if err := (Counter{}).Validate(op); err != nil {
		return Errorf("%v", err)
	}
	if op.Kind == "add" {
		d, _ := strconv.ParseInt(string(op.Args[0]), 10, 64)
		s.V += d
	}
	return Int(s.V)
}

// Snapshot implements State.
func (s *CounterState) Snapshot() []byte {
	e := wire.Encoder{B: []byte{codecVersion}}
	e.Varint(s.V)
	return e.B
}

// Restore implements State.
func (s *CounterState) Restore(snap []byte) error {
	d := wire.NewDecoder(snap)
	if v := d.Byte(); v != codecVersion {
		return fmt.Errorf("counter: snapshot version %d, want %d", v, codecVersion)
	}
	v := d.Varint()
	if err := d.Done(); err != nil {
		return fmt.Errorf("counter: bad snapshot: %w", err)
	}
	s.V = v
	return nil
}
