package mc

import (
	"slices"

	"github.com/synod-dev/synod/service"
)

// Symmetry reduction over clients (ModelConfig.SymmetricClients). Clients
// with the same script and the same target are interchangeable when the
// protocol treats request ids opaquely: renaming them maps every reachable
// state to a reachable state with the same future, up to the renaming. The
// fingerprint of a state is then the least hash over the renamings within
// each group of interchangeable clients (fingerprint.go), so a state and
// its renamings are visited once.
//
// A renaming applies to the clients' progress and history, to fanned-out
// request copies in flight, and to every automaton.RequestID the reflective
// hash meets in the automata and the invariant checker (reflect.go). Bytes
// are hashed as they are: message payloads, records and effect payloads.
// A protocol that declares SymmetricClients therefore promises that its
// messages, records and effect payloads carry no client id (ABD's carry
// tags, keys and values only); one whose bytes do (Paxos forwards a
// request's id) must not declare it: the reduction would merge states that
// are not renamings of each other.
//
// Scripts of different clients usually write different values (the
// default: client c sets x to "c"), so they are not interchangeable; the
// reduction applies to models whose clients run equal scripts.

// symmetryGroups returns the groups (two or more client indexes) of
// interchangeable clients, or nil when nothing is to be reduced.
func (w *world) symmetryGroups() [][]int {
	if !w.cfg.Model.SymmetricClients || len(w.clients) < 2 {
		return nil
	}
	var groups [][]int
	used := make([]bool, len(w.clients))
	for a := range w.clients {
		if used[a] {
			continue
		}
		g := []int{a}
		for b := a + 1; b < len(w.clients); b++ {
			if !used[b] && w.interchangeable(a, b) {
				g = append(g, b)
				used[b] = true
			}
		}
		if len(g) > 1 {
			groups = append(groups, g)
		}
	}
	return groups
}

// interchangeable: clients a and b run the same script at the same node.
func (w *world) interchangeable(a, b int) bool {
	if w.cfg.Model.Target != "first" && w.cfg.Model.Target != "any" && !w.fanout &&
		w.clients[a].target != w.clients[b].target {
		return false
	}
	if w.cfg.Model.Requests != nil {
		return false // requests may depend on the client
	}
	sa, sb := w.script(a), w.script(b)
	return slices.EqualFunc(sa, sb, func(x, y service.Op) bool { return opString(x) == opString(y) })
}

// forEachPerm calls f with every permutation of n clients that permutes
// each group within itself (perm[old] = new) and fixes the others.
func forEachPerm(n int, groups [][]int, f func(perm []int)) {
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	var rec func(g int)
	rec = func(g int) {
		if g == len(groups) {
			f(perm)
			return
		}
		grp := groups[g]
		vals := slices.Clone(grp)
		permute(vals, 0, func() {
			for k, old := range grp {
				perm[old] = vals[k]
			}
			rec(g + 1)
		})
		for _, old := range grp {
			perm[old] = old
		}
	}
	rec(0)
}

// permute calls f with every ordering of v[k:] (Heap's swaps, restored).
func permute(v []int, k int, f func()) {
	if k >= len(v)-1 {
		f()
		return
	}
	for i := k; i < len(v); i++ {
		v[k], v[i] = v[i], v[k]
		permute(v, k+1, f)
		v[k], v[i] = v[i], v[k]
	}
}

// permClient renames a 1-based client id (RequestID.Client).
func permClient(perm []int, id int) int {
	if perm == nil || id < 1 || id > len(perm) {
		return id
	}
	return perm[id-1] + 1
}

// inverse returns the old index of the client renamed to j.
func inverse(perm []int, j int) int {
	if perm == nil {
		return j
	}
	for old, nw := range perm {
		if nw == j {
			return old
		}
	}
	return j
}
