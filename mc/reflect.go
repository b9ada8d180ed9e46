package mc

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/rand"
	"reflect"
	"sync"
	"unsafe"

	"github.com/synod-dev/synod/automaton"
)

// The generic fingerprint and copier: every protocol has them without a
// line of its own, by walking its automaton (and its invariant checker)
// with reflection, unexported fields included.
//
// What the fingerprint leaves out, and why (documented in doc.go):
//   - *rand.Rand: the random source's position. Hashing 4.9 KB per node per
//     state would dominate the search, and protocols draw from it for timer
//     durations and incarnation numbers, both fixed per boot in the model.
//   - []automaton.Output fields: every protocol keeps its step's outputs in
//     one (a.out) and resets it at the start of Step; they are not state.
//   - automaton.Config values: a node's configuration is the same in
//     every state (its random source aside, above).
//   - functions and channels.
// Maps are hashed order-independently (a commutative sum of per-entry
// hashes); pointers are followed (a shared pointee is hashed once per
// reference, so two states that differ only in aliasing are one).

var seed = maphash.MakeSeed()

var (
	randType   = reflect.TypeOf((*rand.Rand)(nil))
	outsType   = reflect.TypeOf([]automaton.Output(nil))
	configType = reflect.TypeOf(automaton.Config{})
	reqIDType  = reflect.TypeOf(automaton.RequestID{})
	nodeIDType = reflect.TypeOf(automaton.NodeID(""))
	typeIDs    sync.Map // reflect.Type -> uint64
	pointerFre sync.Map // reflect.Type -> bool (type holds no pointer: copy by value)
)

func typeID(t reflect.Type) uint64 {
	if v, ok := typeIDs.Load(t); ok {
		return v.(uint64)
	}
	id := maphash.String(seed, t.PkgPath()+"."+t.String())
	typeIDs.Store(t, id)
	return id
}

// unlock returns v (addressable) with the read-only flag of an unexported
// field cleared, so that it can be read as an interface and set.
func unlock(v reflect.Value) reflect.Value {
	if v.CanSet() || !v.CanAddr() {
		return v
	}
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}

// hasher writes a canonical hash of Go values.
type hasher struct {
	stack map[uintptr]bool
	// roots maps the automata of the state being hashed to their node
	// index: a checker's pointer to an automaton hashes as the reference.
	roots map[uintptr]int
	// perm, when set, renames clients (symmetry.go): a RequestID of client
	// c+1 hashes as one of client perm[c]+1.
	perm []int
	// node, when set, renames nodes (nodesym.go): a value of type
	// automaton.NodeID hashes as its renamed id, a reference to node i's
	// automaton as one to node node.Index(i). Only for protocols whose
	// state names nodes so (automaton.ModelTypedNodeNames).
	node *automaton.NodeRenaming
	buf  [8]byte
	// w is the state whose automata roots lists (prepare).
	w *world
}

func (hs *hasher) u64(h *maphash.Hash, x uint64) {
	binary.LittleEndian.PutUint64(hs.buf[:], x)
	h.Write(hs.buf[:])
}

func (hs *hasher) value(h *maphash.Hash, v reflect.Value) {
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			h.WriteByte(1)
		} else {
			h.WriteByte(0)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		hs.u64(h, uint64(v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		hs.u64(h, v.Uint())
	case reflect.Float32, reflect.Float64:
		hs.u64(h, math.Float64bits(v.Float()))
	case reflect.Complex64, reflect.Complex128:
		c := v.Complex()
		hs.u64(h, math.Float64bits(real(c)))
		hs.u64(h, math.Float64bits(imag(c)))
	case reflect.String:
		s := v.String()
		if hs.node != nil && v.Type() == nodeIDType {
			s = hs.node.Name(s)
		}
		hs.u64(h, uint64(len(s)))
		h.WriteString(s)
	case reflect.Slice:
		if v.Type() == outsType {
			return
		}
		if v.IsNil() {
			h.WriteByte(0xfe)
			return
		}
		hs.u64(h, uint64(v.Len()))
		if v.Type().Elem().Kind() == reflect.Uint8 {
			h.Write(v.Bytes())
			return
		}
		for i := 0; i < v.Len(); i++ {
			hs.value(h, v.Index(i))
		}
	case reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if v.CanAddr() {
				h.Write(v.Bytes())
				return
			}
			for i := 0; i < v.Len(); i++ {
				h.WriteByte(byte(v.Index(i).Uint()))
			}
			return
		}
		for i := 0; i < v.Len(); i++ {
			hs.value(h, v.Index(i))
		}
	case reflect.Struct:
		if hs.perm != nil && v.Type() == reqIDType {
			hs.u64(h, uint64(permClient(hs.perm, int(v.Field(0).Uint()))))
			hs.u64(h, v.Field(1).Uint())
			return
		}
		if v.Type() == configType {
			return // the same in every state of a node (its random source aside)
		}
		for i := 0; i < v.NumField(); i++ {
			hs.value(h, v.Field(i))
		}
	case reflect.Map:
		if v.IsNil() {
			h.WriteByte(0xfe)
			return
		}
		hs.u64(h, uint64(v.Len()))
		var sum uint64
		it := v.MapRange()
		for it.Next() {
			var sub maphash.Hash
			sub.SetSeed(seed)
			hs.value(&sub, it.Key())
			hs.value(&sub, it.Value())
			sum += sub.Sum64()
		}
		hs.u64(h, sum)
	case reflect.Pointer:
		if v.IsNil() {
			h.WriteByte(0xfe)
			return
		}
		if v.Type() == randType {
			return
		}
		p := v.Pointer()
		if i, ok := hs.roots[p]; ok {
			h.WriteByte(0xfd)
			hs.u64(h, uint64(hs.node.Index(i)))
			return
		}
		if hs.stack[p] {
			h.WriteByte(0xfc) // a cycle back to an enclosing value
			return
		}
		hs.stack[p] = true
		hs.value(h, v.Elem())
		delete(hs.stack, p)
	case reflect.Interface:
		if v.IsNil() {
			h.WriteByte(0xfe)
			return
		}
		e := v.Elem()
		hs.u64(h, typeID(e.Type()))
		hs.value(h, e)
	}
}

