package node

import (
	"sort"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/wire"
)

// Leader gossip (issue 33; docs/ROBUSTNESS.md N10): every node learns the
// leader of every group of a sharded namespace, also of groups it does not
// replicate, so that CLUSTER SLOTS, CLUSTER SHARDS and MOVED name a
// shard's current leader (a Redis Cluster client sends its writes to the
// master it was told, and go-redis keeps dialling a dead one until its
// next table reload).
//
// Decisions (no seed covers this; Redis Cluster spreads the same facts in
// its cluster-bus gossip, Dragonboat and CockroachDB batch per-group
// traffic per node pair):
//
//   - Only a leader speaks for its group. Each node sends every other node
//     one message (transport namespace forwardNS, kind fwdLeaders) listing
//     the groups it leads itself, each with its term (the protocol's
//     automaton.TermReporter: paxos's ballot round): one message per peer
//     per gossip round whatever the number of groups, none when it leads
//     nothing. A claim passed on second hand could outlive its leader.
//   - Rounds run every leaderGossipEvery, and at once (coalesced with
//     other changes within leaderGossipNudge) when one of this node's
//     groups elects it. So a non-member names a new leader within about
//     leaderGossipNudge plus a message delay after the election, and within
//     leaderGossipEvery after a lost message.
//   - A receiver keeps, per group, the latest claim: a claim replaces the
//     one held when its term is higher, when it comes from the same node,
//     or when the one held is older than leaderHintTTL (its leader stopped
//     claiming: killed, partitioned or deposed). A deposed leader that still
//     believes it leads claims a lower term than its successor and is
//     ignored while the successor's claim is fresh. The leader a forwarded
//     request's answer names (shard.go) is recorded the same way, with the
//     term held.
//   - A hint orders; it does not decide: targets() still puts nodes without
//     a live peer connection last, and a stale hint costs a forwarding hop
//     (the group's follower forwards) or a MOVED, never a wrong answer.
const (
	leaderGossipEvery = 250 * time.Millisecond
	leaderGossipNudge = 20 * time.Millisecond
	leaderHintTTL     = 4 * leaderGossipEvery
)

// fwdLeaders is the forwarding frame kind of a leader gossip message.
const fwdLeaders = 3

// maxGossipGroups bounds a decoded gossip message's group count.
const maxGossipGroups = 1 << 20

// leaderHint is what this node believes of a group's leader.
type leaderHint struct {
	id   automaton.NodeID
	term uint64
	at   time.Time
}

// noteHint records a claim that id leads group at term (from gossip, or
// the leader a forwarded answer named, with term 0: the term held), by the
// rules above. Any goroutine.
func (n *Node) noteHint(group string, id automaton.NodeID, term uint64, gossip bool, now time.Time) {
	if id == "" {
		return
	}
	n.fwd.mu.Lock()
	defer n.fwd.mu.Unlock()
	h, ok := n.fwd.hint[group]
	fresh := ok && now.Sub(h.at) < leaderHintTTL
	switch {
	case gossip && fresh && h.id != id && term < h.term:
		return // a claim older than the one held, which is fresh
	case !gossip && h.id == id:
		term = h.term
	case !gossip:
		term = 0
	}
	n.fwd.hint[group] = leaderHint{id: id, term: term, at: now}
}

// hintOf is the leader this node believes leads group ("" when it has no
// fresh belief).
func (n *Node) hintOf(group string) automaton.NodeID {
	n.fwd.mu.Lock()
	defer n.fwd.mu.Unlock()
	h := n.fwd.hint[group]
	if time.Since(h.at) >= leaderHintTTL {
		return ""
	}
	return h.id
}

// forgetHint drops group's hint if it still names id (a forward to id went
// unanswered).
func (n *Node) forgetHint(group string, id automaton.NodeID) {
	n.fwd.mu.Lock()
	if n.fwd.hint[group].id == id {
		delete(n.fwd.hint, group)
	}
	n.fwd.mu.Unlock()
}

// nudgeLeaderGossip asks for a gossip round soon: this node was elected
// leader of group. Loop goroutine (noteLeader); never blocks.
func (n *Node) nudgeLeaderGossip(group string) {
	if n.shardOf(group) == nil || n.gossipNudge == nil {
		return
	}
	select {
	case n.gossipNudge <- struct{}{}:
	default:
	}
}

// leaderGossip runs the gossip rounds until the node stops (started by Run
// when the cluster has a sharded namespace).
func (n *Node) leaderGossip() {
	defer n.bg.Done()
	t := time.NewTicker(leaderGossipEvery)
	defer t.Stop()
	for {
		select {
		case <-n.stopping:
			return
		case <-t.C:
		case <-n.gossipNudge:
			// Coalesce the elections of the next few milliseconds (a node
			// restarting, or the groups of a killed node) into one round.
			select {
			case <-time.After(leaderGossipNudge):
			case <-n.stopping:
				return
			}
		}
		n.sendLeaderGossip()
	}
}

// sendLeaderGossip sends every other node one message listing the groups
// this node leads, with their terms.
func (n *Node) sendLeaderGossip() {
	msg := n.leaderClaims()
	if msg == nil {
		return
	}
	for _, m := range n.cfg.Nodes {
		if id := automaton.NodeID(m.ID); id != n.id {
			n.tr.Send(id, forwardNS, msg) // lost: the next round says it again
		}
	}
}

// leaderClaims encodes the groups this node leads (nil when none).
func (n *Node) leaderClaims() []byte {
	var groups []string
	for _, s := range n.shards {
		v := s.view()
		for gi := range s.groups {
			g := s.nameIn(v, gi) // the incarnated name (groups.go)
			if l := n.loop(g); l != nil {
				if p := l.leader.Load(); p != nil && *p == n.id {
					groups = append(groups, g)
				}
			}
		}
	}
	if len(groups) == 0 {
		return nil
	}
	sort.Strings(groups)
	e := wire.Encoder{}
	e.Byte(fwdLeaders)
	e.Uvarint(uint64(len(groups)))
	for _, g := range groups {
		e.String(g)
		e.Uvarint(n.loop(g).term.Load())
	}
	return e.B
}

// onLeaderGossip records a peer's claims (transport reader goroutine).
func (n *Node) onLeaderGossip(from automaton.NodeID, d *wire.Decoder) {
	k := d.Count(maxGossipGroups, 2)
	type claim struct {
		g    string
		term uint64
	}
	cs := make([]claim, 0, k)
	for i := 0; i < k && d.Err() == nil; i++ {
		cs = append(cs, claim{d.String(), d.Uvarint()})
	}
	if d.Done() != nil {
		n.log.Warn("bad leader gossip; dropped", "peer", from)
		return
	}
	now := time.Now()
	for _, c := range cs {
		if s, gi := n.shardIndex(c.g); s != nil && containsNode(s.members(gi), from) {
			n.noteHint(c.g, from, c.term, true, now)
		} else if c.g == config.PlacementName && n.groupOf[c.g] != nil {
			n.notePlacementClaim(from, c.term, now) // placemembers.go: a target of last resort
		}
	}
}

func containsNode(ids []automaton.NodeID, id automaton.NodeID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
