package pbpaxos

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Model implements automaton.ModelDeclarer (issue 20). pbpaxos itself uses
// the default model; both broken variants show with one X-Paxos read
// around n1's first takeover, so they declare ReadModel.
func (p protocol) Model() automaton.ModelConfig {
	if !p.earlyServe && !p.noConfirm {
		return automaton.ModelConfig{}
	}
	return ReadModel()
}

// ReadModel is the smallest model of an X-Paxos read (VI.A.3) at a new
// leader: one client reads x once, fanned out to every replica; one timer
// firing (quiet:1), which is the first takeover (VI.B Protocol 1, New
// leader) when it is an election timeout. No leader change is needed:
//
//   - pbpaxos-broken-earlyserve: n1 is elected (its no-op batch at
//     instance 1 in flight), the read reaches n1, which executes it at
//     once; n2 accepts the batch (its highest accepted ballot is now
//     n1's), gets the read and confirms it to n1; n1 answers with two
//     confirms while instance 1 is unapplied (serve-after-takeover), in 8
//     events. A write would not show it: with pipeline=1 nothing new is
//     proposed before the batch is applied, so only a read is served early.
//   - pbpaxos-broken-noconfirm: once n1 applied its batch, the read's copy
//     at n1 is answered with n1's confirm alone (reads-confirmed).
func ReadModel() automaton.ModelConfig {
	return automaton.ModelConfig{
		Nodes:   3,
		Clients: 1,
		Scripts: [][]service.Op{{{Kind: "get", Key: "x"}}},
		Target:  "first",
		Timers:  "quiet:1",
		Depth:   12,
	}
}
