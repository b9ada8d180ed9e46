package mc

import (
	"hash/maphash"
	"reflect"
	"sort"
	"sync"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// fingerprint returns a canonical 64-bit hash of the state: two states with
// equal fingerprints are treated as one (visited once). It covers every
// node's automaton (reflect.go), records and timers, the messages in flight
// (a multiset on an unordered network, per-link sequences on an ordered
// one), the clients and their history, and the invariant checker's memory.
func (w *world) fingerprint() uint64 {
	groups := w.groups
	if groups == nil {
		return w.fingerprintAs(nil)
	}
	// Symmetry reduction (symmetry.go): the least hash over the renamings
	// of interchangeable clients.
	var best uint64
	first := true
	forEachPerm(len(w.clients), groups, func(perm []int) {
		if fp := w.fingerprintAs(perm); first || fp < best {
			best, first = fp, false
		}
	})
	return best
}

// fingerprintAs hashes the state with clients renamed by perm (nil: as is).
func (w *world) fingerprintAs(perm []int) uint64 {
	hs := &hasher{stack: map[uintptr]bool{}, roots: map[uintptr]int{}, perm: perm}
	for i, n := range w.nodes {
		if n.a != nil {
			hs.roots[reflect.ValueOf(n.a).Pointer()] = i
		}
	}
	var h maphash.Hash
	h.SetSeed(seed)
	for i := range w.nodes {
		n := &w.nodes[i]
		if n.a == nil {
			h.WriteByte(0)
		} else {
			h.WriteByte(1)
			hs.u64(&h, w.nodeHash(hs, i))
		}
		hs.u64(&h, uint64(n.boots))
		hs.u64(&h, effectsHash(n.effects))
		hs.u64(&h, uint64(len(n.timers)))
		for _, t := range n.timers {
			hs.u64(&h, uint64(t))
		}
		hs.u64(&h, n.diskSum)
		hs.u64(&h, unsyncedHash(n.unsynced))
	}
	hs.u64(&h, w.flightHash(perm))
	for j := range w.clients {
		c := w.clients[inverse(perm, j)]
		hs.u64(&h, uint64(c.next))
		if c.pending {
			h.WriteByte(1)
		} else {
			h.WriteByte(0)
		}
		hs.u64(&h, uint64(c.target))
	}
	if perm == nil {
		hs.u64(&h, w.histH)
	} else {
		hs.u64(&h, histHash(w.hist, perm))
	}
	hs.u64(&h, uint64(w.crashes))
	if w.cfg.timerBudget() > 0 {
		hs.u64(&h, uint64(w.fired))
	}
	hs.u64(&h, extHash(w.ext))
	if w.checker != nil {
		hs.u64(&h, w.checkerHash(hs))
	}
	return h.Sum64()
}

// checkerHash hashes the invariant checker (cached when clients are not
// renamed; a step or a crash clears the cache).
func (w *world) checkerHash(hs *hasher) uint64 {
	if w.checkerFP != 0 && hs.perm == nil {
		return w.checkerFP
	}
	var fp uint64
	if cs, ok := w.checker.(automaton.ModelCheckerStater); ok && !w.cfg.Reflective {
		fp = encodedHash(func(b []byte) []byte { return cs.AppendModelState(b, w.ref, hs.rename()) })
	} else {
		fp = hs.sum(w.checker, -1)
	}
	if hs.perm == nil {
		w.checkerFP = fp
	}
	return fp
}

// ref is the index of the node whose automaton a is (-1: none is: a crashed
// incarnation), for ModelCheckerStater encodings.
func (w *world) ref(a automaton.Automaton) int {
	for i := range w.nodes {
		if w.nodes[i].a == a {
			return i
		}
	}
	return -1
}

// rename renames client ids as perm does (nil: no renaming).
func (hs *hasher) rename() func(automaton.RequestID) automaton.RequestID {
	if hs.perm == nil {
		return nil
	}
	return func(id automaton.RequestID) automaton.RequestID {
		id.Client = uint64(permClient(hs.perm, int(id.Client)))
		return id
	}
}

// bufs holds encoding buffers for ModelStater fingerprints.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// encodedHash hashes what enc appends (the fast path's encodings).
func encodedHash(enc func([]byte) []byte) uint64 {
	buf := bufs.Get().(*[]byte)
	*buf = enc((*buf)[:0])
	fp := maphash.Bytes(seed, *buf) | 1
	bufs.Put(buf)
	return fp
}

// sum hashes x by reflection; x is node i's automaton (hashed as itself,
// not as a reference to node i) or, with i < 0, not an automaton.
func (hs *hasher) sum(x any, i int) uint64 {
	var sub maphash.Hash
	sub.SetSeed(seed)
	if i >= 0 {
		p := reflect.ValueOf(x).Pointer()
		delete(hs.roots, p)
		defer func() { hs.roots[p] = i }()
	}
	hs.value(&sub, reflect.ValueOf(x))
	return sub.Sum64() | 1
}

// diskEntryHash hashes one record; a node's records hash as the sum over
// its entries (nodeState.diskSum), independent of map order.
func diskEntryHash(k string, v []byte) uint64 {
	var sub maphash.Hash
	sub.SetSeed(seed)
	sub.WriteString(k)
	sub.WriteByte(0)
	sub.Write(v)
	return sub.Sum64()
}

// mix spreads a message hash before it enters the multiset sum.
func mix(x uint64) uint64 { return x*0x9e3779b97f4a7c15 ^ x>>29 }

// nodeHash hashes node i's automaton (cached when clients are not renamed).
func (w *world) nodeHash(hs *hasher, i int) uint64 {
	n := &w.nodes[i]
	if n.fp != 0 && hs.perm == nil {
		return n.fp
	}
	var fp uint64
	if ms, ok := n.a.(automaton.ModelStater); ok && !w.cfg.Reflective {
		fp = encodedHash(func(b []byte) []byte { return ms.AppendModelState(b, hs.rename()) })
	} else {
		fp = hs.sum(n.a, i)
	}
	if hs.perm == nil {
		n.fp = fp
	}
	return fp
}

func msgHash(m *message, perm []int) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	var b [16]byte
	from := m.from
	if from < 0 && perm != nil {
		from = -1 - perm[-1-from]
	}
	b[0], b[1] = byte(from), byte(m.to)
	h.Write(b[:2])
	h.Write(m.data)
	if m.req != nil {
		id := m.req.ID
		id.Client = uint64(permClient(perm, int(id.Client)))
		h.WriteString(id.String())
	}
	return h.Sum64()
}

