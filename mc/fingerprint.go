package mc

import (
	"hash/maphash"
	"reflect"
	"sort"

	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// fingerprint returns a canonical 64-bit hash of the state: two states with
// equal fingerprints are treated as one (visited once). It covers every
// node's automaton (reflect.go), records and timers, the messages in flight
// (a multiset on an unordered network, per-link sequences on an ordered
// one), the clients and their history, and the invariant checker's memory.
func (w *world) fingerprint() uint64 {
	hs := &hasher{stack: map[uintptr]bool{}, roots: map[uintptr]int{}}
	for i, n := range w.nodes {
		if n.a != nil {
			hs.roots[reflect.ValueOf(n.a).Pointer()] = i
		}
	}
	var h maphash.Hash
	h.SetSeed(seed)
	for i, n := range w.nodes {
		if n.a == nil {
			h.WriteByte(0)
		} else {
			h.WriteByte(1)
			if n.fp == 0 {
				var sub maphash.Hash
				sub.SetSeed(seed)
				delete(hs.roots, reflect.ValueOf(n.a).Pointer())
				hs.value(&sub, reflect.ValueOf(n.a))
				hs.roots[reflect.ValueOf(n.a).Pointer()] = i
				w.nodes[i].fp = sub.Sum64() | 1
			}
			hs.u64(&h, w.nodes[i].fp)
		}
		hs.u64(&h, uint64(n.boots))
		hs.u64(&h, effectsHash(n.effects))
		hs.u64(&h, uint64(len(n.timers)))
		for _, t := range n.timers {
			hs.u64(&h, uint64(t))
		}
		var sum uint64
		for k, v := range n.disk {
			var sub maphash.Hash
			sub.SetSeed(seed)
			sub.WriteString(k)
			sub.WriteByte(0)
			sub.Write(v)
			sum += sub.Sum64()
		}
		hs.u64(&h, sum)
	}
	hs.u64(&h, w.flightHash())
	for _, c := range w.clients {
		hs.u64(&h, uint64(c.next))
		if c.pending {
			h.WriteByte(1)
		} else {
			h.WriteByte(0)
		}
		hs.u64(&h, uint64(c.target))
	}
	hs.u64(&h, histHash(w.hist))
	hs.u64(&h, uint64(w.crashes))
	hs.u64(&h, extHash(w.ext))
	if w.checker != nil {
		hs.value(&h, reflect.ValueOf(w.checker))
	}
	return h.Sum64()
}

func msgHash(m *message) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	var b [16]byte
	b[0], b[1] = byte(m.from), byte(m.to)
	h.Write(b[:2])
	h.Write(m.data)
	if m.req != nil {
		h.WriteString(m.req.ID.String())
	}
	return h.Sum64()
}

func (w *world) flightHash() uint64 {
	if !w.cfg.Net.Ordered {
		var sum uint64
		for k := range w.flight {
			x := msgHash(&w.flight[k])
			sum += x*0x9e3779b97f4a7c15 ^ x>>29
		}
		return sum
	}
	idx := make([]int, len(w.flight))
	for k := range idx {
		idx[k] = k
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ma, mb := &w.flight[idx[a]], &w.flight[idx[b]]
		if ma.from != mb.from {
			return ma.from < mb.from
		}
		return ma.to < mb.to
	})
	var h maphash.Hash
	h.SetSeed(seed)
	hs := &hasher{}
	for _, k := range idx {
		hs.u64(&h, msgHash(&w.flight[k]))
	}
	return h.Sum64()
}

func histHash(hist []hop) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	hs := &hasher{}
	for _, x := range hist {
		hs.u64(&h, uint64(x.client)<<32|uint64(x.op))
		if x.ret {
			h.WriteByte(1)
			var e wire.Encoder
			service.EncodeResult(&e, x.res)
			h.Write(e.B)
		} else {
			h.WriteByte(0)
		}
	}
	return h.Sum64()
}
