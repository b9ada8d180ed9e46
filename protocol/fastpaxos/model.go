package fastpaxos

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Model implements automaton.ModelDeclarer (issue 20): the models package
// mc checks exhaustively. fastpaxos itself and fastpaxos-broken-recovery
// keep the default model (the latter needs 4 nodes, where a fast quorum
// is not every acceptor: beyond a few seconds of search).
func (p protocol) Model() automaton.ModelConfig {
	switch {
	case p.classicLearn, p.skipGap:
		return SequentialWritesModel()
	case p.staleVote:
		return CollisionModel()
	}
	return automaton.ModelConfig{}
}

func set(v string) service.Op {
	return service.Op{Kind: "set", Key: "x", Args: [][]byte{[]byte(v)}}
}

// SequentialWritesModel: one client writes x twice (fanned out, so every
// acceptor proposes it, seed 002 V.A); one timer firing (an election);
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
