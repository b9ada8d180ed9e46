package mc

import (
	"slices"

	"github.com/synod-dev/synod/automaton"
)

// Symmetry reduction over nodes (issue 20 item 1; ModelConfig.
// SymmetricNodes with a protocol implementing automaton.ModelNodeSymmetry,
// automaton/modelsym.go). A state's fingerprint is the least hash over the
// renamings of each group of interchangeable nodes (combined with the
// client renamings of symmetry.go): every node-indexed part of the state
// is hashed at its renamed position (automata, records, timers, effects,
// boots), messages with their sender and receiver renamed and their bytes
// rewritten by the protocol (RenameModelMessage), records likewise
// (RenameModelRecord), client targets renamed, and the automata and the
// invariant checker encoded with the renaming (AppendRenamedModelState).
// The history names no node; crashes and timer firings are counted, not
// placed. So a state and each of its renamings hash alike, and states
// that are not renamings of each other (up to hash collisions) do not
// (TestNodeSymmetrySound checks both against states built by replaying
// renamed paths).
//
// Decisions:
//   - Least hash over all permutations of a group, not a sort-based
//     representative as Stateright's RewritePlan::from_values_to_sort (a
//     sort of the actors' states, whose ids make it miss some renamings):
//     the groups are small (N-1 of 3-5 nodes), and the least hash is
//     canonical, which the soundness test can then demand exactly.
//   - The renamed encodings are the fast path's (automaton.ModelStater
//     with ModelNodeRenamer, the checker with ModelCheckerNodeRenamer), or
//     the reflective walk's for a protocol that names nodes only in
//     automaton.NodeID values (automaton.ModelTypedNodeNames: the walk
//     renames every NodeID it meets, and a reference to node i's automaton
//     as one to its renamed position; unreplicated). The reflective walk
//     cannot tell a node name in a plain string from any other string, so
//     any other protocol without a renamed encoding gets no reduction; nor
//     does any with Config.Reflective.
//   - Off on a bynode network (it orders inboxes by node number), with
//     stateful effect executors (their log is not renamed) and with
//     crashes before fsync (unsynced records are not renamed).
//   - A node's random source is seeded by its position and boot count
//     (world.boot); interchangeable nodes are seeded as the first of
//     their group, so that nothing random tells them apart (ABD's first
//     incarnation is drawn from it).
//   - The identity renaming uses the cached hashes; every other renaming
//     re-encodes the whole state, so the reduction costs (|group|!-1)
//     full encodings per state: worth it when it merges that many.

// nodeSymmetryGroups returns the groups of interchangeable nodes the
// search may reduce (nil: none), and those the protocol declares (which
// seed the nodes' random sources, reduced or not).
func (w *world) nodeSymmetryGroups() (reduce, declared [][]int) {
	declared = w.declaredNodeGroups()
	cfg := w.cfg
	if cfg.Reflective || cfg.Net.ByNode || cfg.CrashBeforeFsync || len(cfg.Model.StatefulEffects) > 0 {
		return nil, declared
	}
	if w.checker != nil && !w.typedNodeNames() {
		if _, ok := w.checker.(automaton.ModelCheckerNodeRenamer); !ok {
			return nil, declared
		}
		if _, ok := w.checker.(automaton.ModelCheckerStater); !ok {
			return nil, declared
		}
	}
	return declared, declared
}

// declaredNodeGroups asks the protocol which nodes are interchangeable,
// given where client requests enter.
func (w *world) declaredNodeGroups() [][]int {
	cfg := w.cfg
	if !cfg.Model.SymmetricNodes || len(w.ids) < 2 {
		return nil
	}
	ns, ok := w.proto.(automaton.ModelNodeSymmetry)
	if !ok {
		return nil
	}
	entry := make([]bool, len(w.ids))
	switch {
	case w.fanout || cfg.Model.Target == "any":
		for i := range entry {
			entry[i] = true
		}
	default:
		for c := range w.clients {
			entry[w.clients[c].target] = true
		}
	}
	var groups [][]int
	for _, g := range ns.ModelNodeGroups(slices.Clone(w.ids), entry) {
		if len(g) > 1 {
			groups = append(groups, slices.Clone(g))
		}
	}
	return groups
}

