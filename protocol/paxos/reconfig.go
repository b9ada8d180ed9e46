package paxos

import (
	"slices"
	"sort"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// pendingChange is a membership change proposed (or re-proposed after phase
// 1) and not executed yet: at is its instance, conf the configuration it makes.
type pendingChange struct {
	at   uint64
	conf *conf
}

// learner is a node whose add waits at the leader until it has caught up:
// it gets heartbeats (commit notices) and fetches the chosen log or a
// snapshot, but does not count in any quorum.
type learner struct {
	peer, client string
	commit       uint64 // highest chosen prefix it acknowledged
	// heard: the learner acknowledged one of this leader's heartbeats.
	// Without it a learner that never answered (down, paused, cut off)
	// would count as caught up whenever the leader's chosen prefix is
	// shorter than a window, and its add would make a configuration with
	// a member that may not be there.
	heard bool
}

// handle returns id's local handle, assigning one to a node not seen before.
func (a *Paxos) handle(id automaton.NodeID) int {
	if h, ok := a.index[id]; ok {
		return h
	}
	h := len(a.nodes)
	a.nodes = append(a.nodes, id)
	a.index[id] = h
	return h
}

// ballotOf checks that ballot b names its proposer, node from, when the
// proposer's number is known here. A replica that has not executed the add
// of a newer member does not know its number yet and takes the ballot as it
// comes: ballot uniqueness rests on proposers using their own numbers.
func (a *Paxos) ballotOf(from int, b Ballot) bool {
	n, ok := a.nums[a.nodes[from]]
	return !ok || b.Node == n
}

// isMember reports whether this node is in the current configuration.
func (a *Paxos) isMember() bool { return a.sm.conf.has(a.cfg.Self) }

// noteConf records the numbers and addresses of c's members.
func (a *Paxos) noteConf(c *conf) {
	for _, m := range c.members {
		a.nums[m.ID] = m.Num
		a.handle(m.ID)
		if m.Peer != "" {
			a.book[m.ID] = m
		}
	}
}

// noteChange records the addresses an add carries, so that the runtime can
// reach the node before the add executes (a leader, a candidate, or an
// acceptor of the add may need to).
func (a *Paxos) noteChange(ch change) {
	if ch.add {
		a.handle(ch.id)
		a.book[ch.id] = member{ID: ch.id, Peer: ch.peer, Client: ch.client}
	}
}

// leaderConfs lists the configurations a leader's quorums must satisfy: the
// current one and those of the changes in flight.
func (a *Paxos) leaderConfs() []*conf {
	out := []*conf{a.sm.conf}
	for _, c := range a.changes {
		out = append(out, c.conf)
	}
	return out
}

// chosenBy reports whether a majority of f's configuration accepted.
func (a *Paxos) chosenBy(f *flight) bool {
	c := f.conf
	if a.proto.bootQuorum {
		// Broken on purpose (paxos-broken-bootquorum): the majority is
		// counted in the bootstrap configuration, as if the membership were
		// the static list the node started with.
		c = a.boot
	}
	n := 0
	for _, m := range c.members {
		if h, ok := a.index[m.ID]; ok && f.acks.has(h) {
			n++
		}
	}
	return n >= c.majority()
}

// peers returns the handles a leader sends to, sorted: the members of every
// configuration it works with (and learners, when withLearners), self
// excluded. They are appended to buf[:0] (a caller's array on its stack: a
// heartbeat round or an Accept allocates nothing for it).
func (a *Paxos) peers(withLearners bool, buf []int) []int {
	hs := buf[:0]
	for _, m := range a.sm.conf.members {
		hs = append(hs, a.handle(m.ID))
	}
	for _, c := range a.changes {
		for _, m := range c.conf.members {
			hs = append(hs, a.handle(m.ID))
		}
	}
	for _, f := range a.inflight {
		if f.conf == a.sm.conf {
			continue // counted above
		}
		for _, m := range f.conf.members {
			hs = append(hs, a.handle(m.ID))
		}
	}
	if withLearners {
		for id := range a.learners {
			hs = append(hs, a.handle(id))
		}
	}
	slices.Sort(hs)
	hs = slices.Compact(hs)
	if i, ok := slices.BinarySearch(hs, a.self); ok {
		hs = slices.Delete(hs, i, i+1)
	}
	return hs
}

// emitMembers tells the runtime which nodes this replica exchanges messages
// with, when that set changed: the members of the current configuration,
// of configurations in flight or met in phase 1, learners, and nodes that
// changes seen but not executed name.
func (a *Paxos) emitMembers() {
	voting := map[automaton.NodeID]bool{}
	for _, m := range a.sm.conf.members {
		voting[m.ID] = true
	}
	all := map[automaton.NodeID]bool{}
	for id := range voting {
		all[id] = true
	}
	for _, c := range append(a.leaderConfs(), a.p1Confs...) {
		for _, m := range c.members {
			all[m.ID] = true
		}
	}
	for id := range a.learners {
		all[id] = true
	}
	for id := range a.book {
		all[id] = true // members, and nodes named by adds not executed yet
	}
	ids := make([]string, 0, len(all))
	for id := range all {
		ids = append(ids, string(id))
	}
	sort.Strings(ids)
	var key strings.Builder
	out := automaton.Members{}
	for _, id := range ids {
		m := automaton.Member{ID: automaton.NodeID(id), Voting: voting[automaton.NodeID(id)]}
		if b, ok := a.book[m.ID]; ok {
			m.Peer, m.Client = b.Peer, b.Client
		} else if l := a.learners[m.ID]; l != nil {
			m.Peer, m.Client = l.peer, l.client
		}
		out.Members = append(out.Members, m)
		key.WriteString(id + "|" + m.Peer + "|" + m.Client)
		if m.Voting {
			key.WriteString("|v")
		}
		key.WriteString(";")
	}
	if key.String() == a.lastMembers {
		return
	}
	a.lastMembers = key.String()
	a.Emit(out)
}

// onConfChange runs after instance i made a new configuration: learn the
// new members, adjust a leader's quorums, and retire if this node left.
func (a *Paxos) onConfChange(i uint64) {
	c := a.sm.conf
	a.noteConf(c)
	// A removed member's address is forgotten (and the runtime drops it).
	for id := range a.book {
		if !c.has(id) {
			delete(a.book, id)
		}
	}
	for len(a.changes) > 0 && a.changes[0].at <= i {
		a.changes = a.changes[1:]
	}
	for id := range a.learners {
		if c.has(id) {
			delete(a.learners, id)
		}
	}
	if a.role == leader {
		// Acknowledgements count afresh against the new configuration.
		for _, m := range c.members {
			if m.Num >= c.nextNum-1 && m.ID != a.cfg.Self {
				delete(a.ackRound, a.handle(m.ID))
			}
		}
		a.quorumRound = 0
		a.updateQuorumRound()
	}
	if !a.isMember() {
		a.retire()
	} else if a.role == follower && !a.leaderAlive {
		a.armElection() // a new member may now stand for election
	}
	a.emitMembers()
	if a.role == leader {
		a.propose()
	}
}

// retire: this node is not in the current configuration (its removal
// executed). A leader hands off and steps down; waiting requests are
// answered with an error telling the client to go to a member.
func (a *Paxos) retire() {
	if a.role == leader {
		a.handOff()
	}
	if a.role != follower {
		a.stepDown()
	}
	a.Emit(automaton.CancelTimer{ID: tmElection})
	ids := make([]automaton.RequestID, 0, len(a.pending))
	for id := range a.pending {
		ids = append(ids, id)
	}
	automaton.SortRequestIDs(ids)
	for _, id := range ids {
		a.finish(id, a.notMemberError())
	}
}

// handOff: a leader whose removal just executed tells every remaining
// member that the chosen prefix reaches its removal (a TakeOver with its
// ballot and commit index, a commit notice like a heartbeat's) and names one
// of them, the one that acknowledged the highest instance (ties: lowest
// number), to start phase 1 at once. Members that executed the removal no
// longer protect this node as their live leader (leaderRemoved), so the
// successor's promises come without waiting for an election timeout.
func (a *Paxos) handOff() {
	best := -1
	for _, m := range a.sm.conf.members { // sorted by number
		if h := a.handle(m.ID); h != a.self && (best < 0 || a.acked[h] > a.acked[best]) {
			best = h
		}
	}
	for _, m := range a.sm.conf.members {
		if h := a.handle(m.ID); h != a.self {
			a.send(h, &message{Kind: kindTakeOver, Ballot: a.ballot, Commit: a.chosenUpTo, OK: h == best})
		}
	}
}

// onTakeOver applies a removed leader's hand-off: its commit notice, and,
// for the named successor that has executed the removal, phase 1 at once
// (with a ballot above every one seen, as always). A hand-off from a ballot
// below the promised one is stale (an election happened since): ignored.
func (a *Paxos) onTakeOver(from int, m *message) {
	if !a.ballotOf(from, m.Ballot) || m.Ballot.Less(a.promised) {
		return
	}
	if m.Ballot.Round > a.maxRound {
		a.maxRound = m.Ballot.Round
	}
	a.learnCommit(from, m.Ballot, m.Commit)
	if m.OK && a.role == follower && a.isMember() && a.removed(from) {
		a.startPhase1()
	}
}

// leaderRemoved reports whether the leader this node heard alive is outside
// the configuration it has executed. That leader executed its removal before
// anyone could learn it chosen (commit notices leave after the leader's own
// execution, which retires it), so it leads no more and holds no lease: its
// followers may promise others at once.
func (a *Paxos) leaderRemoved() bool {
	return a.aliveLeader >= 0 && a.removed(a.aliveLeader)
}

// removed reports whether node h was a member of a configuration this node
// executed (it has a number here) and is not in the current one: its
// removal executed. A node whose add has not executed here is not removed
// (it may lead legitimately). A candidate does not give up for a late
// Accept or Heartbeat of a removed node (a removed leader's, overtaken by
// its TakeOver).
func (a *Paxos) removed(h int) bool {
	id := a.nodes[h]
	_, known := a.nums[id]
	return known && !a.sm.conf.has(id)
}

// notMemberError is the answer of a node outside the configuration.
func (a *Paxos) notMemberError() service.Result {
	if a.sm.conf.epoch > 0 && a.executed >= a.sm.conf.epoch && a.nums[a.cfg.Self] != 0 {
		return service.Fail(synoderr.TryAgain, "paxos: node %s is not a member of namespace %s (removed; members: %s); send requests to a member (a write's outcome is unknown)",
			a.cfg.Self, a.cfg.Namespace, a.sm.conf)
	}
	return service.Fail(synoderr.TryAgain, "paxos: node %s is not a member of namespace %s yet (members as of instance %d: %s); send requests to a member",
		a.cfg.Self, a.cfg.Namespace, a.executed, a.sm.conf)
}

// onMemberRequest handles a membership change submitted at this node.
func (a *Paxos) onMemberRequest(req automaton.Request) {
	if isTransferReq(req) {
		if err := checkTransfer(req.Op); err != nil {
			a.Respond(req.ID, service.Errorf("ERR %v", err))
			return
		}
	} else if _, err := parseChange(req.Op); err != nil {
		a.Respond(req.ID, service.Errorf("ERR %v", err))
		return
	}
	if p := a.pending[req.ID]; p != nil {
		p.local = true
		return
	}
	p := &pend{req: req, local: true, fwdTo: -1}
	a.pending[req.ID] = p
	a.route(p)
}

// leadChange handles a membership change at the leader: an add first makes
// its node a learner and waits until it has caught up; a remove is queued
// at once. Either is proposed alone in its instance (propose).
func (a *Paxos) leadChange(p *pend) {
	ch, _ := parseChange(p.req.Op)
	if !ch.add || a.sm.conf.has(ch.id) {
		// Removes, and adds that will fail anyway, go straight to the log
		// (the log answers invalid changes with an error).
		p.state = pQueued
		a.queue = append(a.queue, p.req.ID)
		a.propose()
		return
	}
	if a.learners[ch.id] == nil {
		a.learners[ch.id] = &learner{peer: ch.peer, client: ch.client}
		a.handle(ch.id)
		a.emitMembers()
		a.sendHeartbeat()
	}
	p.state = pLearner
	a.checkLearners()
}

// checkLearners queues the adds whose learners have caught up: they
// acknowledged a heartbeat of this leader, and their acknowledged chosen
// prefix is within one window of the leader's.
func (a *Paxos) checkLearners() {
	var ready []automaton.RequestID
	for id, p := range a.pending {
		if p.state != pLearner {
			continue
		}
		ch, _ := parseChange(p.req.Op)
		l := a.learners[ch.id]
		if l == nil {
			// The learner entry was reset (leader change): start again.
			l = &learner{peer: ch.peer, client: ch.client}
			a.learners[ch.id] = l
			a.emitMembers()
		}
		if l.heard && l.commit+uint64(a.prm.Window) >= a.chosenUpTo {
			ready = append(ready, id)
		}
	}
	automaton.SortRequestIDs(ready)
	for _, id := range ready {
		p := a.pending[id]
		p.state = pQueued
		a.queue = append(a.queue, id)
	}
	if len(ready) > 0 {
		a.propose()
	}
}
