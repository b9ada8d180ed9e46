package paxos

import "github.com/synod-dev/synod/automaton"

var _ automaton.LeaderReporter = (*Paxos)(nil)

// Leader implements automaton.LeaderReporter: this node when it leads and
// has finished phase 1, otherwise the leader it last heard from ("" when
// none). A client that sends there saves the forwarding hop; one that sends
// anywhere else is forwarded.
func (a *Paxos) Leader() automaton.NodeID {
	if a.role == leader {
		if a.ready {
			return a.cfg.Self
		}
		return ""
	}
	if a.leaderHint >= 0 && a.leaderHint < len(a.nodes) && a.leaderHint != a.self {
		return a.nodes[a.leaderHint]
	}
	return ""
}

var _ automaton.TermReporter = (*Paxos)(nil)

// Term implements automaton.TermReporter: the round of this node's own
// ballot while it leads, otherwise of the highest ballot it promised. A
// newer leader's ballot is higher, so between two nodes that each claim to
// lead, the one with the higher term was elected later (the node's leader
// gossip orders claims by it: node/leadergossip.go).
func (a *Paxos) Term() uint64 {
	if a.role == leader {
		return a.ballot.Round
	}
	return a.promised.Round
}
