package abd

import "github.com/synod-dev/synod/automaton"

// Model implements automaton.ModelDeclarer (issue 20): the default cluster
// and workload, with clients declared interchangeable. ABD's messages and
// records carry tags (timestamp, node, op counter), keys and values, never
// a client id, and its automata keep client ids only as RequestID values:
// the checker may merge states that differ by a renaming of clients with
// equal scripts (mc/symmetry.go). The default scripts differ (client c
// writes "c"), so the reduction shows in models whose clients write the
// same value (mc's TestSymmetryReduces). Nodes are declared
// interchangeable too: those no client sends to are (modelsym.go), so the
// reduction applies with clients at one node (--target first) and not to
// the default fixed targets, which leave only n3 free.
func (protocol) Model() automaton.ModelConfig {
	return automaton.ModelConfig{SymmetricClients: true, SymmetricNodes: true}
}
