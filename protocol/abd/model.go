package abd

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

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
//
// The model runs the seed's every-replica query phases (thrifty=false,
// the default, set here so that the model stays so):
// a thrifty coordinator's choice of the peers it asks first follows the
// ring order of the node names and its round groups, which no renaming of
// nodes keeps, so node symmetry would merge states whose futures differ.
// Nothing is lost by it: a thrifty run is a run of the every-replica
// protocol in which the queries to the peers not asked first are delayed
// until the retransmission (a query changes no replica's state, and an
// answer that comes after its phase has a majority is ignored), and the
// checker delivers messages in every order. The simulator runs thrifty
// queries with --param thrifty=true. peer_pipeline is off in the model
// for the same reason (pipeline.go): a held phase message is a message
// the network delayed, which the checker explores anyway, and its
// per-peer state would only multiply the states.
//
// abd-broken-clientnowriteback's model is ClientDrivenModel: its bug is in
// the client's coordinator, which only client-driven clients run.
func (p protocol) Model() automaton.ModelConfig {
	if p.clientNoWriteBack {
		return ClientDrivenModel()
	}
	return automaton.ModelConfig{SymmetricClients: true, SymmetricNodes: true, Params: map[string]string{"thrifty": "false", "peer_pipeline": "false"}}
}

// ClientDrivenModel is the model of client-driven ABD (coordinator.go, seed
// 001 §3.1.2): 3 replicas; client 1 writes x, client 2 reads x twice, each
// operation run by the client against every replica. A read that returns
// the new value from a majority holding it only at one replica (the write's
// store still in flight) and does not write it back lets the next read's
// majority miss it: new, then old (abd-broken-clientnowriteback, ten
// events). The correct coordinator writes back and is linearizable here.
// No symmetry: the clients' tags carry their writer ids.
func ClientDrivenModel() automaton.ModelConfig {
	get := service.Op{Kind: "get", Key: "x"}
	return automaton.ModelConfig{
		Nodes:        3,
		Clients:      2,
		Scripts:      [][]service.Op{{{Kind: "set", Key: "x", Args: [][]byte{[]byte("1")}}}, {get, get}},
		ClientDriven: true,
		Depth:        14,
		NoTimers:     true,
	}
}
