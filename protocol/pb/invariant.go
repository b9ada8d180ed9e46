package pb

import (
	"fmt"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

// Invariants (automaton.InvariantStater), checked after every step in
// simulation and in the harness.
var invariantNames = []string{
	"one-primary-per-view: a primary's ballot names itself, and no two up nodes are primary under one ballot",
	"view-monotonic: a node's view never goes back within an incarnation",
	"backup-prefix: a backup in the view of an up primary (not waiting for its promises, nor the backup for the primary's member list: takeover.go) has applied at most what the primary applied, and the same entries (equal digest chains at its count)",
	"reply-after-acks: when the primary answers a request whose answer covers entry i, every up backup in its member list and view has applied entry i (Fig. III.2: notify_change_with_ack before the reply)",
	"exactly-once: no request id is answered from two different entries (the duplicate table: a resubmitted write gets the old answer, III.B check_previous_requests)",
}

// Invariants implements automaton.InvariantStater.
func (p protocol) Invariants() ([]string, automaton.InvariantChecker) {
	return append([]string(nil), invariantNames...), &checker{
		inc:      map[automaton.NodeID]*PB{},
		view:     map[automaton.NodeID]proto.Ballot{},
		answered: map[automaton.RequestID]uint64{},
	}
}

type checker struct {
	inc      map[automaton.NodeID]*PB
	view     map[automaton.NodeID]proto.Ballot
	answered map[automaton.RequestID]uint64 // write -> index of the entry answered
}

func (c *checker) Check(stepped automaton.NodeID, up map[automaton.NodeID]automaton.Automaton) error {
	a, ok := up[stepped].(*PB)
	if !ok {
		return nil
	}
	if c.inc[stepped] != a {
		c.inc[stepped] = a
		c.view[stepped] = proto.Ballot{}
	}
	if a.view.Less(c.view[stepped]) {
		return fmt.Errorf("view-monotonic: %s went from view %v back to %v", stepped, c.view[stepped], a.view)
	}
	c.view[stepped] = a.view
	ids := automaton.UpNodes(up)
	if a.role == rolePrimary {
		if int(a.view.Node) != a.me+1 {
			return fmt.Errorf("one-primary-per-view: %s is primary under ballot %v, which names node %d", stepped, a.view, a.view.Node)
		}
		for _, id := range ids {
			if b, ok := up[id].(*PB); ok && id != stepped && b.role == rolePrimary && b.view == a.view {
				return fmt.Errorf("one-primary-per-view: %s and %s are both primary under %v", stepped, id, a.view)
			}
		}
	}
	for _, r := range a.stepReplies {
		if prev, ok := c.answered[r.id]; ok && prev != r.index {
			return fmt.Errorf("exactly-once: %s answered %v from entry %d, but it was answered from entry %d before", stepped, r.id, r.index, prev)
		}
		c.answered[r.id] = r.index
		for _, n := range a.members[1:] {
			b, ok := up[n].(*PB)
			if !ok || b.role != roleBackup || b.view != a.view || b.m == nil {
				continue
			}
			if b.m.applied < r.index {
				return fmt.Errorf("reply-after-acks: %s answered %v (entry %d) while backup %s of view %v has applied only %d", stepped, r.id, r.index, n, a.view, b.m.applied)
			}
		}
	}
	// backup-prefix, for the primary of the stepped node's view.
	for _, id := range ids {
		p, ok := up[id].(*PB)
		if !ok || p.role != rolePrimary || p.collecting {
			continue
		}
		for _, bid := range ids {
			b, ok := up[bid].(*PB)
			if !ok || b.role != roleBackup || b.waiting || b.view != p.view || b.m == nil || (bid != stepped && id != stepped) {
				continue
			}
			if b.m.applied > p.m.applied {
				return fmt.Errorf("backup-prefix: backup %s applied %d entries, its primary %s only %d (view %v)", bid, b.m.applied, id, p.m.applied, p.view)
			}
			if b.m.applied > p.logStart {
				if ch := p.log[b.m.applied-p.logStart-1].chain; ch != b.m.chain {
					return fmt.Errorf("backup-prefix: backup %s and primary %s differ at entry %d (digest %x vs %x, view %v)", bid, id, b.m.applied, b.m.chain, ch, p.view)
				}
			} else if b.m.applied == p.m.applied && b.m.chain != p.m.chain {
				return fmt.Errorf("backup-prefix: backup %s and primary %s differ at entry %d", bid, id, b.m.applied)
			}
		}
	}
	return nil
}

// Dump describes the node (the harness's `state`).
func (a *PB) Dump() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s view=%v members=%v epoch=%d", a.role, a.view, a.members, a.epoch)
	if a.m != nil {
		h := service.StateHash(a.m.st)
		fmt.Fprintf(&b, " applied=%d stable=%d state=%x", a.m.applied, a.stable, h[:6])
	}
	if a.role == rolePrimary {
		fmt.Fprintf(&b, " committed=%d", a.committed)
		for _, n := range sortedNodes(a.peers) {
			p := a.peers[n]
			kind := "joiner"
			if p.member {
				kind = "member"
			}
			fmt.Fprintf(&b, " %s:%s/%d", n, kind, p.acked)
		}
	}
	if a.awaiting {
		b.WriteString(" awaiting-membership")
	}
	if a.waiting {
		fmt.Fprintf(&b, " waiting state-view=%v", a.sv)
	}
	if a.collecting {
		fmt.Fprintf(&b, " collecting promises=%d", len(a.promises))
	}
	if len(a.fwds) > 0 {
		fmt.Fprintf(&b, " forwarding=%d", len(a.fwds))
	}
	return b.String()
}

