package esds

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Model implements automaton.ModelDeclarer (issue 20). esds and its other
// variants use the default model; esds-broken-maxlabel declares
// SentToAllModel and esds-broken-earlystrict StrictModel.
func (p protocol) Model() automaton.ModelConfig {
	switch {
	case p.maxLabel:
		return SentToAllModel()
	case p.earlyStrict:
		return StrictModel()
	}
	return automaton.ModelConfig{}
}

// SentToAllModel: one client writes once at n1, whose front end sends the
// operation to every replica (param send=all, the ESDS thesis §4.2.4's send
// policy), so that two replicas label it (do_it, Fig. 4.2) with labels of
// their own; one gossip round (a timer budget of 1). esds-broken-maxlabel
// merges the gossiped label by maximum: n1's label of the operation goes
// up ("labels only decrease").
func SentToAllModel() automaton.ModelConfig {
	return automaton.ModelConfig{
		Nodes:   3,
		Clients: 1,
		Scripts: [][]service.Op{{{Kind: "set", Key: "x", Args: [][]byte{[]byte("1")}}}},
		Params:  map[string]string{"send": "all"},
		Target:  "first",
		Timers:  "quiet:1",
		Depth:   10,
	}
}

// StrictModel: two replicas; client 1 writes x at n1, client 2 reads x at
// n2 with the strict flag (automaton.OptStrict, the ESDS thesis §2's strict
// operation: its answer must be its value in the eventual total order).
// Every request carries its op id (AssignedOpID, as the edges fill it
// in), by which mc's strict check (mc/workload_esds.go) finds the
// operation in a replica's stable order (StableOrder). Gossip rounds are
// timers: a budget of 4 lets the read become stable at both replicas, so
// that esds answers it (send_{r,f}'s precondition, Fig. 4.2: the
// operation is in every replica's solid set) and the search reaches the
// strict answer. esds-broken-earlystrict answers the read at once, before
// n1's write, labelled first, is known to n2: the answer (nil) is not
// the read's value in the order ("1").
func StrictModel() automaton.ModelConfig {
	return automaton.ModelConfig{
		Nodes: 2,
		Scripts: [][]service.Op{
			{{Kind: "set", Key: "x", Args: [][]byte{[]byte("1")}}},
			{{Kind: "get", Key: "x"}},
		},
		Requests: func(client, i int, op service.Op) automaton.Request {
			r := automaton.Request{Op: op}
			r.Opts.Set(automaton.OptOpID, []string{AssignedOpID(automaton.RequestID{Client: uint64(client), Seq: uint64(i + 1)})})
			if client == 2 {
				r.Opts.Set(automaton.OptStrict, automaton.BoolOption(true))
			}
			return r
		},
		Timers: "quiet:4",
		Depth:  20,
	}
}

// StableOrder returns the ids of the operations this replica applied to
// its stable state, in order, when RecordOrder was called before Start
// (nil otherwise): a prefix of the eventual total order that never changes
// (stable, the ESDS thesis §4.2.3), by which the model checker judges strict
// answers as soon as their operation is stable. The caller must not
// change it.
func (a *ESDS) StableOrder() []string { return a.orderLog }
