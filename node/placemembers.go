package node

import (
	"slices"
	"sync"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/storage"
)

// The members records, remembered (issue 33; session 44 for the
// placement namespace's own, session 46 for the data groups').
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
//   - Session 46 (plmem46): the same for every sharded namespace's record
//     mem/<ns> (each under its own key), so a node added to a data group
//     at run time restarts that replica, and every node routes to the
//     group's current members, without a placement read (after a
//     whole-cluster stop the placement namespace may be down longer than
//     the data groups). Precedence: the stored record over the cluster
//     file at start; the placement namespace's record over the stored one
//     from the first read on (openPlacementMembers).
//   - A node whose stored record is stale too (it was down while every
//     member it knew of was replaced) still reaches the group through
//     leader gossip: the placement leader's claim is believed as a routing
//     target of last resort even from a node the view does not name
//     (onLeaderGossip; targets). Gossip only orders forwards; a node that
//     does not serve the group refuses them, so a wrong claim costs a
//     forward, never an answer.

// placeMembersStore is the storage engine store holding the node's last
// read of each members record: mem/#placement under placeMembersKey, a
// sharded namespace's mem/<ns> under placeMembersKey+"/"+<ns> (session 46).
const placeMembersStore = config.PlacementName + config.GroupSep + "members"

const placeMembersKey = "mem"

// placeMembers is the node's durable copy of the members records.
type placeMembers struct {
	mu    sync.Mutex
	store storage.Store     // nil: no placement namespace, or not opened
	last  map[string]string // by store key: the record stored last

	claim leaderHint // the latest placement leader claim from a node the view does not name
}

// membersKey is s's key in placeMembersStore.
func membersKey(s *shardedNS) string {
	if s.ns.Name == config.PlacementName {
		return placeMembersKey
	}
	return placeMembersKey + "/" + s.ns.Name
}

// openPlacementMembers opens the stored records and installs each as the
// view of its namespace's members (start, after the engine opened, before
// any loop starts). Precedence (session 46, plmem46): a stored record
// replaces the cluster file's lists at start; the placement namespace's
// record, once read (slotmap.go pollPlacement, pollPlacementMembers),
// replaces the stored one and is stored in its turn. The stored copy only
// routes and starts or stops this node's replicas: it is not a read
// (slotView.memRead stays false), so the placement leader never derives a
// members record from it (placer.go writeMembers).
func (n *Node) openPlacementMembers() error {
	if n.shards[config.PlacementName] == nil {
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
	n.pm.store, n.pm.last = st, map[string]string{}
	n.pm.mu.Unlock()
	for _, s := range n.shards {
		text, ok := recs[membersKey(s)]
		if !ok {
			continue
		}
		mr, err := parseMembersRecord(string(text), s.groups)
		if err != nil {
			n.log.Warn("stored members record unreadable; using the cluster file's", "namespace", s.ns.Name, "err", err)
			continue
		}
		n.pm.last[membersKey(s)] = string(text)
		v := *s.view()
		v.members, v.hosts, v.former, v.leaving = mr.members, mr.hosts, mr.former, mr.leaving
		if s.ns.Name != config.PlacementName {
			v.boot = mr.boot
			v.setInc(s.groups, mr.inc)
		}
		s.cur.Store(&v)
		n.log.Info("members from the data directory", "namespace", s.ns.Name, "record", string(text))
	}
	return nil
}

// hostPlacementMembers starts or stops this node's replicas by the stored
// records (start, once the transport and the file's loops run): a node
// that joined a group at run time starts it before any placement read.
func (n *Node) hostPlacementMembers() {
	for _, s := range n.shards {
		if s.view().members != nil {
			n.hostGroups(s)   // groups.go
			n.retireGroups(s) // groups.go
		}
	}
}

// saveMembers stores s's record text when it differs from the one stored
// (pollPlacement, pollPlacementMembers: before the node acts on it).
func (n *Node) saveMembers(s *shardedNS, text string) {
	n.pm.mu.Lock()
	defer n.pm.mu.Unlock()
	k := membersKey(s)
	if n.pm.store == nil || text == n.pm.last[k] {
		return
	}
	if err := n.pm.store.Commit([]automaton.Persist{{Key: k, Value: []byte(text)}}); err != nil {
		n.log.Warn("storing a members record failed", "namespace", s.ns.Name, "err", err)
		return
	}
	n.pm.last[k] = text
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
	if l.outside.Swap(!in) != !in && l.n.shardOf(l.ns.Name) != nil {
		l.n.log.Info("this node's replica is outside the group's configuration", "group", l.ns.Name, "outside", !in)
	}
}
