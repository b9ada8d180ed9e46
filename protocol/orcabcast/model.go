package orcabcast

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Model implements automaton.ModelDeclarer (issue 20). orca-bcast and
// orca-bcast-broken-fifo use the default model; the missing recovery of
// orca-bcast-broken-norecovery shows only after a sequencer crash and an
// election, so it declares SequencerCrashModel.
func (p protocol) Model() automaton.ModelConfig {
	if p.norecovery {
		return SequencerCrashModel()
	}
	return automaton.ModelConfig{}
}

// SequencerCrashModel: client 1 writes "1" at n1 (the first sequencer),
// client 3 writes "2" at n3 (client 2 has nothing to send); elect_after=1,
// so a member stands after two or three silent ticks; up to three timer
// firings at any moment (all:3: one member's suspicion); one crash; nodes
// drain their inboxes from the highest-numbered one (mc's bynode
// network). The scripted prefix (mc's ModelConfig.Prefix) is the first
// update's whole life at the old sequencer: n1 numbers it 1, n2 and n3
// hold it, n1 hears n3's ack (r+1 = 2 holders), delivers it, answers
// client 1 and sends its commit point; n1 crashes (its commit to n3 and
// n2's ack still in flight), and client 3 sends its write to n3, which
// waits for a sequencer. The search chooses who suspects n1, when, and
// what the members hear before and after the election.
//
// orca-bcast-broken-norecovery: n3 takes the commit and delivers update 1;
// n2 stands (ballot 1) and n3's promise carries update 1, but the broken
// sequencer numbers from its own applied count (0): "sequencer-ahead"
// (n3 handled 1 update, the sequencer of ballot 1 assigned none), 18
// events, 8 after the prefix, 2,679 states. orca-bcast in the same model
// recovers update 1 from the promise and, one event deeper, answers
// client 3 (mc's TestSequencerCrashModel). The prefix is a reduction: the
// search covers only runs in which update 1 is delivered by n1 before it
// crashes; from the initial state (--no-prefix) breadth-first search
// finds a shorter run (n2 stands while n1 is up, 9 events) only after
// 73,222 states, beyond CI's budget.
func SequencerCrashModel() automaton.ModelConfig {
	return automaton.ModelConfig{
		Nodes:   3,
		Clients: 3,
		Scripts: [][]service.Op{{set("1")}, {}, {set("2")}},
		Params:  map[string]string{"elect_after": "1"},
		Target:  "fixed",
		Network: "lossless,unordered,bynode",
		Timers:  "all:3",
		Crashes: 1,
		Depth:   12,
		Prefix: []string{
			`client 1 sends set x "1" to n1`,
			`deliver n1 -> n3: ordered b=0 n=1 c=0 1:1@1 set x "1"`,
			`deliver n1 -> n2: ordered b=0 n=1 c=0 1:1@1 set x "1"`,
			`deliver n2 -> n1: fetch b=0 n=0 c=0`,
			`deliver n1 -> n2: ordered b=0 n=1 c=0 1:1@1 set x "1"`,
			`deliver n3 -> n1: fetch b=0 n=0 c=0`,
			`deliver n1 -> n3: ordered b=0 n=1 c=0 1:1@1 set x "1"`,
			`deliver n3 -> n1: ack b=0 n=1 c=0`,
			`n1 crashes`,
			`client 3 sends set x "2" to n3`,
		},
	}
}

func set(v string) service.Op {
	return service.Op{Kind: "set", Key: "x", Args: [][]byte{[]byte(v)}}
}
