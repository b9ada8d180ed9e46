package blocking

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/synod-dev/synod/automaton"
)

// Invariants (automaton.InvariantStater), checked after every step in
// simulation and in the test harness. The checks read the stepped node's
// view, its locks and the registers the step changed; only a restart
// rescans a node's registers.
//
// Across a restart a node's ballots are compared with those it restored at
// its previous start, not with what it held in memory: a crash may lose a
// promise or an install that was not yet synced, together with the answer
// that depended on it (the contract's durability rule), and durable records
// only grow.
var invariantNames = []string{
	"view-monotonic: a node's installed view and promised ballot never decrease within an incarnation, a restart restores at least those of the previous start, and the view never exceeds the promise (§4.4's view change as Paxos phases)",
	"mutex: at most one node participating in a view holds a given lock of that view (seed 001 §3.2.1, Lamport's mutual exclusion)",
	"tag-unique: two committed registers holding the same tag (view, sequence) for a key hold the same value (one holder per lock per view numbers its writes)",
}

// Invariants implements automaton.InvariantStater.
func (p protocol) Invariants() ([]string, automaton.InvariantChecker) {
	return invariantNames, &checker{inc: map[automaton.NodeID]*Blocking{}, last: map[automaton.NodeID]ballots{},
		floor: map[automaton.NodeID]ballots{}, vals: map[string]map[Tag]string{}}
}

type ballots struct{ view, promised Ballot }

type checker struct {
	inc   map[automaton.NodeID]*Blocking
	last  map[automaton.NodeID]ballots
	floor map[automaton.NodeID]ballots
	vals  map[string]map[Tag]string // per key and tag, the value committed first
}

