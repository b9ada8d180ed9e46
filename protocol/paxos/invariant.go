package paxos

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
)

// Invariants (automaton.InvariantStater), checked by the simulator after
// every step. The checker is incremental: each call looks at the stepped
// replica only, and only at what changed since that replica's last check
// (instances newly chosen or executed, its promise, its leadership).
var invariantNames = []string{
	"one value chosen per instance: no two replicas know different values chosen for one instance (seed 002 V, safety)",
	"promises never decrease: a replica's promised ballot never goes down within an incarnation, and after a restart it is at least every ballot a leader or candidate holds its Promise, Accepted or HeartbeatAck for",
	"executed prefixes agree: a digest chain over the executed instances is the same at every replica (state machine safety)",
	"one leader per ballot: at most one node completes phase 1 under a ballot",
}

// Invariants implements automaton.InvariantStater.
func (protocol) Invariants() ([]string, automaton.InvariantChecker) {
	return append([]string(nil), invariantNames...), newInvariantChecker()
}

// invariantChecker holds, across one run, what the cluster has committed
// to: the chosen value of every instance as the first replica knew it, the
// digest of every executed prefix as the first replica executed it, the
// leader of every ballot, and per node the lowest promise others observed.
type invariantChecker struct {
	chosen map[uint64]uint64 // instance -> digest of its chosen value
	prefix map[uint64]uint64 // instance -> digest chain of instances 1..i
	// Knowledge only one incarnation has is tentative: a leader counts
	// its own acceptance towards a majority before that acceptance is
	// durable (the record is persisted after the Accept that carries it),
	// so it may know a value chosen that its crash un-chooses: when the
	// crash loses that record (automaton.CrashObserver), the value held
	// only a minority of durable votes, nothing that depended on the
	// choice had left the leader (answers and commit notices wait for the
	// record), and a later leader may rightly choose another value (seed
	// 002 V: chosen means accepted by a majority). An entry is confirmed
	// when another incarnation knows the same (it can only have learnt it
	// from a released message), and retracted when its sole owner crashed
	// losing the instance's acceptance record.
	tentChosen, tentPrefix tentative
	// incarnation: the automaton of each node that is up, as last seen.
	incarnation map[automaton.NodeID]*Paxos
	leaders     map[Ballot]automaton.NodeID
	// witness: a ballot some leader or candidate holds this node's promise
	// or acceptance for. That answer left the node only once its promise
	// was durable, so no later incarnation may promise less.
	witness map[automaton.NodeID]Ballot
	nodes   map[automaton.NodeID]*replicaCheck
}

// replicaCheck is what the checker last saw of one incarnation of a node.
type replicaCheck struct {
	a        *Paxos
	promised Ballot
	chosenTo uint64 // instances up to it were checked against chosen
	execTo   uint64 // ... and against prefix
	chain    uint64 // digest chain up to execTo (valid when chainOK)
	chainOK  bool
	// The answers the replica held when its witnesses were last raised:
	// under one ballot the sets only grow, so equal sizes mean nothing new.
	seenBallot                          Ballot
	seenRole                            int
	seenPromises, seenAcked, seenRounds int
}

func newInvariantChecker() *invariantChecker {
	return &invariantChecker{
		chosen:      map[uint64]uint64{},
		prefix:      map[uint64]uint64{0: 0},
		leaders:     map[Ballot]automaton.NodeID{},
		witness:     map[automaton.NodeID]Ballot{},
		nodes:       map[automaton.NodeID]*replicaCheck{},
		tentChosen:  tentative{of: map[uint64]*Paxos{}},
		tentPrefix:  tentative{of: map[uint64]*Paxos{}},
		incarnation: map[automaton.NodeID]*Paxos{},
	}
}

// Crashed implements automaton.CrashObserver: the tentative knowledge of
// the crashed incarnation about instances whose acceptance record the
// crash lost is retracted (invariantChecker.tentChosen), with the executed
// prefixes from the first such instance on.
func (c *invariantChecker) Crashed(id automaton.NodeID, lost []string) {
	a := c.incarnation[id]
	if a == nil {
		return
	}
	first := uint64(0)
	for _, k := range lost {
		i, ok := slotOfKey(k)
		if !ok {
			continue
		}
		if c.tentChosen.of[i] == a {
			delete(c.tentChosen.of, i)
			delete(c.chosen, i)
			if first == 0 || i < first {
				first = i
			}
		}
	}
	if first == 0 {
		return
	}
	for i, o := range c.tentPrefix.of {
		if o == a && i >= first {
			delete(c.tentPrefix.of, i)
			delete(c.prefix, i)
		}
	}
}

// tentative tracks the entries of a checker map that one incarnation alone
// established (invariantChecker.tentChosen).
type tentative struct {
	of map[uint64]*Paxos // instance -> the incarnation that alone knows it
}

// establish records that a alone knows instance i.
func (t *tentative) establish(i uint64, a *Paxos) { t.of[i] = a }

// confirm records that a knows instance i too.
func (t *tentative) confirm(i uint64, a *Paxos) {
	if o, ok := t.of[i]; ok && o != a {
		delete(t.of, i)
	}
}

