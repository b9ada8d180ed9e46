package unreplicated

import "github.com/synod-dev/synod/automaton"

// Node symmetry for the model checker (automaton/modelsym.go, mc's node
// symmetry reduction; package doc, "Node symmetry").
//
// The server is the first configured node; every other node only forwards
// to it, and nothing in the protocol orders forwarders: the server tells
// their forwards apart by (sender, incarnation, sequence number), keeps its
// duplicate table in arrival order and answers each forwarder on its own
// link. So the forwarders are interchangeable (clients' targets renamed
// along, which the checker does), entry nodes or not. Node names appear
// only as automaton.NodeID values (the server's id, the duplicate table's
// keys, the invariant checker's maps): messages and records name no node,
// so the reflective fingerprint renames them all
// (automaton.ModelTypedNodeNames). A forwarder's incarnation is drawn from
// its random source, which mc seeds alike for the nodes of a group.

var (
	_ automaton.ModelNodeSymmetry   = protocol{}
	_ automaton.ModelTypedNodeNames = protocol{}
	_ automaton.ModelMessageRenamer = (*Unreplicated)(nil)
)

// ModelNodeGroups implements automaton.ModelNodeSymmetry: the forwarders
// (every node but the first), when there are two or more.
func (protocol) ModelNodeGroups(nodes []automaton.NodeID, entry []bool) [][]int {
	if len(nodes) < 3 {
		return nil
	}
	g := make([]int, 0, len(nodes)-1)
	for i := 1; i < len(nodes); i++ {
		g = append(g, i)
	}
	return [][]int{g}
}

// ModelNodeNamesTyped implements automaton.ModelTypedNodeNames.
func (protocol) ModelNodeNamesTyped() {}

// RenameModelMessage implements automaton.ModelMessageRenamer: no message
// names a node.
func (u *Unreplicated) RenameModelMessage(msg []byte, node *automaton.NodeRenaming) []byte {
	return msg
}

// RenameModelRecord implements automaton.ModelMessageRenamer: no record
// names a node.
func (u *Unreplicated) RenameModelRecord(key string, value []byte, node *automaton.NodeRenaming) []byte {
	return value
}
