package esds

import (
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strings"
)

// Hooks for the test harness (package harness): one-line gossip messages in
// traces (harness.MessageDescriber) and the replica's state for the
// interaction scripts' `state` command and failure messages
// (harness.Dumper). Neither changes the automaton. Incarnation and stream
// numbers are left out: they are random, and say nothing a reader needs.

// DescribeMessage renders a gossip message in one line: "stream 1..2
// ack=1 [a done(1,0) append "a"] [b]" (a stream range, the acknowledgement
// of the reverse stream, one bracket per entry), or "full [...]".
func (a *ESDS) DescribeMessage(b []byte) string {
	m, err := unmarshal(b)
	if err != nil {
		return fmt.Sprintf("undecodable (%v)", err)
	}
	var s string
	switch m.Kind {
	case kindStream:
		s = fmt.Sprintf("stream %d..%d ack=%d", m.From, m.To, m.AckSeq)
	case kindRequest:
		s = "request"
	case kindResponse:
		return fmt.Sprintf("response %s = %s", m.Entries[0].ID, m.Value)
	case kindReserve, kindGrant, kindReject, kindDone:
		return fmt.Sprintf("%s #%d", header.Kinds[m.Kind-1], m.Seq)
	case kindInitiate:
		if len(m.Inner) == 0 {
			return fmt.Sprintf("initiate #%d (nothing)", m.Seq)
		}
		return fmt.Sprintf("initiate #%d: %s", m.Seq, a.DescribeMessage(m.Inner))
	default:
		s = "full"
	}
	if m.Removed != 0 {
		s += " removed=" + a.nodeSet(m.Removed)
	}
	for _, x := range m.Entries {
		s += " [" + describeEntry(x) + "]"
	}
	return s
}

func describeEntry(x entry) string {
	s := x.ID
	if x.Flags == flagGone {
		return s + " gone"
	}
	if x.Flags&flagDone != 0 {
		s += " done" + x.Label.String()
	}
	if x.Flags&flagAll != 0 {
		s += " stable-everywhere"
	} else if x.Flags&flagSolid != 0 {
		s += " stable"
	}
	if x.Flags&flagBare == 0 {
		if x.Strict {
			s += " strict"
		}
		if len(x.Prev) > 0 {
			s += fmt.Sprintf(" prev=%v", x.Prev)
		}
		s += " " + x.Op.String()
	}
	return s
}

// nodeSet names the replicas of a bit set ("{n1,n3}").
func (a *ESDS) nodeSet(bits uint64) string {
	var ids []string
	for i, n := range a.cfg.Nodes {
		if bits&(1<<i) != 0 {
			ids = append(ids, string(n))
		}
	}
	return "{" + strings.Join(ids, ",") + "}"
}

// Dump describes the replica: how many operations it holds (and, with
// RecordOrder, the final order so far), then every live operation by label
// (where it is done and stable, whether it is in the stable state, clients
// waiting for it), then the gossip streams.
func (a *ESDS) Dump() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d live operations, %d collected", len(a.ops), a.gcd.size())
	if a.recording {
		fmt.Fprintf(&b, ", order=%v", a.FinalOrder())
	}
	if a.removed != 0 {
		fmt.Fprintf(&b, ", removed=%s", a.nodeSet(a.removed))
	}
	for _, o := range a.sortedOps() {
		fmt.Fprintf(&b, "\n  %s %v done=%s stable=%s", o.id, o.label, a.nodeSet(o.done), a.nodeSet(o.solid))
		if len(o.prev) > 0 {
			fmt.Fprintf(&b, " prev=%v", o.prev)
		}
		if o.applied {
			b.WriteString(" applied")
		}
		if o.strict {
			b.WriteString(" strict")
		}
		if n := bits.OnesCount64(a.pending[o.id]); n > 0 {
			fmt.Fprintf(&b, " waiting=%d", n)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(a.wait)) {
		// rept_f is empty between steps (receiveResponse).
		fmt.Fprintf(&b, "\n  front end: %s waits, sent %v, 0 responses kept", id, a.wait[id].sent)
	}
	if r := a.resv; r != nil {
		fmt.Fprintf(&b, "\n  reservation: %s", r.status)
		if r.status != statusFree {
			fmt.Fprintf(&b, " %s #%d", a.cfg.Nodes[r.peer], r.seq)
		}
		if r.due != 0 {
			fmt.Fprintf(&b, ", gossip due to %s", a.nodeSet(r.due))
		}
		if r.backingOff != 0 {
			fmt.Fprintf(&b, ", backing off from %s", a.nodeSet(r.backingOff))
		}
	}
	for j, p := range a.peers {
		if j == a.self {
			continue
		}
		fmt.Fprintf(&b, "\n  to %s: acked=%d sent=%d queued=%d; from it: next=%d", a.cfg.Nodes[j], p.acked, p.sentUpTo, len(p.queue), p.inNext)
	}
	return b.String()
}
