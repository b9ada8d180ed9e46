package abd

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
)

// TestModel: abd and its broken variants declare interchangeable clients
// and otherwise keep the default model (the broken variants' shortest
// counterexamples in mc/FIGURES.md are found in it).
func TestModel(t *testing.T) {
	for _, name := range []string{"abd", "abd-broken-nowriteback", "abd-broken-nowriterid"} {
		m := automaton.ModelOf(name)
		if !m.SymmetricClients || m.Nodes != 3 || m.Clients != 2 || m.Scripts != nil || m.Target != "" {
			t.Errorf("%s: model %+v", name, m)
		}
	}
}
