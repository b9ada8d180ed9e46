package automaton

// Node symmetry for the model checker (package mc, issue 20 item 1). A
// protocol whose nodes are interchangeable in its model lets the checker
// treat two states that differ only by a renaming of those nodes as one
// state, as Stateright's symmetry reduction does (its Representative and
// Rewrite traits: a state is rewritten under a plan that renames actor
// ids). Synod's checker never builds the renamed state: it encodes a state
// as the renamed state would encode, for each renaming of the
// interchangeable nodes, and keeps the least hash (mc/nodesym.go). So a
// protocol says which nodes are interchangeable and how node names appear
// in its automaton's state, its invariant checker's, its messages and its
// records; everything else (which node is where, messages' senders and
// receivers, timers, client targets, crashes) the checker renames itself.
//
// The renaming must map reachable states to states with the same future
// up to the renaming: a protocol that orders nodes by name (ABD's tags
// break ties by the writer's name) has nodes that are not interchangeable
// where that order decides something, and says so in ModelNodeGroups.

// NodeRenaming is a permutation of a model's nodes: Perm[i] is the new
// position of the node at position i of IDs (the model's Config.Nodes).
// A nil *NodeRenaming renames nothing.
type NodeRenaming struct {
	IDs  []NodeID
	Perm []int
}

// Index renames a node position.
func (r *NodeRenaming) Index(i int) int {
	if r == nil || i < 0 || i >= len(r.Perm) {
		return i
	}
	return r.Perm[i]
}

// ID renames a node id (an id that is not a node stays as it is).
func (r *NodeRenaming) ID(id NodeID) NodeID {
	if r == nil {
		return id
	}
	for i, x := range r.IDs {
		if x == id {
			return r.IDs[r.Perm[i]]
		}
	}
	return id
}

// Name renames a node id held as a string.
func (r *NodeRenaming) Name(s string) string { return string(r.ID(NodeID(s))) }

// ModelNodeSymmetry is implemented by protocols (the registered value)
// whose nodes may be interchangeable in a model, with ModelConfig.
// SymmetricNodes set.
type ModelNodeSymmetry interface {
	// ModelNodeGroups returns the groups of interchangeable nodes
	// (positions in nodes, two or more per group; nil: none), given
	// which nodes a client request may enter the system at (entry[i]:
	// some client sends to node i). The checker permutes client targets
	// along with the nodes, so entry nodes may be interchangeable too
	// when nothing in the protocol orders them.
	ModelNodeGroups(nodes []NodeID, entry []bool) [][]int
}

// ModelNodeRenamer is implemented by automata (with the fast path,
// ModelStater) that can encode their state with node names renamed.
type ModelNodeRenamer interface {
	// AppendRenamedModelState is ModelStater.AppendModelState with every
	// node the state names (ids, and positions in Config.Nodes such as a
	// quorum's replies) renamed by node; with node nil it appends exactly
	// what AppendModelState appends. The automaton's own identity is not
	// encoded: the checker puts the encoding at the renamed position.
	AppendRenamedModelState(b []byte, rename func(RequestID) RequestID, node *NodeRenaming) []byte
	ModelMessageRenamer
}

// ModelMessageRenamer renames the nodes a protocol's messages and records
// name.
type ModelMessageRenamer interface {
	// RenameModelMessage returns msg (a message this protocol sent) as
	// the renamed state would carry it: msg itself when it names no node
	// (not modified in place).
	RenameModelMessage(msg []byte, node *NodeRenaming) []byte
	// RenameModelRecord is the same for a durable record's value.
	RenameModelRecord(key string, value []byte, node *NodeRenaming) []byte
}

// ModelTypedNodeNames is implemented by protocols (the registered value,
// with ModelNodeSymmetry) whose automata have no fast path and whose
// automata and invariant checker name nodes only in values of type NodeID
// (fields, map keys, elements): never in a plain string, in bytes, or by
// a position in Config.Nodes. The checker's reflective fingerprint then
// renames those values itself (mc/nodesym.go); the automata implement
// ModelMessageRenamer for what their messages and records name. A NodeID
// the protocol keeps in any other form makes the reduction unsound, so a
// protocol declaring this has a test comparing renamed runs (mc's
// TestNodeSymmetrySound).
type ModelTypedNodeNames interface {
	ModelNodeNamesTyped()
}

// ModelCheckerNodeRenamer is implemented by invariant checkers (with
// ModelCheckerStater) that can encode their memory with nodes renamed;
// ref's positions are renamed by the checker before it returns them.
type ModelCheckerNodeRenamer interface {
	AppendRenamedModelState(b []byte, ref func(Automaton) int, rename func(RequestID) RequestID, node *NodeRenaming) []byte
}
