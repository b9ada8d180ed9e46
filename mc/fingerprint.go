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
	if w.groups == nil && w.nodeGroups == nil {
		return w.fingerprintAs(nil, nil, nil)
	}
	// Symmetry reduction (symmetry.go, nodesym.go): the least hash over
	// the renamings of interchangeable clients and nodes.
	var best uint64
	first := true
	w.nodeRenamings(func(r *automaton.NodeRenaming, inv []int) {
		forEachPerm(len(w.clients), w.groups, func(perm []int) {
			if w.groups == nil {
				perm = nil
			}
			if fp := w.fingerprintAs(perm, r, inv); first || fp < best {
				best, first = fp, false
			}
		})
	})
	return best
}

// fingerprintAs hashes the state with clients renamed by perm and nodes by
// r (inv: its inverse; nil: as they are).
func (w *world) fingerprintAs(perm []int, r *automaton.NodeRenaming, inv []int) uint64 {
	hs := &hasher{perm: perm, w: w}
	var h maphash.Hash
	h.SetSeed(seed)
	for j := range w.nodes {
		i := j
		if r != nil {
			i = inv[j]
		}
		n := &w.nodes[i]
		switch {
		case n.a == nil:
			h.WriteByte(0)
		case r == nil:
			h.WriteByte(1)
			hs.u64(&h, w.nodeHash(hs, i))
		default:
			h.WriteByte(1)
			hs.u64(&h, w.renamedNodeHash(hs, i, r))
		}
		hs.u64(&h, uint64(n.boots))
		hs.u64(&h, effectsHash(n.effects))
		hs.u64(&h, uint64(len(n.timers)))
		for _, t := range n.timers {
			hs.u64(&h, uint64(t))
		}
		if r == nil {
			hs.u64(&h, n.diskSum)
		} else {
			hs.u64(&h, w.renamedDiskSum(i, r))
		}
		hs.u64(&h, unsyncedHash(n.unsynced))
	}
	hs.u64(&h, w.flightHash(perm, r))
	for j := range w.clients {
		c := w.clients[inverse(perm, j)]
		hs.u64(&h, uint64(c.next))
		if c.pending {
			h.WriteByte(1)
		} else {
			h.WriteByte(0)
		}
		if w.fanout || w.cfg.Model.Target == "any" {
			// Targets are not used (and never change).
			hs.u64(&h, uint64(c.target))
		} else {
			hs.u64(&h, uint64(r.Index(c.target)))
		}
		if w.coordinator != nil {
			hs.u64(&h, coordHash(hs, &c)) // clientdriven.go
		}
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
	switch {
	case w.checker == nil:
	case r == nil:
		hs.u64(&h, w.checkerHash(hs))
	default:
		hs.u64(&h, w.renamedCheckerHash(hs, r))
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
	if ps, ok := w.checker.(automaton.ModelCheckerPartStater); ok && !w.cfg.Reflective && w.nodeGroups == nil {
		fp = w.checkerPartsHash(ps, hs)
	} else if cs, ok := w.checker.(automaton.ModelCheckerStater); ok && !w.cfg.Reflective {
		fp = encodedHash(func(b []byte) []byte { return cs.AppendModelState(b, w.ref, hs.rename()) })
	} else {
		fp = hs.prepare().sum(w.checker, -1)
	}
	if hs.perm == nil {
		w.checkerFP = fp
	}
	return fp
}

// checkerPartsHash hashes a checker that encodes itself in parts: the
// parts about nodes that did not step since are cached (nodeState.chkFP),
// as the automata's hashes are, when clients are not renamed. (Under node
// symmetry the checker is hashed whole, as its renamings are.)
func (w *world) checkerPartsHash(ps automaton.ModelCheckerPartStater, hs *hasher) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	rename := hs.rename()
	for i := range w.nodes {
		n := &w.nodes[i]
		fp := n.chkFP
		if fp == 0 || rename != nil {
			id := w.ids[i]
			fp = encodedHash(func(b []byte) []byte { return ps.AppendModelNodePart(b, id, w.ref, rename) })
			if rename == nil {
				n.chkFP = fp
			}
		}
		hs.u64(&h, fp)
	}
	hs.u64(&h, encodedHash(func(b []byte) []byte { return ps.AppendModelRestPart(b, w.ref, rename) }))
	return h.Sum64() | 1
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

// prepare readies hs for reflective hashing of hs.w's automata and
// checker (the fast path needs none of it: made on first use).
func (hs *hasher) prepare() *hasher {
	if hs.roots != nil {
		return hs
	}
	hs.stack, hs.roots = map[uintptr]bool{}, map[uintptr]int{}
	for i, n := range hs.w.nodes {
		if n.a != nil {
			hs.roots[reflect.ValueOf(n.a).Pointer()] = i
		}
	}
	return hs
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
		fp = hs.prepare().sum(n.a, i)
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
		if len(m.req.Opts.Ext) > 0 { // a client-driven phase (clientdriven.go)
			h.WriteString(m.req.Op.String())
			h.WriteString(extString(m.req.Opts.Ext))
		}
	}
	return h.Sum64()
}

func (w *world) flightHash(perm []int, r *automaton.NodeRenaming) uint64 {
	mh := func(m *message) uint64 {
		if r == nil {
			return msgHash(m, perm)
		}
		return w.renamedMsgHash(m, perm, r)
	}
	if !w.cfg.Net.Ordered {
		if perm == nil && r == nil {
			return w.flightSum
		}
		var sum uint64
		for k := range w.flight {
			sum += mix(mh(&w.flight[k]))
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
		if m.from >= 0 {
			return r.Index(m.from)
		}
		return m.from
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ma, mb := &w.flight[idx[a]], &w.flight[idx[b]]
		if fa, fb := from(ma), from(mb); fa != fb {
			return fa < fb
		}
		return r.Index(ma.to) < r.Index(mb.to)
	})
	var h maphash.Hash
	h.SetSeed(seed)
	hs := &hasher{}
	for _, k := range idx {
		hs.u64(&h, mh(&w.flight[k]))
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
