package service

import "maps"

// Clone returns an independent copy of the state, much cheaper than Snapshot
// plus Restore. Values are shared: Apply never modifies a stored value in
// place (it replaces it), so sharing them is safe. Protocols that keep a
// second copy of a state (ESDS's tentative state) use it when present.
func (s *KVState) Clone() State {
	m := maps.Clone(s.m)
	if m == nil {
		m = map[string][]byte{}
	}
	return &KVState{m: m}
}
