package fastpaxos

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/synod-dev/synod/automaton"
)

// Invariants (automaton.InvariantStater), checked after every step in
// simulation and in the harness. The checker keeps every vote any acceptor
// ever showed (latest per acceptor, instance and round), so "chosen" is
// judged from the votes themselves, by the quorum rule, independently of
// what any learner concluded.
var invariantNames = []string{
	"at most one value chosen per instance: no two values ever reach quorum(b) votes in rounds of one instance (Fast Paxos safety)",
	"learned values are chosen: a value a learner knows chosen reached quorum(b) votes in some round b (fast quorum in a fast round), and learners agree",
	"votes respect promises: an acceptor never votes in a round below the promise it held before the step, and its node-wide promise never decreases within an incarnation; it votes at most once per round at an instance (every vote a step casts counts, one it overwrote in the same step included)",
	"executed prefixes agree: a digest chain over the executed instances is the same at every replica",
}

// Invariants implements automaton.InvariantStater.
func (protocol) Invariants() ([]string, automaton.InvariantChecker) {
	return append([]string(nil), invariantNames...), newChecker()
}

type castKey struct {
	acc automaton.NodeID
	bal Ballot
}

type checker struct {
	votes   map[uint64]map[castKey][]byte
	learned map[uint64]*backed[string]
	prefix  map[uint64]*backed[uint64]
	nodes   map[automaton.NodeID]*replicaCheck
}

// backed is a value some replicas hold (a value learned at an instance, a
// digest of an executed prefix), with the replicas whose current
// incarnation holds it. A crash takes a replica's unsynced learning with it
// (nothing it revealed depended on it: answers wait for the records), so a
// restart withdraws the replica's backing, and the value is forgotten when
// no replica holds it any more.
type backed[T comparable] struct {
	v  T
	by map[automaton.NodeID]bool
}

// agree records that id holds v, and reports the other value held, if any.
func agree[T comparable](m map[uint64]*backed[T], i uint64, id automaton.NodeID, v T) (T, bool) {
	b := m[i]
	if b == nil {
		m[i] = &backed[T]{v: v, by: map[automaton.NodeID]bool{id: true}}
		return v, true
	}
	if b.v != v {
		return b.v, false
	}
	b.by[id] = true
	return v, true
}

// withdraw removes id's backing from every entry of m.
func withdraw[T comparable](m map[uint64]*backed[T], id automaton.NodeID) {
	for i, b := range m {
		if b.by[id] {
			delete(b.by, id)
			if len(b.by) == 0 {
				delete(m, i)
			}
		}
	}
}

type replicaCheck struct {
	a        *FastPaxos
	promised Ballot
	rnd      map[uint64]Ballot // per-instance rounds last seen
	execTo   uint64
	chain    uint64
}

func newChecker() *checker {
	return &checker{votes: map[uint64]map[castKey][]byte{}, learned: map[uint64]*backed[string]{},
		prefix: map[uint64]*backed[uint64]{}, nodes: map[automaton.NodeID]*replicaCheck{}}
}

