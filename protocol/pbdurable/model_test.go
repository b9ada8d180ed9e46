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
	for _, name := range []string{Name, BrokenReplyBeforeDB, BrokenNoPrepare} {
		m := automaton.ModelOf(name)
		if !slices.Contains(m.StatefulEffects, sqlstore.EffectKind) || m.Target != "first" || m.Nodes != 3 {
			t.Errorf("%s: model %+v", name, m)
		}
	}
	// noprepare is wrong only where a request touches both mechanisms.
	if m := automaton.ModelOf(BrokenNoPrepare); m.Params["mapping"] != "pbdb" {
		t.Errorf("%s: model params %v, want mapping pbdb", BrokenNoPrepare, m.Params)
	}
}
