package abd

import (
	"cmp"
	"slices"

	"github.com/synod-dev/synod/automaton"
)

// Node symmetry for the model checker (automaton/modelsym.go, mc's node
// symmetry reduction, issue 20 item 1).
//
// Decision (the ABD report §3.1 is silent: it is about the algorithm, not about
// checking it): ABD's replicas are interchangeable, its coordinators are
// not. A tag (TS, Node, Seq) breaks a tie between two writes with the same
// timestamp by the writers' names (the ABD report §3.1.1, the "writer id"
// extension of the tag; msg.go Tag.Less), so swapping two nodes that both
// coordinate writes may swap which of two concurrent writes wins: the
// renamed state does not have the renamed future, and merging the two
// would be unsound. A node no client sends to never coordinates (no
// retries, no forwarding in the model), so no tag names it, and what tells
// it apart from another such node is only its name: those nodes form the
// one group. With clients at "any" node every node coordinates and there is
// no reduction; with every client at n1 ("first") the other nodes are
// interchangeable (N-1 of N), with fixed targets the nodes no client uses.
//
// What names a node in ABD's state: tags (the store, an operation's
// highest and stored entries, the step's stores and completions, the
// records' and messages' tags, the checker's maps), an operation's replies
// (kept per node position), and the checker's maps keyed by node id.
// Operation ids carry the coordinator's incarnation, drawn from its random
// source; mc seeds interchangeable nodes' sources alike (mc/nodesym.go).

var (
	_ automaton.ModelNodeSymmetry       = protocol{}
	_ automaton.ModelNodeRenamer        = (*ABD)(nil)
	_ automaton.ModelCheckerNodeRenamer = (*checker)(nil)
)

// ModelNodeGroups implements automaton.ModelNodeSymmetry: the nodes no
// client request enters, when there are two or more.
func (protocol) ModelNodeGroups(nodes []automaton.NodeID, entry []bool) [][]int {
	var g []int
	for i := range nodes {
		if i < len(entry) && !entry[i] {
			g = append(g, i)
		}
	}
	if len(g) < 2 {
		return nil
	}
	return [][]int{g}
}

// RenameModelMessage implements automaton.ModelNodeRenamer: a query reply,
// a store and a query-above carry a tag, whose writer is renamed.
func (a *ABD) RenameModelMessage(msg []byte, node *automaton.NodeRenaming) []byte {
	m, err := unmarshal(msg)
	if err != nil || m.Kind != kindQueryReply && m.Kind != kindStore && m.Kind != kindQueryAbove {
		return msg
	}
	if r := node.Name(m.Tag.Node); r != m.Tag.Node {
		m.Tag.Node = r
		return m.marshal()
	}
	return msg
}

// RenameModelRecord implements automaton.ModelNodeRenamer: a register's
// record carries its tag.
func (a *ABD) RenameModelRecord(key string, value []byte, node *automaton.NodeRenaming) []byte {
	if _, ok := registerKey(key); !ok {
		return value
	}
	e, err := unmarshalEntry(value)
	if err != nil {
		return value
	}
	if r := node.Name(e.Tag.Node); r != e.Tag.Node {
		e.Tag.Node = r
		return e.marshal()
	}
	return value
}

// appendReplied appends an operation's replies, permuted as the nodes are
// (node nil: as they are).
func appendReplied(b []byte, replied []bool, node *automaton.NodeRenaming) []byte {
	if node == nil || replied == nil {
		return automaton.AppendModelSlice(b, replied, automaton.AppendModelBool)
	}
	var buf [16]bool
	r := buf[:0]
	if len(replied) > len(buf) {
		r = make([]bool, 0, len(replied))
	}
	r = r[:len(replied)]
	for i, x := range replied {
		r[node.Index(i)] = x
	}
	return automaton.AppendModelSlice(b, r, automaton.AppendModelBool)
}

// renamedNodeKeys appends m's keys to ks in the order of their renamings
// (a renaming is a permutation: the order is total).
func renamedNodeKeys[V any](ks []automaton.NodeID, m map[automaton.NodeID]V, node *automaton.NodeRenaming) []automaton.NodeID {
	if node == nil {
		return appendSortedKeys(ks, m)
	}
	start := len(ks)
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks[start:], func(x, y automaton.NodeID) int { return cmp.Compare(node.ID(x), node.ID(y)) })
	return ks
}
