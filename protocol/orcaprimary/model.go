package orcaprimary

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/service"
)

// Model implements automaton.ModelDeclarer (issue 20). orca-primary uses
// the default model; orca-primary-broken-earlyunlock shows only on an
// object with two secondary copies, so it declares CopiesModel.
func (p protocol) Model() automaton.ModelConfig {
	if !p.earlyUnlock {
		return automaton.ModelConfig{}
	}
	return CopiesModel()
}

// CopiesModel: the orca object service (the Orca paper), with a copy made at
// the first remote read (replicate_after=1). Client 1 at n1 creates int x
// and assigns it; clients 2 and 3 read it at n2 and n3, which then fetch
// secondary copies; the assignment is a two-phase update (§3.2) of both.
// orca-primary-broken-earlyunlock: one secondary unlocks at the new
// version while the other still serves the old one (readable-copies-agree).
// The scenario of TestBrokenEarlyUnlockCaught, every interleaving of it.
func CopiesModel() automaton.ModelConfig {
	return automaton.ModelConfig{
		Nodes:   3,
		Service: orca.ServiceName,
		Params:  map[string]string{"replicate_after": "1"},
		Scripts: [][]service.Op{
			{orca.New("int", "x"), orca.Call("int", "x", "assign", orca.Int(1))},
			{orca.Call("int", "x", "value")},
			{orca.Call("int", "x", "value")},
		},
		Target:   "fixed",
		NoTimers: true,
		Depth:    24,
	}
}