// Check implements automaton.InvariantChecker.
func (c *invariantChecker) Check(stepped automaton.NodeID, up map[automaton.NodeID]automaton.Automaton) error {
	a, ok := up[stepped].(*Paxos)
	if !ok || a == nil {
		return nil
	}
	r := c.nodes[stepped]
	if r == nil || r.a != a {
		// A new incarnation: its promise is checked against the witnesses
		// only, its log from its start.
		start := uint64(0)
		if a.logStart > 0 {
			start = a.logStart - 1
		}
		r = &replicaCheck{a: a, promised: a.promised, chosenTo: start, execTo: start, chainOK: start == 0}
		c.nodes[stepped] = r
		if a.promised == (Ballot{}) && !a.isMember() {
			// A node joining with an empty disk under the id of a node
			// removed earlier is a new acceptor: the old one's promises
			// bind it no more than any other joiner's.
			delete(c.witness, stepped)
		}
	}
	c.incarnation[stepped] = a
	if err := c.checkPromise(stepped, a, r); err != nil {
		return err
	}
	if err := c.checkChosen(stepped, a, r); err != nil {
		return err
	}
	if err := c.checkExecuted(stepped, a, r); err != nil {
		return err
	}
	return c.checkLeader(stepped, a)
}

// checkPromise: promises never decrease (invariant 2), and the stepped
// node's observed answers raise the witnesses of the nodes that gave them.
func (c *invariantChecker) checkPromise(id automaton.NodeID, a *Paxos, r *replicaCheck) error {
	if a.promised.Less(r.promised) {
		return fmt.Errorf("paxos invariant: %s's promise went down from %v to %v", id, r.promised, a.promised)
	}
	r.promised = a.promised
	if w := c.witness[id]; a.promised.Less(w) {
		return fmt.Errorf("paxos invariant: %s promises %v, below ballot %v that a leader or candidate holds its answer for", id, a.promised, w)
	}
	raise := func(h int) {
		if h == a.self || h < 0 || h >= len(a.nodes) {
			return // its own vote may be lost with its unsynced records
		}
		n := a.nodes[h]
		if c.witness[n].Less(a.ballot) {
			c.witness[n] = a.ballot
		}
	}
	if a.role == follower {
		return nil
	}
	if r.seenBallot == a.ballot && r.seenRole == a.role && r.seenPromises == len(a.promises) &&
		r.seenAcked == len(a.acked) && r.seenRounds == len(a.ackRound) {
		return nil // nothing new since the last check
	}
	r.seenBallot, r.seenRole = a.ballot, a.role
	r.seenPromises, r.seenAcked, r.seenRounds = len(a.promises), len(a.acked), len(a.ackRound)
	switch a.role {
	case candidate:
		for h := range a.promises {
			raise(h)
		}
	case leader:
		for h := range a.acked {
			raise(h)
		}
		for h, round := range a.ackRound {
			if round > 0 {
				raise(h)
			}
		}
	}
	return nil
}

// checkChosen: one value chosen per instance (invariant 1), over the
// instances that joined the stepped replica's chosen prefix.
func (c *invariantChecker) checkChosen(id automaton.NodeID, a *Paxos, r *replicaCheck) error {
	for i := r.chosenTo + 1; i <= a.chosenUpTo; i++ {
		s := a.log[i]
		if s == nil {
			continue // learnt inside a snapshot
		}
		d := digest(s.val)
		if g, ok := c.chosen[i]; !ok {
			c.chosen[i] = d
			c.tentChosen.establish(i, a)
		} else if g == d {
			c.tentChosen.confirm(i, a)
		} else {
			return fmt.Errorf("paxos invariant: %s knows instance %d chosen with a value other than the one another replica knew chosen (value digests %016x, %016x)", id, i, d, g)
		}
	}
	if a.chosenUpTo > r.chosenTo {
		r.chosenTo = a.chosenUpTo
	}
	return nil
}

// checkExecuted: executed prefixes agree (invariant 3). The chain digest
// of instance i covers instances 1..i; a replica that skipped instances
// (a snapshot installed) continues from the chain the first executor
// recorded.
func (c *invariantChecker) checkExecuted(id automaton.NodeID, a *Paxos, r *replicaCheck) error {
	for i := r.execTo + 1; i <= a.executed; i++ {
		s := a.log[i]
		if s == nil {
			r.chainOK = false // inside a snapshot
			continue
		}
		if !r.chainOK {
			prev, ok := c.prefix[i-1]
			if !ok {
				continue
			}
			r.chain, r.chainOK = prev, true
		}
		r.chain = mix(r.chain, digest(s.val))
		if g, ok := c.prefix[i]; !ok {
			c.prefix[i] = r.chain
			c.tentPrefix.establish(i, a)
		} else if g == r.chain {
			c.tentPrefix.confirm(i, a)
		} else {
			return fmt.Errorf("paxos invariant: %s's executed prefix up to instance %d differs from another replica's", id, i)
		}
	}
	if a.executed > r.execTo {
		r.execTo = a.executed
	}
	return nil
}

// checkLeader: one leader per ballot (invariant 4).
func (c *invariantChecker) checkLeader(id automaton.NodeID, a *Paxos) error {
	if a.role != leader || !a.ready {
		return nil
	}
	if l, ok := c.leaders[a.ballot]; !ok {
		c.leaders[a.ballot] = id
	} else if l != id {
		return fmt.Errorf("paxos invariant: %s and %s both lead ballot %v", l, id, a.ballot)
	}
	return nil
}

// digest is FNV-1a over b.
func digest(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, x := range b {
		h ^= uint64(x)
		h *= 1099511628211
	}
	return h
}

// mix chains a value digest onto a prefix digest.
func mix(chain, d uint64) uint64 {
	h := chain ^ 0x9e3779b97f4a7c15
	for k := 0; k < 8; k++ {
		h ^= d & 0xff
		h *= 1099511628211
		d >>= 8
	}
	return h
}
