package fastpaxos

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Model implements automaton.ModelDeclarer (issue 20): the models package
// mc checks exhaustively. fastpaxos itself keeps the default model.
func (p protocol) Model() automaton.ModelConfig {
	switch {
	case p.classicLearn, p.skipGap:
		return SequentialWritesModel()
	case p.staleVote:
		return CollisionModel()
	case p.ignoreRule:
		return RecoveryModel()
	}
	return automaton.ModelConfig{}
}

func set(v string) service.Op {
	return service.Op{Kind: "set", Key: "x", Args: [][]byte{[]byte(v)}}
}

// SequentialWritesModel: one client writes x twice (fanned out, so every
// acceptor proposes it, the Grid Services thesis V.A); one timer firing (an election);
// nodes drain their inboxes from the highest-numbered one (mc's bynode
// network), so n1 hears last. It catches:
//
//   - fastpaxos-broken-classiclearn: n3 learns the first write from its
//     own vote and the leader's, a classic quorum in a fast round
//     ("learned values are chosen"), in 8 events.
//   - fastpaxos-broken-skipgap: the first write is chosen (every acceptor
//     voted) and executed at n2 and n3; the second is voted at instance 2
//     and n1 hears its votes while the others' votes for instance 1 still
//     wait in its inbox, learns 2 and skips 1 ("executed prefixes agree"),
//     in 21 events. Losing a vote (the simulator's loss) is not needed:
//     holding it is enough.
func SequentialWritesModel() automaton.ModelConfig {
	return automaton.ModelConfig{
		Nodes:   3,
		Clients: 1,
		Scripts: [][]service.Op{{set("1"), set("2")}},
		Target:  "first",
		Network: "lossless,unordered,bynode",
		Timers:  "quiet:1",
		Depth:   24,
	}
}

// CollisionModel: two clients write different values at once, so that
// acceptors vote for different requests at one instance (a collision, seed
// 002 V.A; Lamport 3.3) and the leader recovers in its classic round; two
// timer firings at any moment (all:2: an election, and a second candidacy
// while the first leader's messages are in flight); per-link FIFO and
// bynode delivery. The search starts after a scripted prefix (mc's
// ModelConfig.Prefix): n2's election, its prepare (1,4) promised by n3,
// its "any" to n3 and its prepare to n1, which uses the first of the two
// timer firings. fastpaxos-broken-stalevote: n3 votes client 1's write at
// instance 1 and n2 client 2's; n1, which saw round 1 in n2's prepare and
// never heard its "any", times out and prepares (2,2), which n3 promises;
// n2 sees the collision and sends its recovery round's Accept (1,5), which
// n3 votes for below its promise ("votes respect promises"): 15 events, 10
// after the prefix, in about 5,000 states (65,272 from the initial state,
// beyond CI's budget). The prefix is a reduction: the search covers only
// runs in which n2 is elected first this way.
func CollisionModel() automaton.ModelConfig {
	return automaton.ModelConfig{
		Nodes:   3,
		Clients: 2,
		Scripts: [][]service.Op{{set("1")}, {set("2")}},
		Target:  "first",
		Network: "lossless,ordered,bynode",
		Timers:  "all:2",
		Prefix: []string{
			"n2: timer 2 fires",
			"deliver n2 -> n3: prepare b=(1,4) from=1",
			"deliver n3 -> n2: promise b=(1,4) []",
			"deliver n2 -> n3: any b=(1,4) from=1 commit=0",
			"deliver n2 -> n1: prepare b=(1,4) from=1",
		},
		Depth: 11,
	}
}

// RecoveryModel: 4 nodes (n = 3t+1 with t = 1: classic and fast quorums
// of 3, so a value chosen on the fast path need not have every vote, and
// a recovery quorum may hold votes for two values; with 3 nodes a fast
// value has every acceptor's vote and every report agrees), two clients
// writing different values (fanned out to every acceptor), one timer
// firing (n4's election), per-link FIFO and bynode delivery. The scripted
// prefix (mc's ModelConfig.Prefix) is n4's election (prepare (1,8)
// promised by n3, n2 and n1, its "any" to each) and the collision: both
// writes sent; n4 votes client 1's at instance 1 and client 2's at 2, n3
// and n2 client 2's at instance 1; n4 learns of n3's and n2's votes, so
// it holds votes of a classic quorum at instance 1 that disagree (a: n4;
// b: n3, n2) and recovers. The search starts at its pick: by Lamport's
// rule (quorums.pick) b, the only value that may have been chosen in the
// fast round (2 >= f - (n - |Q|) = 2 votes); fastpaxos-broken-recovery
// takes the highest-numbered reporter's vote, n4's own a, and gets it
// accepted in the recovery round (1,9) by n3 and n2 while n1 still votes
// b at instance 1 in the fast round, which makes b chosen there by n1, n2
// and n3 ("at most one value chosen per instance"): 37 events, 15 after
// the prefix, 188 states. fastpaxos in the same model picks b and
// shows no violation, a write completing (mc's TestRecoveryModel: every
// state within 20 events after the prefix, 310 states). The prefix is a
// reduction: the search covers only runs with this election and this
// collision. With only the election and
// the two sends as the prefix (12 events) the same violation takes 2,945
// states (25 events after it); from the initial state it was not reached
// within 34,847 states (depth 20, unordered).
func RecoveryModel() automaton.ModelConfig {
	return automaton.ModelConfig{
		Nodes:   4,
		Clients: 2,
		Scripts: [][]service.Op{{set("1")}, {set("2")}},
		Target:  "first",
		Network: "lossless,ordered,bynode",
		Timers:  "quiet:1",
		Prefix: []string{
			`n4: timer 2 fires`,
			`deliver n4 -> n3: prepare b=(1,8) from=1`,
			`deliver n3 -> n4: promise b=(1,8) []`,
			`deliver n4 -> n2: prepare b=(1,8) from=1`,
			`deliver n2 -> n4: promise b=(1,8) []`,
			`deliver n4 -> n3: any b=(1,8) from=1 commit=0`,
			`deliver n4 -> n2: any b=(1,8) from=1 commit=0`,
			`deliver n4 -> n1: prepare b=(1,8) from=1`,
			`deliver n1 -> n4: promise b=(1,8) []`,
			`deliver n4 -> n1: any b=(1,8) from=1 commit=0`,
			`client 1 sends set x "1" to every node`,
			`client 2 sends set x "2" to every node`,
			`deliver client 1 -> n4: request 1:1 set x "1"`,
			`deliver client 2 -> n4: request 2:1 set x "2"`,
			`deliver client 2 -> n3: request 2:1 set x "2"`,
			`deliver n3 -> n4: voted [1: (1,8) 2:1 set x "2"]`,
			`deliver client 1 -> n3: request 1:1 set x "1"`,
			`deliver n3 -> n4: voted [2: (1,8) 1:1 set x "1"]`,
			`deliver n4 -> n3: voted [1: (1,8) 1:1 set x "1"]`,
			`deliver n4 -> n3: voted [2: (1,8) 2:1 set x "2"]`,
			`deliver client 2 -> n2: request 2:1 set x "2"`,
			`deliver n2 -> n4: voted [1: (1,8) 2:1 set x "2"]`,
		},
		Depth: 16,
	}
}