// DescribeMessage renders a peer message in one line (test traces).
func (a *PB) DescribeMessage(b []byte) string {
	if len(b) > 1 && b[1] == kindBatch {
		msgs, err := header.SplitBatch(b, kindBatch)
		if err != nil {
			return fmt.Sprintf("corrupt batch (%v)", err)
		}
		parts := make([]string, len(msgs))
		for i, m := range msgs {
			parts[i] = a.DescribeMessage(m)
		}
		return fmt.Sprintf("batch of %d: %s", len(msgs), strings.Join(parts, "; "))
	}
	m, err := unmarshal(b)
	if err != nil {
		return fmt.Sprintf("corrupt message (%v)", err)
	}
	s := header.KindName(m.Kind)
	switch m.Kind {
	case kindUpdate:
		what := "delta"
		if m.Full {
			what = "snapshot"
		}
		s += fmt.Sprintf(" v=%v #%d stable=%d req=%v %s %dB -> %s", m.View, m.Index, m.Stable, m.ID, what, len(m.Payload), describeOutcome(m.Out))
	case kindAck:
		s += fmt.Sprintf(" v=%v #%d", m.View, m.Index)
		if m.Joined {
			s += " joined"
		}
	case kindHeartbeat, kindNewView, kindStale:
		s += fmt.Sprintf(" v=%v prev=%v base=%d epoch=%d members=%v applied=%d stable=%d", m.View, m.Prev, m.Base, m.Epoch, m.Members, m.Index, m.Stable)
	case kindPromise:
		s += fmt.Sprintf(" v=%v state=%v #%d has=%v %dB", m.View, m.SV, m.Index, m.Joined, len(m.Data))
	case kindChunk:
		s += fmt.Sprintf(" v=%v image@%d bytes %d-%d of %d", m.View, m.Index, m.Offset, m.Offset+uint64(len(m.Data)), m.Total)
	case kindChunkAck:
		s += fmt.Sprintf(" got %d", m.Offset)
	case kindForward:
		s += fmt.Sprintf(" req=%v %s", m.Req.ID, describeOps(m.Req.Op, m.Req.Ops))
	case kindReply:
		s += fmt.Sprintf(" req=%v %s", m.ID, describeOutcome(m.Out))
	}
	return s
}

func describeOutcome(o outcome) string {
	s := o.res.String()
	for _, r := range o.results {
		s += fmt.Sprintf(" [%v]", r)
	}
	return s
}

func describeOps(op service.Op, ops []service.Op) string {
	if len(ops) == 0 {
		return op.String()
	}
	parts := make([]string, len(ops))
	for i, o := range ops {
		parts[i] = o.String()
	}
	return "group(" + strings.Join(parts, "; ") + ")"
}
