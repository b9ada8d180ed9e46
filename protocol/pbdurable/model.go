package pbdurable

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability/sqlstore"
	"github.com/synod-dev/synod/service"
)

// Model implements automaton.ModelDeclarer (issue 20): the default cluster
// and workload (the kv service, one State object on the database mapping),
// clients on the first primary (n1), and the SQL database declared as an
// executor whose state outlives each effect: the checker keeps the
// database's transactions in the state and re-applies them to a fresh
// in-memory database before each one (mc/effect.go).
//
// The broken variant noprepare is wrong only when a request touches both
// mechanisms and a backup takes over between the prepare and the commit:
// its model is kv under mapping pbdb (State replicated, Replies in the
// database), one client's one write, two timer firings (the senior
// backup's failure detector), the bynode reduction. Found in about 1,800
// states: the backups applied the write, its transaction has not run, n2
// takes over and holds it.
//
// Every model runs suspect_checks=1 (the seed's detector: a take-over
// after one silent check period): the checker fires a backup's timer
// only as an event among others, a take-over from a live primary is
// what the simulator's slow-disk scenarios cover, and one silent period
// keeps take-overs within the bounded search (the noprepare variant is
// found with two timer firings, as before session 45's default of 3).
func (p protocol) Model() automaton.ModelConfig {
	m := automaton.ModelConfig{Target: "first", StatefulEffects: []string{sqlstore.EffectKind},
		Params: map[string]string{"suspect_checks": "1"}}
	if p.noPrepare {
		m.Params["mapping"] = "pbdb"
		m.Clients, m.Timers, m.Network = 1, "quiet:2", "lossless,unordered,bynode"
		m.Scripts = [][]service.Op{{{Kind: "set", Key: "x", Args: [][]byte{[]byte("1")}}}}
	}
	return m
}
