package service

import (
	"fmt"
	"strconv"

	"github.com/synod-dev/synod/wire"
)

// Counter is the integer counter of the ESDS thesis (chapter 4.4): read returns the
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

// CounterState is a Counter replica's state. Its Version counts the adds
// applied; its Merkle tree is a single leaf holding one entry (key "", the
// value as a varint).
type CounterState struct {
	V       int64
	version uint64
}

// Apply implements State.
func (s *CounterState) Apply(op Op) Result {
	if err := (Counter{}).Validate(op); err != nil {
		return Errorf("%v", err)
	}
	if op.Kind == "add" {
		d, _ := strconv.ParseInt(string(op.Args[0]), 10, 64)
		s.V += d
		s.version++
	}
	return Int(s.V)
}

// Snapshot implements State (format 2: version, then the value).
func (s *CounterState) Snapshot() []byte {
	e := wire.Encoder{B: []byte{snapVersion}}
	e.Uvarint(s.version)
	e.Varint(s.V)
	return e.B
}

// Restore implements State.
func (s *CounterState) Restore(snap []byte) error {
	d := wire.NewDecoder(snap)
	ver, err := snapshotHeader(d, "counter")
	if err != nil {
		return err
	}
	v := d.Varint()
	if err := d.Done(); err != nil {
		return fmt.Errorf("counter: bad snapshot: %w", err)
	}
	s.V, s.version = v, ver
	return nil
}

// Version implements DeltaState.
func (s *CounterState) Version() uint64 { return s.version }

// Delta implements DeltaState: the value itself, which expresses the
// changes since any version up to the state's (format: codec byte, since,
// to, value).
func (s *CounterState) Delta(since uint64) ([]byte, error) {
	if since > s.version {
		return nil, fmt.Errorf("%w %d (counter at %d)", ErrDeltaUnavailable, since, s.version)
	}
	e := wire.Encoder{B: []byte{deltaCodec}}
	e.Uvarint(since)
	e.Uvarint(s.version)
	e.Varint(s.V)
	return e.B, nil
}

// ApplyDelta implements DeltaState.
func (s *CounterState) ApplyDelta(delta []byte) error {
	d := wire.NewDecoder(delta)
	if v := d.Byte(); v != deltaCodec && d.Err() == nil {
		return fmt.Errorf("%w: counter delta format %d", ErrDeltaMismatch, v)
	}
	since, to, v := d.Uvarint(), d.Uvarint(), d.Varint()
	if err := d.Done(); err != nil {
		return fmt.Errorf("%w: bad counter delta: %v", ErrDeltaMismatch, err)
	}
	if err := versionsFit(s.version, since, to); err != nil {
		return err
	}
	s.V, s.version = v, to
	return nil
}

// entry is the Counter's one Merkle entry.
func (s *CounterState) entry() []byte {
	var e wire.Encoder
	e.Varint(s.V)
	return e.B
}

// StateHash implements HashedState: the root of a one-leaf tree.
func (s *CounterState) StateHash() [32]byte { return s.MerkleTree().Root() }

// MerkleTree implements HashedState.
func (s *CounterState) MerkleTree() *MerkleTree {
	t := NewMerkleTree(1)
	t.Put("", s.entry())
	return t
}
