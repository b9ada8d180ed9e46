package eve

import (
	"crypto/sha256"
	"fmt"

	"github.com/synod-dev/synod/automaton"
)

// Invariants (automaton.InvariantStater), checked after every step in
// simulation and in the harness.
var invariantNames = []string{
	"reply-after-commit: a node answers a request only once the slot that applied it is decided and applied at that node (seed 003 §2.2.3: results are released after commit)",
	"commit-quorum: every commit decision carries r+1 tokens with valid MACs, from distinct execution replicas, for the committed claim and slot (\"enough submissions of the same token to guarantee that a correct replica submitted it\")",
	"one decision per slot: no two verifiers know different decisions for one slot from other nodes' messages (verifier agreement; a leader's own decision counts once another node has heard it: until then it may rest on its not yet durable acceptance)",
	"committed state matches its token: after a commit applied from its own run, a replica's (state, results) hash is the committed end hash",
}

// Invariants implements automaton.InvariantStater.
func (protocol) Invariants() ([]string, automaton.InvariantChecker) {
	return InvariantNames(), NewChecker()
}

// InvariantNames are the engine's invariants (for a protocol built on it).
func InvariantNames() []string { return append([]string(nil), invariantNames...) }

// Checker checks the engine's invariants; a protocol built on the engine
// calls CheckEve for its nodes.
type Checker = checker

// NewChecker returns a fresh checker of the engine's invariants.
func NewChecker() *Checker {
	return &checker{decided: map[uint64][32]byte{}, seen: map[*decision]bool{}, proved: map[*decision]bool{}}
}

// checker is incremental: each decision (immutable once learned) is
// checked once.
type checker struct {
	decided map[uint64][32]byte // slot -> the decision as first seen
	seen    map[*decision]bool  // compared for agreement
	proved  map[*decision]bool  // commit-quorum checked
}

func (c *checker) Check(stepped automaton.NodeID, up map[automaton.NodeID]automaton.Automaton) error {
	a, ok := up[stepped].(*Eve)
	if !ok {
		return nil
	}
	return c.CheckEve(a)
}

// CheckEve checks the engine's invariants after a step of a.
func (c *checker) CheckEve(a *Eve) error {
	for _, n := range a.stepAnswers {
		if !n.ok {
			return fmt.Errorf("reply-after-commit: %s answered %v from slot %d before applying it (applied %d)", a.cfg.Self, n.id, n.slot, a.ex.applied)
		}
	}
	if v := a.ver; v != nil {
		for s, d := range v.decided {
			if !c.proved[d] {
				c.proved[d] = true
				if err := a.checkQuorum(d); err != nil {
					return err
				}
			}
			if c.seen[d] || !v.heard[s] {
				continue // a leader's own decision: checked once heard
			}
			c.seen[d] = true
			key := d.digest()
			if prev, ok := c.decided[s]; ok && prev != key {
				return fmt.Errorf("one decision per slot: %s knows %v for slot %d, another verifier a different decision", a.cfg.Self, d, s)
			}
			c.decided[s] = key
		}
	}
	if r := a.ex; r != nil && r.lastOwn != nil {
		d := r.lastOwn
		if d.Kind == decCommit && r.end != d.Claim.End {
			return fmt.Errorf("committed state matches its token: %s applied slot %d with end hash %x, committed %x", a.cfg.Self, d.Slot, r.end[:4], d.Claim.End[:4])
		}
	}
	return nil
}

// checkQuorum checks a decision's proof (commit-quorum).
func (a *Eve) checkQuorum(d *decision) error {
	if d.Kind != decCommit {
		return nil
	}
	seen := map[automaton.NodeID]bool{}
	for _, t := range d.Tokens {
		switch {
		case !t.valid(a.macKey):
			return fmt.Errorf("commit-quorum: slot %d: token of %s has a bad MAC", d.Slot, t.Replica)
		case t.claim() != d.Claim || t.Slot != d.Slot:
			return fmt.Errorf("commit-quorum: slot %d: token of %s is for another claim", d.Slot, t.Replica)
		case seen[t.Replica] || !a.isExecSet[t.Replica]:
			return fmt.Errorf("commit-quorum: slot %d: token of %s twice or not an execution replica", d.Slot, t.Replica)
		}
		seen[t.Replica] = true
	}
	if len(seen) < a.quorum {
		return fmt.Errorf("commit-quorum: slot %d committed on %d matching tokens, r+1 = %d needed", d.Slot, len(seen), a.quorum)
	}
	return nil
}

// digest identifies a decision's content.
func (x *decision) digest() [32]byte {
	e := header.Record(64)
	x.encode(&e)
	return sha256.Sum256(e.B)
}
