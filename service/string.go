package service

import (
	"fmt"

	"github.com/synod-dev/synod/wire"
)

func init() { Register(String{}) }

// String is the String Concatenation Service of the ESDS thesis (chapter 4.4): one
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

// StringState is a String replica's state. Its Version counts the appends
// applied; its Merkle tree is a single leaf holding one entry (key "", the
// value). V must change only through Apply, Restore and ApplyDelta, which
// keep the cached hash and the change version right.
type StringState struct {
	V       []byte
	version uint64
	// at is the version of the last change (the Restore baseline after a
	// Restore); hash caches StateHash while valid.
	at    uint64
	hash  [32]byte
	valid bool
}

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
		s.version++
		s.at, s.valid = s.version, false
	}
	return Bytes(append([]byte{}, s.V...))
}

// Snapshot implements State (format 2: version, then the value).
func (s *StringState) Snapshot() []byte {
	e := wire.Encoder{B: []byte{snapVersion}}
	e.Uvarint(s.version)
	e.Bytes(s.V)
	return e.B
}

// Restore implements State.
func (s *StringState) Restore(snap []byte) error {
	d := wire.NewDecoder(snap)
	ver, err := snapshotHeader(d, "string")
	if err != nil {
		return err
	}
	v := d.BytesCopy()
	if err := d.Done(); err != nil {
		return fmt.Errorf("string: bad snapshot: %w", err)
	}
	*s = StringState{V: v, version: ver, at: ver}
	return nil
}

// Version implements DeltaState.
func (s *StringState) Version() uint64 { return s.version }

// Delta implements DeltaState: the value when it changed after since,
// nothing otherwise (format: codec byte, since, to, 1 and the change
// version and value, or 0).
func (s *StringState) Delta(since uint64) ([]byte, error) {
	if since > s.version {
		return nil, fmt.Errorf("%w %d (string at %d)", ErrDeltaUnavailable, since, s.version)
	}
	e := wire.Encoder{B: make([]byte, 0, 24+len(s.V))}
	e.Byte(deltaCodec)
	e.Uvarint(since)
	e.Uvarint(s.version)
	e.Bool(s.at > since)
	if s.at > since {
		e.Uvarint(s.at)
		e.Bytes(s.V)
	}
	return e.B, nil
}

// ApplyDelta implements DeltaState.
func (s *StringState) ApplyDelta(delta []byte) error {
	d := wire.NewDecoder(delta)
	if v := d.Byte(); v != deltaCodec && d.Err() == nil {
		return fmt.Errorf("%w: string delta format %d", ErrDeltaMismatch, v)
	}
	since, to := d.Uvarint(), d.Uvarint()
	changed := d.Bool()
	var at uint64
	var v []byte
	if changed {
		at, v = d.Uvarint(), d.BytesCopy()
	}
	if err := d.Done(); err != nil {
		return fmt.Errorf("%w: bad string delta: %v", ErrDeltaMismatch, err)
	}
	if err := versionsFit(s.version, since, to); err != nil {
		return err
	}
	if changed {
		s.V, s.at, s.valid = v, at, false
	}
	s.version = to
	return nil
}

// StateHash implements HashedState: the root of a one-leaf tree, cached
// until the next change.
func (s *StringState) StateHash() [32]byte {
	if !s.valid {
		s.hash, s.valid = s.MerkleTree().Root(), true
	}
	return s.hash
}

// MerkleTree implements HashedState.
func (s *StringState) MerkleTree() *MerkleTree {
	t := NewMerkleTree(1)
	t.Put("", s.V)
	return t
}