// Check implements automaton.InvariantChecker.
func (c *checker) Check(id automaton.NodeID, up map[automaton.NodeID]automaton.Automaton) error {
	a, ok := up[id].(*FastPaxos)
	if !ok || a == nil {
		return nil
	}
	r := c.nodes[id]
	fresh := r == nil || r.a != a
	if fresh {
		r = &replicaCheck{a: a, promised: a.promised, rnd: map[uint64]Ballot{}}
		c.nodes[id] = r
	}
	if a.promised.Less(r.promised) {
		return fmt.Errorf("fastpaxos invariant: %s's promise went down from %v to %v", id, r.promised, a.promised)
	}
	touched := a.touched
	if fresh {
		c.forgetUnsynced(id, a)
		withdraw(c.learned, id)
		withdraw(c.prefix, id)
		touched = make([]uint64, 0, len(a.insts))
		for i := range a.insts {
			touched = append(touched, i)
		}
		sortU64(touched)
	}
	// Every vote the step cast, in order, including one cast and
	// overwritten within the step (its phase 2b left: learners may count
	// it). Judging only the instances' state after the step missed those,
	// and then took a value learned from them for one no quorum chose
	// (synod-lab sim --protocol fastpaxos --nodes 4 --no-fanout --faults none:
	// 19 of 20 seeds), and could miss a real double choice.
	casts := a.cast
	if fresh {
		casts = nil
		for _, i := range touched {
			if s := a.insts[i]; s != nil && !s.vrnd.IsZero() {
				casts = append(casts, cast{i: i, bal: s.vrnd, val: s.vval})
			}
		}
	}
	for _, v := range casts {
		if !fresh {
			prev := r.promised
			if prev.Less(r.rnd[v.i]) {
				prev = r.rnd[v.i]
			}
			if v.bal.Less(prev) {
				return fmt.Errorf("fastpaxos invariant: %s voted at instance %d in round %v below its promise %v", id, v.i, v.bal, prev)
			}
		}
		vs := c.votes[v.i]
		if vs == nil {
			vs = map[castKey][]byte{}
			c.votes[v.i] = vs
		}
		k := castKey{id, v.bal}
		if old, ok := vs[k]; ok && !bytes.Equal(old, v.val) && !fresh {
			return fmt.Errorf("fastpaxos invariant: %s voted twice at instance %d in round %v (%s, then %s)", id, v.i, v.bal, describeValue(old), describeValue(v.val))
		}
		vs[k] = v.val
		if vals := c.chosenValues(a.q, v.i); len(vals) > 1 {
			return fmt.Errorf("fastpaxos invariant: instance %d has two values chosen (%s and %s)", v.i, describeValue(vals[0]), describeValue(vals[1]))
		}
	}
	for _, i := range touched {
		if s := a.insts[i]; s != nil {
			r.rnd[i] = s.rnd
		}
	}
	r.promised = a.promised
	// Learned values: the stepped node's instances newly known chosen.
	var learned []uint64
	if fresh {
		for i := range a.chosen {
			learned = append(learned, i)
		}
		sortU64(learned)
	} else {
		learned = a.learnedNow
	}
	for _, i := range learned {
		v := a.chosen[i]
		if g, ok := agree(c.learned, i, id, string(v)); !ok {
			return fmt.Errorf("fastpaxos invariant: %s learned %s at instance %d, another learner %s", id, describeValue(v), i, describeValue([]byte(g)))
		}
		found := false
		for _, w := range c.chosenValues(a.q, i) {
			found = found || bytes.Equal(w, v)
		}
		if !found {
			return fmt.Errorf("fastpaxos invariant: %s learned %s at instance %d, which no quorum chose", id, describeValue(v), i)
		}
	}
	// Executed prefixes.
	for i := r.execTo + 1; i <= a.executed; i++ {
		r.chain = mix(r.chain, digest(a.chosen[i]))
		if _, ok := agree(c.prefix, i, id, r.chain); !ok {
			return fmt.Errorf("fastpaxos invariant: %s's executed prefix up to instance %d differs from another replica's", id, i)
		}
	}
	r.execTo = max(r.execTo, a.executed)
	return nil
}

// forgetUnsynced drops, when a node restarts, the votes the checker saw in
// its memory that its records do not hold: they were lost unsynced with the
// crash, so their phase 2b messages never left (the runtime holds a send
// until the records before it are durable), and the acceptor may vote
// again in that round at that instance.
func (c *checker) forgetUnsynced(id automaton.NodeID, a *FastPaxos) {
	for i, vs := range c.votes {
		for k, v := range vs {
			if k.acc != id {
				continue
			}
			// Votes in rounds below the restored vote were overwritten by a
			// later vote, not lost.
			if s := a.insts[i]; s == nil || s.vrnd.Less(k.bal) || (s.vrnd == k.bal && !bytes.Equal(s.vval, v)) {
				delete(vs, k)
			}
		}
	}
}

// chosenValues lists the values that reached quorum(b) votes in some round
// b of instance i, by the votes every acceptor ever showed.
func (c *checker) chosenValues(q quorums, i uint64) [][]byte {
	type key struct {
		bal Ballot
		val string
	}
	counts := map[key]int{}
	for k, v := range c.votes[i] {
		counts[key{k.bal, string(v)}]++
	}
	var out [][]byte
	for k, n := range counts {
		if n < q.of(k.bal) {
			continue
		}
		dup := false
		for _, w := range out {
			dup = dup || string(w) == k.val
		}
		if !dup {
			out = append(out, []byte(k.val))
		}
	}
	sort.Slice(out, func(x, y int) bool { return bytes.Compare(out[x], out[y]) < 0 })
	return out
}

// describeValue renders a value for reports and traces.
func describeValue(v []byte) string {
	r, ok, err := decodeValue(v)
	switch {
	case err != nil:
		return fmt.Sprintf("undecodable %x", v)
	case !ok:
		return "noop"
	}
	s := fmt.Sprintf("%v %s", r.ID, r.Op.Kind)
	if r.Op.Key != "" {
		s += " " + r.Op.Key
	}
	for _, arg := range r.Op.Args {
		s += fmt.Sprintf(" %q", arg)
	}
	return s
}

func digest(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, x := range b {
		h ^= uint64(x)
		h *= 1099511628211
	}
	return h
}

func mix(chain, d uint64) uint64 {
	h := chain ^ 0x9e3779b97f4a7c15
	for k := 0; k < 8; k++ {
		h ^= d & 0xff
		h *= 1099511628211
		d >>= 8
	}
	return h
}
