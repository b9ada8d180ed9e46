package pbdurable

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability/sqlstore"
)

// Model implements automaton.ModelDeclarer (issue 20): the default cluster
// and workload (the kv service, one State object on the database mapping),
// clients on the first primary (n1), and the SQL database declared as an
// executor whose state outlives each effect: the checker keeps the
// database's transactions in the state and re-applies them to a fresh
// in-memory database before each one (mc/effect.go).
func (protocol) Model() automaton.ModelConfig {
	return automaton.ModelConfig{Target: "first", StatefulEffects: []string{sqlstore.EffectKind}}
}
