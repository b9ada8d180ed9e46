package paxos

import (
	"slices"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Models of the model checker's client workloads (issue 20 item 3;
// mc/workload.go): resent copies of a nested request, and the matchmaker
// service with the convergence check.

// NestedReadModel is the model of paxos-broken-nestedread: client 1 sends
// a nested read of x (Request.Nested, as a calling namespace's replica
// does: automaton/call.go; mc's workload step "nested get x") and later a
// copy of it with the same id (mc's step "resend 1", as the calling
// namespace's other replicas send theirs); client 2 writes x. All at n1, the first leader, whose
// election (one timer firing, its prepares and n3's promise) is the
// scripted prefix. paxos orders the nested read and answers the
// copy from its table (nested.go); the broken variant reads afresh, and a
// copy sent after the write is answered differently (mc's nested-answer
// check).
func NestedReadModel() automaton.ModelConfig {
	return automaton.ModelConfig{
		Nodes:   3,
		Clients: 2,
		Scripts: [][]service.Op{
			{{Kind: "nested", Key: "get", Args: [][]byte{[]byte("x")}}, {Kind: "resend", Key: "1"}},
			{modelSet("2")},
		},
		Target:  "first",
		Network: "lossless,unordered,bynode",
		Timers:  "quiet:1",
		Depth:   20,
		Prefix:  slices.Clone(n1ElectedPrefix),
	}
}

// MatchmakerModel is the model of paxos-broken-localenv: the Matchmaker
// service (the Grid Services thesis III.C.1, nondeterministic: a submit picks one of the
// machines that suit it). One client at n1 advertises two equal machines
// and submits a job both suit; one timer firing (n1's election). paxos
// logs the leader's environment beside the submit, so every replica picks
// the same machine; the broken variant's replicas each draw their own, and
// mc's convergence check (replicas that executed the same number of
// instances hold states of equal hash; sim/converge.go) sees them part.
func MatchmakerModel() automaton.ModelConfig {
	n := func(s string) []byte { return []byte(s) }
	return automaton.ModelConfig{
		Nodes:   3,
		Clients: 1,
		Service: "matchmaker",
		Scripts: [][]service.Op{{
			{Kind: "advertise", Key: "m0", Args: [][]byte{n("2"), n("2"), n("1")}},
			{Kind: "advertise", Key: "m1", Args: [][]byte{n("2"), n("2"), n("1")}},
			{Kind: "submit", Key: "j1", Args: [][]byte{n("1"), n("1"), n("1"), n("0")}},
		}},
		Target:  "first",
		Network: "lossless,unordered,bynode",
		Timers:  "quiet:1",
		Depth:   30,
	}
}

// Model implements automaton.ModelDeclarer for paxos-broken-localenv
// (shadowing protocol's): MatchmakerModel.
func (brokenLocalEnv) Model() automaton.ModelConfig { return MatchmakerModel() }

// GroupModel is a model for paxos-broken-splitgroup (the shape of
// TestSplitGroupHalfApplies): with window=1 and n1 elected (the scripted
// prefix), client 1's write fills the window, and clients 2 and 3 send the
// atomic groups (set x A, get x) and (set x B, get x) (mc's workload step
// "group"), which wait and may go out in one batch. paxos orders each
// group as one command; the broken variant orders the k-th operations of
// the batch's groups together (A1 B1 A2 B2), so A's read sees B's write:
// a half-applied group, which the serializability checker rejects.
func GroupModel() automaton.ModelConfig {
	g := func(v string) service.Op {
		return service.Op{Kind: "group", Args: [][]byte{[]byte("set+x+" + v), []byte("get+x")}}
	}
	return automaton.ModelConfig{
		Nodes:   3,
		Clients: 3,
		Scripts: [][]service.Op{{modelSet("0")}, {g("A")}, {g("B")}},
		Params:  map[string]string{"window": "1"},
		Target:  "first",
		Network: "lossless,unordered,bynode",
		Timers:  "quiet:1",
		Depth:   12,
		Prefix:  slices.Clone(n1ElectedPrefix),
	}
}
