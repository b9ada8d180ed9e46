package abd

import (
	"fmt"
	"sort"
	"strings"

	"github.com/synod-dev/synod/automaton"
)

// Invariants (automaton.InvariantStater), checked after every step in
// simulation and in the test harness. Each check reads only what the step
// did (the stores it applied or acknowledged, the operations it completed),
// plus a full scan of a replica's registers when it restarts.
//
// Why "held", not "durable": a replica answers from memory, and the runtime
// releases its answer only once the record is durable (the contract's
// durability rule), but a crash may lose a store that was applied and not
// yet synced, together with its unreleased acknowledgement. So across a
// restart the tags can only be compared with those restored at the previous
// start (durable records only grow), and a node that is down counts in a
// majority with the tags it last held in memory, which can only make the
// majority check weaker, never wrong.
var invariantNames = []string{
	"tag-monotonic: a replica's tag for a key never decreases within an incarnation, and a restart restores at least the tags of the previous start (seed 001 §3.1.1: a replica installs only a higher tag)",
	"store-held: after a replica acknowledges Store(t) for a key it holds t or a higher tag (what the quorum intersection argument needs)",
	"tag-unique: two replicas holding the same tag for a key hold the same value (a tag names one write)",
	"majority-holds: when a write or a linearizable read completes with tag t, a majority of replicas holds t or a higher tag (seed 001 §3.1.2, and the read's write-back)",
}

// Invariants implements automaton.InvariantStater.
func (p protocol) Invariants() ([]string, automaton.InvariantChecker) {
	return invariantNames, &checker{inc: map[automaton.NodeID]*ABD{}, last: map[automaton.NodeID]map[string]Tag{},
		floor: map[automaton.NodeID]map[string]Tag{}, vals: map[string]map[Tag]string{}}
}

type checker struct {
	inc   map[automaton.NodeID]*ABD           // the incarnation last seen per node
	last  map[automaton.NodeID]map[string]Tag // tags held, per node
	floor map[automaton.NodeID]map[string]Tag // tags restored at the node's last start
	vals  map[string]map[Tag]string           // per key and tag, the value seen first
}

func (c *checker) Check(stepped automaton.NodeID, up map[automaton.NodeID]automaton.Automaton) error {
	a, ok := up[stepped].(*ABD)
	if !ok {
		return nil
	}
	if c.inc[stepped] != a {
		if err := c.started(stepped, a); err != nil {
			return err
		}
	}
	last := c.last[stepped]
	for _, s := range a.stepStores {
		e := a.entry(s.key)
		if e.Tag.Less(s.tag, false) {
			return fmt.Errorf("store-held: %s acknowledged Store %s for key %q but holds %s", stepped, showTag(s.tag), s.key, showTag(e.Tag))
		}
		if e.Tag.Less(last[s.key], false) {
			return fmt.Errorf("tag-monotonic: %s's tag for key %q went from %s down to %s", stepped, s.key, showTag(last[s.key]), showTag(e.Tag))
		}
		last[s.key] = e.Tag
		if err := c.unique(stepped, s.key, e); err != nil {
			return err
		}
	}
	for _, d := range a.stepDone {
		held := 0
		for _, id := range a.cfg.Nodes {
			t := c.last[id][d.key]
			if b, ok := up[id].(*ABD); ok {
				t = b.entry(d.key).Tag
			}
			if !t.Less(d.tag, false) {
				held++
			}
		}
		if q := automaton.Majority(len(a.cfg.Nodes)); held < q {
			return fmt.Errorf("majority-holds: %s completed an operation on key %q with tag %s, held by %d replicas, fewer than a majority (%d)",
				stepped, d.key, showTag(d.tag), held, q)
		}
	}
	return nil
}

// started checks a new incarnation's restored registers against the
// previous start's, and takes them as the node's floor.
func (c *checker) started(id automaton.NodeID, a *ABD) error {
	c.inc[id] = a
	if a.fresh {
		c.floor[id] = nil // first boot, or a wiped disk: nothing to keep
	}
	for k, f := range c.floor[id] {
		if got := a.entry(k).Tag; got.Less(f, false) {
			return fmt.Errorf("tag-monotonic: %s restarted with tag %s for key %q, below %s restored at its previous start", id, showTag(got), k, showTag(f))
		}
	}
	floor, last := map[string]Tag{}, map[string]Tag{}
	for k, e := range a.store {
		floor[k], last[k] = e.Tag, e.Tag
		if err := c.unique(id, k, *e); err != nil {
			return err
		}
	}
	c.floor[id], c.last[id] = floor, last
	return nil
}

func (c *checker) unique(id automaton.NodeID, key string, e entry) error {
	if e.Tag == (Tag{}) {
		return nil
	}
	v := "v" + string(e.Value)
	if e.Tomb {
		v = "tombstone"
	}
	m := c.vals[key]
	if m == nil {
		m = map[Tag]string{}
		c.vals[key] = m
	}
	if old, ok := m[e.Tag]; !ok {
		m[e.Tag] = v
	} else if old != v {
		return fmt.Errorf("tag-unique: %s holds %s under tag %s for key %q, another replica held %s under the same tag", id, show(v), showTag(e.Tag), key, show(old))
	}
	return nil
}

func show(v string) string {
	if strings.HasPrefix(v, "v") {
		return fmt.Sprintf("%q", v[1:])
	}
	return v
}

// Dump describes the replica's registers and the operations it coordinates
// (for the test harness's `state`).
func (a *ABD) Dump() string {
	var b strings.Builder
	fmt.Fprintf(&b, "incarnation %x, %d operations in flight", a.incarnation, len(a.ops))
	keys := make([]string, 0, len(a.store))
	for k := range a.store {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e := a.store[k]
		v := fmt.Sprintf("%q", e.Value)
		if e.Tomb {
			v = "tombstone"
		}
		fmt.Fprintf(&b, "\n  %s %s %s", k, showTag(e.Tag), v)
	}
	return b.String()
}

// DescribeMessage renders a peer message in one line (test traces).
func (a *ABD) DescribeMessage(b []byte) string {
	m, err := unmarshal(b)
	if err != nil {
		return fmt.Sprintf("corrupt message (%v)", err)
	}
	op := showOp(m.Op)
	switch m.Kind {
	case kindQuery:
		return fmt.Sprintf("query op=%s key=%s", op, m.Key)
	case kindQueryAbove:
		w := ""
		if m.Writes {
			w = " writes"
		}
		return fmt.Sprintf("query op=%s key=%s above=%s%s", op, m.Key, showTag(m.Tag), w)
	case kindQueryReply:
		return fmt.Sprintf("query-reply op=%s key=%s tag=%s %s", op, m.Key, showTag(m.Tag), showValue(m.Tomb, m.Value))
	case kindStore:
		return fmt.Sprintf("store op=%s key=%s tag=%s %s", op, m.Key, showTag(m.Tag), showValue(m.Tomb, m.Value))
	case kindStoreAck:
		return fmt.Sprintf("store-ack op=%s", op)
	}
	return fmt.Sprintf("kind %d", m.Kind)
}

// showOp prints an operation id as incarnation.counter.
func showOp(id uint64) string { return fmt.Sprintf("%x.%d", id>>32, id&0xffffffff) }

func showTag(t Tag) string {
	if t == (Tag{}) {
		return "(0)"
	}
	return fmt.Sprintf("(%d,%s,%s)", t.TS, t.Node, showOp(t.Seq))
}

func showValue(tomb bool, v []byte) string {
	if tomb {
		return "tombstone"
	}
	return fmt.Sprintf("%q", v)
}
