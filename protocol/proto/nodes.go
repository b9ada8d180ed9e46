package proto

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
)

// Index returns id's position in nodes, or -1.
func Index(nodes []automaton.NodeID, id automaton.NodeID) int {
	for i, n := range nodes {
		if n == id {
			return i
		}
	}
	return -1
}

// Positions indexes a configuration's node list: each node's position in
// it (what the protocols call a replica id or a node index), and self's.
// A node listed twice and a self not among the nodes are errors, prefixed
// with who (the protocol's name).
func Positions(who string, nodes []automaton.NodeID, self automaton.NodeID) (map[automaton.NodeID]int, int, error) {
	pos := make(map[automaton.NodeID]int, len(nodes))
	me := -1
	for i, n := range nodes {
		if _, dup := pos[n]; dup {
			return nil, -1, fmt.Errorf("%s: node %s listed twice", who, n)
		}
		pos[n] = i
		if n == self {
			me = i
		}
	}
	if me < 0 {
		return nil, -1, fmt.Errorf("%s: self %s is not among the nodes %v", who, self, nodes)
	}
	return pos, me, nil
}
