package pbdurable

import (
	"slices"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability/sqlstore"
)

// TestModel: the declared model keeps the database's state in the checked
// state (without it, sibling states would share one database).
func TestModel(t *testing.T) {
	for _, name := range []string{Name, BrokenReplyBeforeDB} {
		m := automaton.ModelOf(name)
		if !slices.Contains(m.StatefulEffects, sqlstore.EffectKind) || m.Target != "first" || m.Nodes != 3 {
			t.Errorf("%s: model %+v", name, m)
		}
	}
}
