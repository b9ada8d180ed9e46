package service

import "maps"

// Clone returns an independent copy of the state, much cheaper than Snapshot
// plus Restore. Values are shared: Apply never modifies a stored string in
// place (it replaces it), and a collection is changed in place only by the
// state whose token owns it (kv_types.go), so Clone gives both sides new
// tokens and the first write on either side to a shared collection copies
// it. Protocols that keep a second copy of a state (ESDS's tentative state)
// use it when present.
//
// The transfer bookkeeping costs the copy nothing beyond the map: the
// journal and tombstone queue are shared as capacity-limited slices (a
// later append on either side never writes where the other reads, and
// neither compacts the shared journal in place: journalShared), and the
// Merkle tree, the tombstone maps and the deadline map are shared
// copy-on-write (the first write on either side that touches them copies
// them).
func (s *KVState) Clone() State {
	if s.tree != nil {
		s.hashed() // no entry hashes pending on either side
	}
	m := maps.Clone(s.m)
	if m == nil {
		m = map[string]kvEntry{}
	}
	s.tok = new(int)
	c := *s
	c.tok = new(int)
	c.m = m
	c.journal = s.journal[:len(s.journal):len(s.journal)]
	s.journalShared, c.journalShared = true, true // neither compacts it in place
	c.tq = s.tq[:len(s.tq):len(s.tq)]
	if s.tree != nil {
		s.treeShared, c.treeShared = true, true
	}
	if s.tomb != nil {
		s.tombShared, c.tombShared = true, true
	}
	if s.exps != nil {
		s.expsShared, c.expsShared = true, true
	}
	if s.wt != nil {
		s.wtShared, c.wtShared = true, true
	}
	return &c
}

// KeysState returns a new state holding only the given keys' entries
// (value, type, deadline) and this state's clock: enough to apply the
// key-local operations (KV.KeyLocal) on those keys and get the results
// this state would give, without copying the whole map (ESDS answers a
// key-local operation over a stale tentative state this way, apply.go
// keyValue). Versions start afresh: WATCH generations and transfer
// bookkeeping of the copy are not this state's. When it copies a
// collection it gives this state a new token, as Clone does, so neither
// side changes the shared collection in place; copying only strings keeps
// the token (a new one would make this state copy each of its collections
// at its next write to it, and ESDS calls this for every GET it answers
// this way).
func (s *KVState) KeysState(keys []string) State {
	c := newKVState()
	c.clock = s.clock
	for _, k := range keys {
		e, ok := s.m[k]
		if !ok {
			continue
		}
		if e.c != nil {
			s.tok = new(int)
		}
		c.m[k] = e
		if e.exp != 0 {
			c.setExp(k, e.exp)
		}
	}
	return c
}