// typedNodeNames reports whether the protocol names nodes only in
// automaton.NodeID values (automaton.ModelTypedNodeNames): its automata
// and checker are then hashed renamed by reflection.
func (w *world) typedNodeNames() bool {
	_, ok := w.proto.(automaton.ModelTypedNodeNames)
	return ok
}

// checkNodeRenamers drops the node groups when the booted automata cannot
// encode themselves renamed (the fast path's renamed encoding, or the
// reflective walk's for typed node names), and keeps one to rename
// messages and records with (any node's will do: they are one protocol's).
func (w *world) checkNodeRenamers() {
	typed := w.typedNodeNames()
	for i := range w.nodes {
		if a := w.nodes[i].a; a != nil {
			_, fast := a.(automaton.ModelNodeRenamer)
			_, s := a.(automaton.ModelStater)
			r, ok := a.(automaton.ModelMessageRenamer)
			if !ok || !(fast && s) && !(typed && !s) {
				w.nodeGroups, w.symRenamer = nil, nil
				return
			}
			w.symRenamer = r
		}
	}
}

// seedNode is the position whose random source node i uses: the first
// of its symmetry group.
func (w *world) seedNode(i int) int {
	for _, g := range w.seedGroups {
		if slices.Contains(g, i) {
			return g[0]
		}
	}
	return i
}

// nodeRenamings calls f with each renaming of the interchangeable nodes
// (nil for the identity).
func (w *world) nodeRenamings(f func(r *automaton.NodeRenaming, inv []int)) {
	if w.nodeGroups == nil {
		f(nil, nil)
		return
	}
	r := &automaton.NodeRenaming{IDs: w.ids}
	inv := make([]int, len(w.ids))
	forEachPerm(len(w.ids), w.nodeGroups, func(perm []int) {
		ident := true
		for i, p := range perm {
			inv[p] = i
			ident = ident && p == i
		}
		if ident {
			f(nil, nil)
			return
		}
		r.Perm = perm
		f(r, inv)
	})
}

// renamedNodeHash hashes node i's automaton encoded with nodes renamed:
// its own renamed encoding, or by reflection with typed node names.
func (w *world) renamedNodeHash(hs *hasher, i int, r *automaton.NodeRenaming) uint64 {
	a, ok := w.nodes[i].a.(automaton.ModelNodeRenamer)
	if !ok {
		rh := &hasher{perm: hs.perm, w: w, node: r}
		return rh.prepare().sum(w.nodes[i].a, i)
	}
	return encodedHash(func(b []byte) []byte { return a.AppendRenamedModelState(b, hs.rename(), r) })
}

// renamedDiskSum is node i's records hash with nodes renamed.
func (w *world) renamedDiskSum(i int, r *automaton.NodeRenaming) uint64 {
	n := &w.nodes[i]
	var sum uint64
	for k, v := range n.disk {
		sum += diskEntryHash(k, w.symRenamer.RenameModelRecord(k, v, r))
	}
	return sum
}

// renamedMsgHash is msgHash of m with nodes renamed.
func (w *world) renamedMsgHash(m *message, perm []int, r *automaton.NodeRenaming) uint64 {
	x := *m
	if x.from >= 0 {
		x.from = r.Index(x.from)
	}
	x.to = r.Index(x.to)
	if x.req == nil {
		x.data = w.symRenamer.RenameModelMessage(x.data, r)
	}
	return msgHash(&x, perm)
}

// renamedCheckerHash hashes the checker encoded with nodes renamed (by
// reflection for a protocol with typed node names).
func (w *world) renamedCheckerHash(hs *hasher, r *automaton.NodeRenaming) uint64 {
	cs, ok := w.checker.(automaton.ModelCheckerNodeRenamer)
	if !ok {
		rh := &hasher{perm: hs.perm, w: w, node: r}
		return rh.prepare().sum(w.checker, -1)
	}
	ref := func(a automaton.Automaton) int { return r.Index(w.ref(a)) }
	return encodedHash(func(b []byte) []byte { return cs.AppendRenamedModelState(b, ref, hs.rename(), r) })
}
