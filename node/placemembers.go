package node

import (
	"slices"
	"sync"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/storage"
)

// The placement namespace's members, remembered (issue 33; session 44).
//
// The members record mem/#placement lives in the group it describes
// (slotmap.go pollPlacementMembers), so a node that has just started knew
// only the cluster file's members of #placement: once every one of those
// had been replaced and was down, a restarted node could not reach the
// placement namespace, and a replacement member (not in the file) did not
// even start its own replica, so after a restart of the whole cluster the
// namespace stayed down. Decisions:
//
//   - Each node keeps the last record it read durably, in its storage
//     engine (its data directory under fsync), as the one record
//     placeMembersKey of the store placeMembersStore (a name no group can
//     have: "#placement#members"). It is written, synchronously, before
//     the node acts on a record that differs from the stored one (routes
//     by it, starts or stops its replica), so a node that joined the group
//     finds its membership again after any crash.
//   - At start, before any placement read, the stored record is installed
//     as the node's view of the group's members, and the node starts its
//     replica when the record makes it a host (from its own records, as a
//     restart does) and stops a file replica it names a former member.
//   - A node whose stored record is stale too (it was down while every
//     member it knew of was replaced) still reaches the group through
//     leader gossip: the placement leader's claim is believed as a routing
//     target of last resort even from a node the view does not name
//     (onLeaderGossip; targets). Gossip only orders forwards; a node that
//     does not serve the group refuses them, so a wrong claim costs a
//     forward, never an answer.

// placeMembersStore is the storage engine store holding the node's last
// read of mem/#placement.
const placeMembersStore = config.PlacementName + config.GroupSep + "members"

const placeMembersKey = "mem"

// placeMembers is the node's durable copy of mem/#placement.
type placeMembers struct {
	mu    sync.Mutex
	store storage.Store // nil: no placement namespace, or not opened
	last  string        // the record stored last

	claim leaderHint // the latest placement leader claim from a node the view does not name
}

// openPlacementMembers opens the stored record and installs it as the
// view of #placement's members (start, after the engine opened, before
// any loop starts).
func (n *Node) openPlacementMembers() error {
	ps := n.shards[config.PlacementName]
	if ps == nil {
		return nil
	}
	st, err := n.engine.Namespace(placeMembersStore)
	if err != nil {
		return err
	}
	recs, err := st.Load()
	if err != nil {
		st.Close()
		return err
	}
	n.pm.mu.Lock()
	n.pm.store = st
	n.pm.mu.Unlock()
	text, ok := recs[placeMembersKey]
	if !ok {
		return nil
	}
	mr, err := parseMembersRecord(string(text), ps.groups)
	if err != nil {
		n.log.Warn("stored placement members record unreadable; using the cluster file's", "err", err)
		return nil
	}
	n.pm.last = string(text)
	v := *ps.view()
	v.members, v.hosts, v.former, v.leaving = mr.members, mr.hosts, mr.former, mr.leaving
	ps.cur.Store(&v)
	n.log.Info("placement members from the data directory", "members", mr.members[0])
	return nil
}

// hostPlacementMembers starts or stops this node's replica of #placement
// by the stored record (start, once the transport and the file's loops
// run).
func (n *Node) hostPlacementMembers() {
	if ps := n.shards[config.PlacementName]; ps != nil && ps.view().members != nil {
		n.hostGroups(ps)   // groups.go
		n.retireGroups(ps) // groups.go
	}
}

// savePlacementMembers stores record text when it differs from the one
// stored (pollPlacementMembers, before the node acts on it).
func (n *Node) savePlacementMembers(text string) {
	n.pm.mu.Lock()
	defer n.pm.mu.Unlock()
	if n.pm.store == nil || text == n.pm.last {
		return
	}
	if err := n.pm.store.Commit([]automaton.Persist{{Key: placeMembersKey, Value: []byte(text)}}); err != nil {
		n.log.Warn("storing the placement members record failed", "err", err)
		return
	}
	n.pm.last = text
}

// closePlacementMembers closes the store (shutdown, before the engine).
func (n *Node) closePlacementMembers() {
	n.pm.mu.Lock()
	defer n.pm.mu.Unlock()
	if n.pm.store != nil {
		n.pm.store.Close()
		n.pm.store = nil
	}
}

// notePlacementClaim keeps a placement leader claim from a node the view
// does not name a member (onLeaderGossip).
func (n *Node) notePlacementClaim(from automaton.NodeID, term uint64, now time.Time) {
	n.pm.mu.Lock()
	defer n.pm.mu.Unlock()
	if c := n.pm.claim; c.id != from && now.Sub(c.at) < leaderHintTTL && term < c.term {
		return
	}
	n.pm.claim = leaderHint{id: from, term: term, at: now}
}

// placementClaim is a fresh claim from a node outside nodes ("": none).
func (n *Node) placementClaim(nodes []automaton.NodeID) automaton.NodeID {
	n.pm.mu.Lock()
	defer n.pm.mu.Unlock()
	if c := n.pm.claim; c.id != "" && time.Since(c.at) < leaderHintTTL && !slices.Contains(nodes, c.id) {
		return c.id
	}
	return ""
}

// noteOwnMembership records whether the replica's executed configuration
// (its Members output: voting members are the configuration's) names
// this node a voting member (loopIO.Members, on the loop goroutine). A
// replica outside it does not serve the group (serves): a node that was
// removed while down, restarted with a stale members record naming it a
// member, would otherwise send every request of the group, its own
// placement reads included, to its own replica, which answers each with
// paxos's "not a member (removed)" refusal, so it could never read the
// record that would correct it (TestPlacementStaleFirstBackAfterWholeStop).
// It forwards them to the other members instead.
func (l *nsLoop) noteOwnMembership(self automaton.NodeID, o automaton.Members) {
	in := false
	for _, m := range o.Members {
		if m.ID == self && m.Voting {
			in = true
		}
	}
	if l.outside.Swap(!in) != !in && l.n.groupOf[l.ns.Name] != nil {
		l.n.log.Info("this node's replica is outside the group's configuration", "group", l.ns.Name, "outside", !in)
	}
}
