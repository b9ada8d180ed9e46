package automaton

import (
	"cmp"
	"encoding/binary"
	"slices"
	"sort"

	"github.com/synod-dev/synod/service"
)

// Fast paths for the model checker (package mc, issue 20 item 4). The
// checker fingerprints every state it reaches and copies the automaton an
// event steps; by default it does both by reflection (mc/reflect.go), which
// needs nothing from a protocol but dominates the search's time. An
// automaton (and its invariant checker) may instead encode and copy itself.
// Both paths must visit exactly the same states: mc's tests compare them
// on every protocol that opts in, and on its broken variants.

// ModelStater is implemented by automata that encode and copy their state
// for the model checker.
type ModelStater interface {
	// AppendModelState appends a canonical encoding of the automaton's
	// state to b: what the reflective fingerprint covers (every field but
	// the random source, the Config and the step's outputs), in the same
	// detail, so that two automata append the same bytes iff the
	// reflective walk finds them equal. The encoding must be self-
	// delimiting (lengths before variable-size parts), maps in sorted key
	// order. Request ids go through rename (nil: as they are), the
	// client renaming of symmetry reduction.
	AppendModelState(b []byte, rename func(RequestID) RequestID) []byte
	// CloneModel returns a deep copy that behaves exactly as the original
	// would from now on and shares nothing mutable with it.
	CloneModel() Automaton
}

// ModelCheckerStater is implemented by invariant checkers that encode and
// copy themselves. A checker's memory is part of the model's state, and it
// may keep references to automata.
type ModelCheckerStater interface {
	// AppendModelState is ModelStater's; ref returns the index of an
	// automaton that is up in the state being encoded (-1 for one that
	// is not: a crashed node's last incarnation).
	AppendModelState(b []byte, ref func(Automaton) int, rename func(RequestID) RequestID) []byte
	// CloneChecker returns a deep copy whose references to automata go
	// where remap sends them (the stepped node's copy, or the same
	// automaton for the others).
	CloneChecker(remap func(Automaton) Automaton) InvariantChecker
}

// Helpers for AppendModelState encodings.

// AppendModelUint appends x (8 bytes).
func AppendModelUint(b []byte, x uint64) []byte { return binary.LittleEndian.AppendUint64(b, x) }

// AppendModelBool appends a bool (1 byte).
func AppendModelBool(b []byte, x bool) []byte {
	if x {
		return append(b, 1)
	}
	return append(b, 0)
}

// AppendModelBytes appends a length and the bytes. A nil slice and an
// empty one differ (as they do for the reflective fingerprint).
func AppendModelBytes(b []byte, x []byte) []byte {
	if x == nil {
		return append(b, 0xfe)
	}
	b = append(b, 0xff)
	b = AppendModelUint(b, uint64(len(x)))
	return append(b, x...)
}

// AppendModelString appends a length and the string.
func AppendModelString(b []byte, s string) []byte {
	b = AppendModelUint(b, uint64(len(s)))
	return append(b, s...)
}

// AppendModelID appends a request id, renamed.
func AppendModelID(b []byte, id RequestID, rename func(RequestID) RequestID) []byte {
	if rename != nil {
		id = rename(id)
	}
	return AppendModelUint(AppendModelUint(b, id.Client), id.Seq)
}

// RenamedID is a request id and its renaming (ModelRenamedKeys).
type RenamedID struct{ ID, Renamed RequestID }

// ModelRenamedKeys returns m's keys with their renamings (the client
// renaming of symmetry reduction; nil: none), sorted by renaming, the
// canonical order in which a fast path encodes a map keyed by request id.
func ModelRenamedKeys[V any](m map[RequestID]V, rename func(RequestID) RequestID) []RenamedID {
	return AppendModelRenamedKeys(make([]RenamedID, 0, len(m)), m, rename)
}

