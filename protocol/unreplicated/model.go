package unreplicated

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Model implements automaton.ModelDeclarer (issue 20): unreplicated uses
// the default model; unreplicated-broken-dirtytxn declares TxnModel.
func (p protocol) Model() automaton.ModelConfig {
	if !p.dirtyTxn {
		return automaton.ModelConfig{}
	}
	return TxnModel()
}

// TxnModel: one server, two clients. Client 1 runs an interactive
// transaction that writes x and aborts (the model checker's workload steps
// "txn-begin" and "txn-abort", mc/workload.go); client 2 runs one that
// reads x, writes it and commits. The history records each transaction as
// one entry (aborted, committed), and the serializability checker (strict,
// for a linearizable protocol) rejects a committed read of the aborted
// write. unreplicated keeps the write in the transaction's
// workspace (txn.go); unreplicated-broken-dirtytxn writes the shared state
// at once and rolls nothing back.
func TxnModel() automaton.ModelConfig {
	return automaton.ModelConfig{
		Nodes: 1,
		Scripts: [][]service.Op{
			{{Kind: "txn-begin"}, {Kind: "set", Key: "x", Args: [][]byte{[]byte("1")}}, {Kind: "txn-abort"}},
			{{Kind: "txn-begin"}, {Kind: "get", Key: "x"}, {Kind: "set", Key: "x", Args: [][]byte{[]byte("2")}}, {Kind: "txn-commit"}},
		},
		Target: "first",
		Depth:  16,
	}
}
