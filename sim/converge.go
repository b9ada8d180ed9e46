package sim

import (
	"encoding/hex"
	"fmt"
	"sort"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Convergence checks (issue 9 items 4 and 5).
//
// Replicas of a state machine that executed the same prefix of the agreed
// order must hold equal states. When the protocol's automata report their
// state (automaton.StateReporter), the simulator checks it twice:
//
//   - During the run. After a step that moved a replica's applied count
//     past a multiple of Config.ConvergeEvery (default 1: every change), the
//     simulator hashes the replica's state (service.StateHash: the Merkle
//     root for services that keep one, the SHA-256 of the snapshot
//     otherwise) and records applied -> hash. The first replica to report a
//     count fixes its hash; every later report of that count, by any
//     replica or incarnation, must match. A mismatch ends the run at once as
//     a violation (Result.Divergence), like an invariant (invariant.go): the
//     history checker is not run.
//   - At the end, after the drain (every fault healed): every pair of up
//     replicas reporting the same applied count must have equal hashes.
//
// Decision (the seeds are silent): an observation stands while a replica
// that made it, in the incarnation that made it, is up. A crash withdraws
// the crashed incarnation's observations, and a count nobody up vouches for
// any more is forgotten. A protocol may apply a command before its record
// is durable (the unreplicated server does; the simulator then holds the
// answer until the fsync), and a crash can lose that command; the restarted
// replica then reaches the same count with a different command, which is
// not a divergence. Paxos executes only chosen instances, so for it nothing
// is lost but the odd count reported by one replica that crashed before
// any other reached it.
//
// The check is cheap: a replica's count changes about once per executed
// instance, and the hash of a service keeping a Merkle tree rehashes only
// the touched leaves. ConvergeEvery thins it out for large states without
// a tree.

// convObs is the recorded hash of one applied count and who reported it.
type convObs struct {
	hash [32]byte
	// first names the first reporter, for the report.
	first string
	// by holds the indexes of the nodes whose current incarnation reported
	// this count.
	by []int
}

// convergence is one run's convergence-check state.
type convergence struct {
	on    bool // the protocol's automata report state
	every uint64
	seen  map[uint64]*convObs
	last  []uint64 // per node: the applied count last looked at (this incarnation)
	// checks counts the hashes compared (during the run and at the end).
	checks int
	err    string
}

func (c *convergence) init(nodes int, every int) {
	c.on = true
	c.every = 1
	if every > 1 {
		c.every = uint64(every)
	}
	c.seen = map[uint64]*convObs{}
	c.last = make([]uint64, nodes)
}

// observeState records n's state after a step when its applied count moved
// past a multiple of ConvergeEvery, and compares it with the hash recorded
// for that count.
func (s *simulator) observeState(n *node) {
	c := &s.conv
	if !c.on || c.err != "" || n.a == nil {
		return
	}
	r, ok := n.a.(automaton.StateReporter)
	if !ok {
		return
	}
	applied, st := r.ServiceState()
	if st == nil || applied == c.last[n.idx] {
		return
	}
	prev := c.last[n.idx]
	c.last[n.idx] = applied
	if applied/c.every == prev/c.every && applied > prev {
		return
	}
	s.recordState(n, applied, st)
}

// recordState compares n's state at applied with the recorded one, or
// records it.
func (s *simulator) recordState(n *node, applied uint64, st service.State) {
	c := &s.conv
	h := service.StateHash(st)
	who := fmt.Sprintf("%s (incarnation %d)", n.id, n.inc)
	o := c.seen[applied]
	if o == nil {
		c.seen[applied] = &convObs{hash: h, first: who, by: []int{n.idx}}
		return
	}
	c.checks++
	if o.hash != h {
		c.err = fmt.Sprintf("replicas diverged at applied count %d: %s has state hash %s, %s had %s (at %v)",
			applied, who, short(h), o.first, short(o.hash), s.now)
		s.tracef("DIVERGENCE %s", c.err)
		return
	}
	for _, i := range o.by {
		if i == n.idx {
			return
		}
	}
	o.by = append(o.by, n.idx)
}

// forgetIncarnation withdraws crashed node n's observations (see the doc
// above).
func (s *simulator) forgetIncarnation(n *node) {
	c := &s.conv
	if !c.on {
		return
	}
	c.last[n.idx] = 0
	for applied, o := range c.seen {
		k := 0
		for _, i := range o.by {
			if i != n.idx {
				o.by[k] = i
				k++
			}
		}
		o.by = o.by[:k]
		if k == 0 {
			delete(c.seen, applied) // order-independent: no output depends on the iteration
		}
	}
}

// finalConvergence compares the up replicas at the end of the run: equal
// applied counts, equal hashes.
func (s *simulator) finalConvergence() {
	c := &s.conv
	if !c.on || c.err != "" {
		return
	}
	type rep struct {
		node    *node
		applied uint64
		hash    [32]byte
	}
	var reps []rep
	for _, n := range s.nodes {
		if !n.up || n.a == nil {
			continue
		}
		r, ok := n.a.(automaton.StateReporter)
		if !ok {
			continue
		}
		applied, st := r.ServiceState()
		if st == nil {
			continue
		}
		reps = append(reps, rep{n, applied, service.StateHash(st)})
	}
	sort.SliceStable(reps, func(i, j int) bool { return reps[i].applied < reps[j].applied })
	for i := 1; i < len(reps); i++ {
		a, b := reps[i-1], reps[i]
		if a.applied != b.applied {
			continue
		}
		c.checks++
		if a.hash != b.hash {
			c.err = fmt.Sprintf("replicas diverged at the end of the run: %s and %s both applied %d but have state hashes %s and %s",
				a.node.id, b.node.id, a.applied, short(a.hash), short(b.hash))
			return
		}
	}
}

func short(h [32]byte) string { return hex.EncodeToString(h[:6]) }
