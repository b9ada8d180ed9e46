package paxos

import (
	"slices"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// MemberModel is the model of paxos-broken-bootquorum (issue 20 item 3;
// the shape of TestBootQuorumVariantDecidesWithTheOldMajority): five
// nodes booted with members=n1,n2,n3, so n4 and n5 run as non-members
// (followers that vote only once an add names them; sim --membership
// boots its spares alike). Client 1 at n1 adds n4 and n5
// (automaton.MemberAdd, as sim's admin client sends them; mc leaves
// membership changes out of the history it checks and of "a write
// completes") and writes "1"; client 3 writes "2" at n3 (client 2 sends
// nothing). Three crashes, lossless unordered bynode delivery, six timer
// firings.
//
// The scripted prefix (memberPrefix, 64 events) is n1's election, the
// two adds with the learners' catch-up (each add's accept follows its
// learner's first heartbeat-ack: the leader proposes an add only once
// the learner has answered) and a heartbeat round that makes
// every replica execute them (all five hold the configuration
// n1..n5), client 1's write, the crashes of n5, n4 and n3 with n1's
// accept delivered while each is down (lost) and their restarts, n2's
// vote reaching n1, and the leader-alive timeouts of n4 and n5 (a
// restarted follower refuses a new ballot until it has not heard a leader
// for a timeout: package doc "Leader election"). The broken n1 counts
// n1+n2, a majority of the bootstrap configuration, and answers "1";
// paxos waits (two of five). The search then finds n3's timeouts, its
// election by n3, n4 and n5 (bynode delivery lets their promises reach
// n3 before n1 or n2 hear the prepare), client 3's write and its phase 2:
// "one value chosen per instance" in 17 events after the prefix, 24,936
// states (mc/FIGURES.md). n3's phase 2 also needs n2's vote in the broken
// variant, which counts bootstrap majorities at n3 too.
//
// Without the prefix the adds alone are about 50 events, beyond any
// breadth-first budget. The prefix is a reduction: the search covers
// only the runs that start with these events, chosen by hand so that the
// losses of the write's accepts at n3, n4 and n5 are crashes (mc's lossy
// network would branch on every message, and paths an order of magnitude
// longer would be needed for the followers to forget n1).
func MemberModel() automaton.ModelConfig {
	return automaton.ModelConfig{
		Nodes:   5,
		Clients: 3,
		Scripts: [][]service.Op{{
			automaton.MemberAdd("n4", "mc:n4", "mc:n4"),
			automaton.MemberAdd("n5", "mc:n5", "mc:n5"),
			modelSet("1"),
		}, {}, {modelSet("2")}},
		Params:  map[string]string{"members": "n1,n2,n3"},
		Target:  "fixed",
		Network: "lossless,unordered,bynode",
		Crashes: 3,
		Timers:  "quiet:6",
		Depth:   20,
		Prefix:  memberPrefix,
	}
}

// memberPrefix is MemberModel's scripted prefix, as mc prints the events.
var memberPrefix = append(slices.Clone(n1LeadsPrefix),
	`client 1 sends synod.member add "n4" "mc:n4" "mc:n4" to n1`,
	"deliver n1 -> n4: heartbeat b=(1,1) commit=0 round=2",
	"deliver n1 -> n3: heartbeat b=(1,1) commit=0 round=2",
	"deliver n1 -> n2: heartbeat b=(1,1) commit=0 round=2",
	"deliver n4 -> n1: heartbeat-ack b=(1,1) ok round=2 commit=0",
	"deliver n1 -> n4: accept b=(1,1) commit=0 [1: member add n4 (peer mc:n4, client mc:n4)]",
	"deliver n1 -> n3: accept b=(1,1) commit=0 [1: member add n4 (peer mc:n4, client mc:n4)]",
	"deliver n1 -> n2: accept b=(1,1) commit=0 [1: member add n4 (peer mc:n4, client mc:n4)]",
	"deliver n4 -> n1: accepted b=(1,1) ok acks=[1]",
	"deliver n3 -> n1: heartbeat-ack b=(1,1) ok round=2 commit=0",
	"deliver n3 -> n1: accepted b=(1,1) ok acks=[1]",
	"deliver n2 -> n1: heartbeat-ack b=(1,1) ok round=2 commit=0",
	"deliver n2 -> n1: accepted b=(1,1) ok acks=[1]",
	`client 1 sends synod.member add "n5" "mc:n5" "mc:n5" to n1`,
	"deliver n1 -> n5: heartbeat b=(1,1) commit=1 round=3",
	"deliver n1 -> n4: heartbeat b=(1,1) commit=1 round=3",
	"deliver n1 -> n3: heartbeat b=(1,1) commit=1 round=3",
	"deliver n1 -> n2: heartbeat b=(1,1) commit=1 round=3",
	"deliver n5 -> n1: heartbeat-ack b=(1,1) ok round=3 commit=0",
	"deliver n1 -> n5: accept b=(1,1) commit=1 [2: member add n5 (peer mc:n5, client mc:n5)]",
	"deliver n1 -> n4: accept b=(1,1) commit=1 [2: member add n5 (peer mc:n5, client mc:n5)]",
	"deliver n1 -> n3: accept b=(1,1) commit=1 [2: member add n5 (peer mc:n5, client mc:n5)]",
	"deliver n1 -> n2: accept b=(1,1) commit=1 [2: member add n5 (peer mc:n5, client mc:n5)]",
	"deliver n5 -> n1: catchup-req 1..1",
	"deliver n1 -> n5: catchup b=(0,0) commit=1 [1: member add n4 (peer mc:n4, client mc:n4)]",
	"deliver n5 -> n1: accepted b=(1,1) ok acks=[2]",
	"deliver n4 -> n1: heartbeat-ack b=(1,1) ok round=3 commit=0",
	"deliver n4 -> n1: accepted b=(1,1) ok acks=[2]",
	"deliver n3 -> n1: heartbeat-ack b=(1,1) ok round=3 commit=0",
	"deliver n3 -> n1: accepted b=(1,1) ok acks=[2]",
	"deliver n2 -> n1: heartbeat-ack b=(1,1) ok round=3 commit=0",
	"deliver n2 -> n1: accepted b=(1,1) ok acks=[2]",
	"n1: timer 1 fires",
	"deliver n1 -> n5: heartbeat b=(1,1) commit=2 round=4",
	"deliver n1 -> n4: heartbeat b=(1,1) commit=2 round=4",
	"deliver n1 -> n3: heartbeat b=(1,1) commit=2 round=4",
	"deliver n1 -> n2: heartbeat b=(1,1) commit=2 round=4",
	"deliver n5 -> n1: heartbeat-ack b=(1,1) ok round=4 commit=1",
	"deliver n4 -> n1: heartbeat-ack b=(1,1) ok round=4 commit=1",
	"deliver n3 -> n1: heartbeat-ack b=(1,1) ok round=4 commit=1",
	"deliver n2 -> n1: heartbeat-ack b=(1,1) ok round=4 commit=1",
	`client 1 sends set x "1" to n1`,
	"n5 crashes",
	`deliver n1 -> n5: accept b=(1,1) commit=2 [3: 1:3 set x "1"]`,
	"n5 restarts",
	"n4 crashes",
	`deliver n1 -> n4: accept b=(1,1) commit=2 [3: 1:3 set x "1"]`,
	"n4 restarts",
	"n3 crashes",
	`deliver n1 -> n3: accept b=(1,1) commit=2 [3: 1:3 set x "1"]`,
	"n3 restarts",
	`deliver n1 -> n2: accept b=(1,1) commit=2 [3: 1:3 set x "1"]`,
	"deliver n2 -> n1: accepted b=(1,1) ok acks=[3]",
	"n5: timer 3 fires",
	"n4: timer 3 fires",
)