func (c *checker) Check(stepped automaton.NodeID, up map[automaton.NodeID]automaton.Automaton) error {
	b, ok := up[stepped].(*Blocking)
	if !ok {
		return nil
	}
	now := ballots{b.view, b.promised}
	if c.inc[stepped] != b {
		c.inc[stepped] = b
		f := c.floor[stepped]
		if now.view.Less(f.view) || now.promised.Less(f.promised) {
			return fmt.Errorf("view-monotonic: %s restarted with view %v promised %v, below view %v promised %v restored at its previous start",
				stepped, now.view.Dotted(), now.promised.Dotted(), f.view.Dotted(), f.promised.Dotted())
		}
		c.floor[stepped], c.last[stepped] = now, now
		for _, k := range slices.Sorted(maps.Keys(b.store)) {
			if err := c.unique(stepped, k, b.store[k]); err != nil {
				return err
			}
		}
	}
	if l := c.last[stepped]; now.view.Less(l.view) || now.promised.Less(l.promised) {
		return fmt.Errorf("view-monotonic: %s went from view %v promised %v to view %v promised %v", stepped, l.view.Dotted(), l.promised.Dotted(), now.view.Dotted(), now.promised.Dotted())
	}
	if now.promised.Less(now.view) {
		return fmt.Errorf("view-monotonic: %s installed view %v above its promise %v", stepped, now.view.Dotted(), now.promised.Dotted())
	}
	c.last[stepped] = now
	if b.participating() {
		for _, l := range slices.Sorted(maps.Keys(b.holding)) {
			for _, id := range automaton.UpNodes(up) {
				a := up[id]
				o, ok := a.(*Blocking)
				if ok && id != stepped && o.participating() && o.view == b.view && o.holding[l] != nil {
					return fmt.Errorf("mutex: %s and %s both hold lock %q in view %v", stepped, id, l, b.view.Dotted())
				}
			}
		}
	}
	for _, k := range b.changed {
		if e, ok := b.store[k]; ok {
			if err := c.unique(stepped, k, e); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *checker) unique(id automaton.NodeID, key string, e entry) error {
	if e.Tag == (Tag{}) {
		return nil
	}
	v := showValue(e)
	m := c.vals[key]
	if m == nil {
		m = map[Tag]string{}
		c.vals[key] = m
	}
	if old, ok := m[e.Tag]; !ok {
		m[e.Tag] = v
	} else if old != v {
		return fmt.Errorf("tag-unique: %s committed %s under tag %v for key %q, another replica committed %s under the same tag", id, v, e.Tag, key, old)
	}
	return nil
}

func showValue(e entry) string {
	if e.Tomb {
		return "tombstone"
	}
	return fmt.Sprintf("%q", e.Value)
}

func showMembers(b *Blocking, m []bool) string {
	var out []string
	for j, in := range m {
		if in && j < len(b.cfg.Nodes) {
			out = append(out, string(b.cfg.Nodes[j]))
		}
	}
	return "[" + strings.Join(out, " ") + "]"
}

// Dump describes the node's view, locks and registers (for the test
// harness's `state`).
func (b *Blocking) Dump() string {
	var s strings.Builder
	fmt.Fprintf(&s, "view %v promised %v members %s active=%v serving=%v", b.view.Dotted(), b.promised.Dotted(), showMembers(b, b.members), b.active, b.servedIn && b.active)
	for _, l := range sortedKeys(b.holding) {
		fmt.Fprintf(&s, "\n  holds lock %q: write %v", l, b.holding[l].tag)
	}
	for _, l := range sortedKeys(b.waiting) {
		if n := len(b.waiting[l]); n > 0 {
			fmt.Fprintf(&s, "\n  %d writes wait for lock %q", n, l)
		}
	}
	for _, l := range sortedKeys(b.pending) {
		ke := b.pending[l]
		fmt.Fprintf(&s, "\n  pending %s %v %s", ke.Key, ke.E.Tag, showValue(ke.E))
	}
	for _, k := range sortedKeys(b.store) {
		e := b.store[k]
		fmt.Fprintf(&s, "\n  %s %v %s", k, e.Tag, showValue(e))
	}
	return s.String()
}

// DescribeMessage renders a peer message in one line (test traces).
func (b *Blocking) DescribeMessage(raw []byte) string {
	m, err := unmarshal(raw)
	if err != nil {
		return fmt.Sprintf("corrupt message (%v)", err)
	}
	switch m.Kind {
	case kindState:
		s := fmt.Sprintf("state view=%v active=%v promised=%v members=%s clock=%d", m.View.Dotted(), m.Active, m.Promised.Dotted(), showMembers(b, m.Members), m.Clock)
		for _, r := range m.Reqs {
			s += fmt.Sprintf(" req(%q@%d)", r.Lock, r.TS)
		}
		return s
	case kindWrite:
		return fmt.Sprintf("write view=%v lock=%q seq=%d %s=%s", m.View.Dotted(), m.Lock, m.Seq, m.W.Key, showValue(m.W.E))
	case kindWriteAck:
		return fmt.Sprintf("write-ack view=%v lock=%q seq=%d", m.View.Dotted(), m.Lock, m.Seq)
	case kindCommit:
		return fmt.Sprintf("commit view=%v lock=%q seq=%d", m.View.Dotted(), m.Lock, m.Seq)
	case kindCommitAck:
		return fmt.Sprintf("commit-ack view=%v lock=%q seq=%d", m.View.Dotted(), m.Lock, m.Seq)
	case kindPrepare:
		return fmt.Sprintf("prepare ballot=%v", m.Ballot.Dotted())
	case kindPromise:
		return fmt.Sprintf("promise ballot=%v view=%v %d entries", m.Ballot.Dotted(), m.View.Dotted(), len(m.Snap))
	case kindNack:
		return fmt.Sprintf("nack ballot=%v promised=%v", m.Ballot.Dotted(), m.Promised.Dotted())
	case kindInstall:
		return fmt.Sprintf("install ballot=%v members=%s %d entries", m.Ballot.Dotted(), showMembers(b, m.Members), len(m.Snap))
	case kindInstallAck:
		return fmt.Sprintf("install-ack ballot=%v", m.Ballot.Dotted())
	}
	return fmt.Sprintf("kind %d", m.Kind)
}
