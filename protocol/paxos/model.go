package paxos

import (
	"slices"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Model implements automaton.ModelDeclarer (issue 20). paxos and its other
// variants use the default model. paxos-broken-skipphase1values shows
// only across a leader change after an accepted value, so its model is
// LeaderChangeModel: the checker finds the lost write (invariant "one
// value chosen per instance") in 21 events; paxos-broken-earlyack
// declares CrashBeforeFsyncModel, paxos-broken-answerearly,
// paxos-broken-relayall and paxos-broken-unpinone AnswerEarlyModel, paxos-broken-stickyleader
// DeadLeaderModel, paxos-broken-nestedread NestedReadModel and
// paxos-broken-splitgroup GroupModel (model_workload.go),
// paxos-broken-bootquorum MemberModel (model_member.go).
func (p protocol) Model() automaton.ModelConfig {
	switch {
	case p.skipPhase1Values:
		return LeaderChangeModel()
	case p.Protocol == BrokenEarlyAck:
		return CrashBeforeFsyncModel()
	case p.Protocol == BrokenAnswerEarly, p.Protocol == BrokenRelayAll, p.Protocol == BrokenUnpinOne:
		return AnswerEarlyModel() // relayall's and unpinone's answers leave before the leader's vote is durable too
	case p.stickyLeader:
		return DeadLeaderModel()
	case p.nestedRead:
		return NestedReadModel()
	case p.splitGroups:
		return GroupModel()
	case p.bootQuorum:
		return MemberModel()
	}
	return automaton.ModelConfig{}
}

// CrashBeforeFsyncModel is the model of paxos-broken-earlyack: one crash
// that may fall between a step's Early Send and the fsync of its records
// (mc's CrashBeforeFsync). Client 1 writes "1" at n1, client 3 writes "2"
// at n3 (client 2 has nothing to send). The scripted prefix is n1's
// election, n3's vote for "1" (its Accepted in flight, Early in the broken
// variant), n2's leader-alive timeout, n3's crash before its fsync (the
// vote is lost), its restart, and client 3's write at n3. The search then
// finds n3 elected with n2's promise (its prepare reaching n2 before n1's
// Accept), choosing "2" at instance 1 while n1 counts n3's old vote for
// "1" ("one value chosen per instance"): 22 events, 12 after the prefix,
// 28,196 states. paxos cannot run this model: its n3's Accepted waits for
// the fsync, so the prefix's crash is not enabled (a configuration error
// naming it; mc's TestCrashBeforeFsync). The prefix is a reduction: the
// search covers only runs that start with that crash.
func CrashBeforeFsyncModel() automaton.ModelConfig {
	m := LeaderChangeModel()
	m.Crashes, m.CrashBeforeFsync = 1, true
	m.Network, m.Timers, m.Depth = "lossless,unordered,bynode", "all:4", 12
	m.Clients, m.Target = 3, "fixed"
	m.Scripts = [][]service.Op{{modelSet("1")}, {}, {modelSet("2")}}
	m.Prefix = slices.Concat([]string{`client 1 sends set x "1" to n1`}, n1ElectedPrefix, []string{
		"deliver n1 -> n3: heartbeat b=(1,1) commit=0 round=1",
		`deliver n1 -> n3: accept b=(1,1) commit=0 [1: 1:1 set x "1"]`,
		"n2: timer 3 fires",
		"n3 crashes before its fsync, losing 1 unsynced record(s)",
		"n3 restarts",
		`client 3 sends set x "2" to n3`,
	})
	return m
}

// LeaderChangeModel is the smallest model with a leader change after a
// chosen value: one client writes once at n1 (the first leader); a timer
// budget of 4 is n1's election, then n2's and n3's leader-alive timers
// (stable leader: a follower promises no one else while it hears a
// leader, package doc "Leader election") and one election timeout; the
// nodes drain their inboxes from the highest-numbered one (mc's bynode
// network), which leaves the old leader n1 hearing the new ballot last.
func LeaderChangeModel() automaton.ModelConfig {
	return automaton.ModelConfig{
		Nodes:   3,
		Clients: 1,
		Scripts: [][]service.Op{{modelSet("1")}},
		Target:  "first",
		Network: "lossless,unordered,bynode",
		Timers:  "quiet:4",
		Depth:   24,
	}
}

func modelSet(v string) service.Op {
	return service.Op{Kind: "set", Key: "x", Args: [][]byte{[]byte(v)}}
}

// DeadLeaderModel is the model of paxos-broken-stickyleader, a liveness
// bug: client 2 writes "2" at n2 (client 1 has nothing to send); one
// crash; four timer firings when no message is in flight (quiet:4), the
// first n1's election in the prefix; bynode delivery. The scripted prefix
// (mc's ModelConfig.Prefix) is n1's election and first heartbeat round
// (n2 and n3 hear n1 as leader), n1's crash, and client 2's write at n2,
// which n2 forwards to the dead n1. paxos answers it (n2's or n3's
// leader-alive timer expires, an election timeout, phase 1 and 2 with the
// other survivor) 20 events in, 9 after the prefix, and exhausts the
// model in 1,277 states; paxos-broken-stickyleader's followers never give
// up on n1, so the model is exhausted (238 states) with the write never
// answered. The model requires progress (ModelConfig.Progress: "a write
// completes"), so that is a violation (mc/progress.go); the bounded
// eventually alone would not judge these paths (n1's restart stays
// enabled and the timer budget ends every path).
func DeadLeaderModel() automaton.ModelConfig {
	return automaton.ModelConfig{
		Nodes:   3,
		Clients: 2,
		Scripts: [][]service.Op{{}, {modelSet("2")}},
		Target:  "fixed",
		Network: "lossless,unordered,bynode",
		Timers:  "quiet:4",
		Crashes: 1,
		Depth:   30,
		// mc.SomeWrite: no path of the exhausted model answering the
		// write is the bug.
		Progress: []string{"a write completes"},
		Prefix: append(slices.Clone(n1LeadsPrefix),
			"n1 crashes",
			`client 2 sends set x "2" to n2`,
		),
	}
}

// n1ElectedPrefix is a scripted start shared by models (mc's ModelConfig.
// Prefix, events as mc prints them): n1's election timer fires, its
// prepares reach n3 and n2, and n3's promise elects n1.
var n1ElectedPrefix = []string{
	"n1: timer 2 fires",
	"deliver n1 -> n3: prepare b=(1,1) from=1",
	"deliver n1 -> n2: prepare b=(1,1) from=1",
	"deliver n3 -> n1: promise b=(1,1) ok commit=0",
}

// n1LeadsPrefix is n1ElectedPrefix followed by n2's promise and a first
// heartbeat round that reaches both followers and is acknowledged, so both
// have heard n1 as leader.
var n1LeadsPrefix = append(slices.Clone(n1ElectedPrefix),
	"deliver n1 -> n3: heartbeat b=(1,1) commit=0 round=1",
	"deliver n1 -> n2: heartbeat b=(1,1) commit=0 round=1",
	"deliver n2 -> n1: promise b=(1,1) ok commit=0",
	"deliver n3 -> n1: heartbeat-ack b=(1,1) ok round=1 commit=0",
	"deliver n2 -> n1: heartbeat-ack b=(1,1) ok round=1 commit=0",
)

// AnswerEarlyModel is the model of paxos-broken-answerearly: crashes
// before an fsync (mc's CrashBeforeFsync, whose window spans steps and
// follows positioned answers, mc/unsynced.go). Client 1 writes "1" at n1,
// client 2 then reads x at n2. The scripted prefix is n1's election, its
// Accept reaching n3 and n3's Accepted reaching n1, which chooses instance
// 1 and answers client 1 (the broken variant's answer did not wait for
// n1's acceptance), n1's crash before its fsync, losing its acceptance and
// the chosen-prefix record, and its restart. The search then finds n2
// elected with n1's promise and its read of x answered without "1": 20
// events, 10 after the prefix, 16,835 states (mc's TestAnswerEarly). paxos
// cannot run this prefix: its answer waited for the acceptance, so n1's
// crash before its fsync loses the chosen-prefix record only.
func AnswerEarlyModel() automaton.ModelConfig {
	m := LeaderChangeModel()
	m.Crashes, m.CrashBeforeFsync = 1, true
	m.Network, m.Timers, m.Depth = "lossless,unordered", "all:3", 10
	m.Clients, m.Target = 2, "fixed"
	m.Scripts = [][]service.Op{{modelSet("1")}, {{Kind: "get", Key: "x"}}}
	m.Prefix = slices.Concat([]string{`client 1 sends set x "1" to n1`}, n1ElectedPrefix, []string{
		"deliver n1 -> n3: heartbeat b=(1,1) commit=0 round=1",
		`deliver n1 -> n3: accept b=(1,1) commit=0 [1: 1:1 set x "1"]`,
		"deliver n3 -> n1: accepted b=(1,1) ok acks=[1]",
		"n1 crashes before its fsync, losing 2 unsynced record(s)",
		"n1 restarts",
	})
	return m
}