// noPointers reports whether values of t hold no pointer (copy by value).
func noPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.String:
		return true
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface, reflect.Func, reflect.Chan:
		return false
	}
	if v, ok := pointerFre.Load(t); ok {
		return v.(bool)
	}
	r := false
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.String:
		r = true // strings are immutable: sharing them is copying them
	case reflect.Array:
		r = noPointers(t.Elem())
	case reflect.Struct:
		r = true
		for i := 0; i < t.NumField(); i++ {
			if !noPointers(t.Field(i).Type) {
				r = false
				break
			}
		}
	}
	pointerFre.Store(t, r)
	return r
}

var ptrFields sync.Map // reflect.Type -> []int

// pointerFields lists the fields of struct type t that hold pointers.
func pointerFields(t reflect.Type) []int {
	if v, ok := ptrFields.Load(t); ok {
		return v.([]int)
	}
	var fs []int
	for i := 0; i < t.NumField(); i++ {
		if !noPointers(t.Field(i).Type) {
			fs = append(fs, i)
		}
	}
	ptrFields.Store(t, fs)
	return fs
}

// copier deep-copies Go values, keeping aliasing of pointers (one map for a
// whole state, so that a checker's pointer to an automaton points to the
// copy of that automaton). Slices are copied per header: two slices sharing
// a backing array get one array each.
type copier struct {
	seen map[uintptr]reflect.Value
}

func newCopier() *copier { return &copier{seen: map[uintptr]reflect.Value{}} }

// copyAny returns a deep copy of x (a pointer or an interface value).
func (c *copier) copyAny(x any) any {
	if x == nil {
		return nil
	}
	v := reflect.ValueOf(x)
	n := reflect.New(v.Type()).Elem()
	c.copyInto(n, v)
	return n.Interface()
}

// copyInto sets dst (settable) to a deep copy of src.
func (c *copier) copyInto(dst, src reflect.Value) {
	t := src.Type()
	if noPointers(t) {
		dst.Set(src)
		return
	}
	if k := src.Kind(); (k == reflect.Struct || k == reflect.Array) && !src.CanAddr() {
		// A map value or an interface's content: copy it somewhere
		// addressable, so that its unexported fields can be unlocked.
		tmp := reflect.New(t).Elem()
		tmp.Set(src)
		src = tmp
	}
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := src.Pointer()
		if n, ok := c.seen[p]; ok {
			dst.Set(n)
			return
		}
		n := reflect.New(t.Elem())
		c.seen[p] = n
		c.copyInto(n.Elem(), unlock(src.Elem()))
		dst.Set(n)
	case reflect.Struct:
		// All fields at once, then a deep copy of those that hold
		// pointers (over the shared references the first copy left).
		unlock(dst).Set(src)
		for _, i := range pointerFields(t) {
			c.copyInto(unlock(dst.Field(i)), unlock(src.Field(i)))
		}
	case reflect.Array:
		for i := 0; i < src.Len(); i++ {
			c.copyInto(dst.Index(i), src.Index(i))
		}
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		if t == outsType {
			// A step's outputs, already consumed: not state (the hasher
			// skips them too), and copying them deep cost eve a few ms
			// a copy.
			dst.Set(reflect.Zero(t))
			return
		}
		n := reflect.MakeSlice(t, src.Len(), src.Cap())
		if noPointers(t.Elem()) {
			reflect.Copy(n, src)
		} else {
			for i := 0; i < src.Len(); i++ {
				c.copyInto(n.Index(i), src.Index(i))
			}
		}
		dst.Set(n)
	case reflect.Map:
		if src.IsNil() {
			return
		}
		n := reflect.MakeMapWithSize(t, src.Len())
		kt, vt := t.Key(), t.Elem()
		it := src.MapRange()
		for it.Next() {
			k := reflect.New(kt).Elem()
			c.copyInto(k, it.Key())
			e := reflect.New(vt).Elem()
			c.copyInto(e, it.Value())
			n.SetMapIndex(k, e)
		}
		dst.Set(n)
	case reflect.Interface:
		if src.IsNil() {
			return
		}
		e := src.Elem()
		n := reflect.New(e.Type()).Elem()
		c.copyInto(n, e)
		dst.Set(n)
	default: // funcs, channels, unsafe pointers: shared
		dst.Set(src)
	}
}