// AppendModelRenamedKeys is ModelRenamedKeys appending to buf (a slice of
// the caller's array spares the allocation in an encoding's hot path).
func AppendModelRenamedKeys[V any](buf []RenamedID, m map[RequestID]V, rename func(RequestID) RequestID) []RenamedID {
	start := len(buf)
	for id := range m {
		r := id
		if rename != nil {
			r = rename(id)
		}
		buf = append(buf, RenamedID{id, r})
	}
	slices.SortFunc(buf[start:], func(a, b RenamedID) int {
		x, y := a.Renamed, b.Renamed
		if x.Client != y.Client {
			return cmp.Compare(x.Client, y.Client)
		}
		return cmp.Compare(x.Seq, y.Seq)
	})
	return buf
}

// AppendModelOp appends an operation.
func AppendModelOp(b []byte, op service.Op) []byte {
	b = AppendModelString(AppendModelString(b, op.Kind), op.Key)
	return AppendModelSlice(b, op.Args, AppendModelBytes)
}

// AppendModelSlice appends a slice: whether it is nil, its length and each
// element (by f).
func AppendModelSlice[T any](b []byte, xs []T, f func([]byte, T) []byte) []byte {
	if xs == nil {
		return append(b, 0xfe)
	}
	b = append(b, 0xff)
	b = AppendModelUint(b, uint64(len(xs)))
	for _, x := range xs {
		b = f(b, x)
	}
	return b
}

// AppendModelRequest appends a request: every field.
func AppendModelRequest(b []byte, r *Request, rename func(RequestID) RequestID) []byte {
	b = AppendModelID(b, r.ID, rename)
	b = AppendModelOp(b, r.Op)
	b = AppendModelSlice(b, r.Ops, AppendModelOp)
	b = AppendModelBool(b, r.Txn != nil)
	if r.Txn != nil {
		b = AppendModelID(b, r.Txn.Txn, rename)
		b = AppendModelUint(b, uint64(r.Txn.Action))
	}
	b = AppendModelUint(AppendModelUint(b, uint64(r.Env.Time)), r.Env.Seed)
	b = AppendModelUint(b, uint64(r.Opts.Read))
	b = AppendModelBool(b, r.Opts.Ext != nil)
	keys := make([]string, 0, len(r.Opts.Ext))
	for k := range r.Opts.Ext {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = AppendModelUint(b, uint64(len(keys)))
	for _, k := range keys {
		v := r.Opts.Ext[k]
		b = AppendModelString(b, k)
		b = AppendModelBool(b, v != nil)
		b = AppendModelUint(b, uint64(len(v)))
		for _, s := range v {
			b = AppendModelString(b, s)
		}
	}
	b = AppendModelBool(b, r.Fanout)
	return AppendModelBool(b, r.Nested)
}

// AppendModelResult appends a result: every field.
func AppendModelResult(b []byte, r service.Result) []byte {
	b = append(b, byte(r.Type))
	b = AppendModelBytes(b, r.Bytes)
	b = AppendModelUint(b, uint64(r.Int))
	b = AppendModelString(b, r.Err)
	return AppendModelSlice(b, r.Elems, AppendModelResult)
}

// ModelCheckerPartStater is implemented by invariant checkers (with
// ModelCheckerStater) whose memory splits into a part per node and the
// rest, so that the model checker re-encodes after a step only the
// stepped node's part and the rest (as it re-encodes only the stepped
// automaton). The promise: a step of node id (Check with stepped = id),
// its crash or its restart changes at most id's part and the rest; the
// parts of every node and the rest together say exactly what
// AppendModelState says (the same states are equal).
type ModelCheckerPartStater interface {
	// AppendModelNodePart appends what the checker holds about node id
	// (ref and rename as in AppendModelState).
	AppendModelNodePart(b []byte, id NodeID, ref func(Automaton) int, rename func(RequestID) RequestID) []byte
	// AppendModelRestPart appends the rest of the checker's memory.
	AppendModelRestPart(b []byte, ref func(Automaton) int, rename func(RequestID) RequestID) []byte
}