func (w *world) flightHash(perm []int) uint64 {
	if !w.cfg.Net.Ordered {
		if perm == nil {
			return w.flightSum
		}
		var sum uint64
		for k := range w.flight {
			sum += mix(msgHash(&w.flight[k], perm))
		}
		return sum
	}
	idx := make([]int, len(w.flight))
	for k := range idx {
		idx[k] = k
	}
	from := func(m *message) int {
		if m.from < 0 && perm != nil {
			return -1 - perm[-1-m.from]
		}
		return m.from
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ma, mb := &w.flight[idx[a]], &w.flight[idx[b]]
		if fa, fb := from(ma), from(mb); fa != fb {
			return fa < fb
		}
		return ma.to < mb.to
	})
	var h maphash.Hash
	h.SetSeed(seed)
	hs := &hasher{}
	for _, k := range idx {
		hs.u64(&h, msgHash(&w.flight[k], perm))
	}
	return h.Sum64()
}

// histHash hashes a history as a chain: each hop's hash covers the hash
// of the history before it (world.histH is extended hop by hop).
func histHash(hist []hop, perm []int) uint64 {
	var sum uint64
	for _, x := range hist {
		sum = hopHash(sum, x, perm)
	}
	return sum
}

func hopHash(prev uint64, x hop, perm []int) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	hs := &hasher{}
	hs.u64(&h, prev)
	c := x.client
	if perm != nil {
		c = perm[c]
	}
	hs.u64(&h, uint64(c)<<32|uint64(x.op))
	if x.ret {
		h.WriteByte(1)
		var e wire.Encoder
		service.EncodeResult(&e, x.res)
		h.Write(e.B)
	} else {
		h.WriteByte(0)
	}
	return h.Sum64()
}
