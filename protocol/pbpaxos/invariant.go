package pbpaxos

import (
	"fmt"
	"sort"
	"strings"

	"github.com/synod-dev/synod/automaton"
)

// Invariants (automaton.InvariantStater), checked after every step in
// simulation and in the harness.
var invariantNames = []string{
	"one value chosen per instance: every replica applies the same requests at an instance (seed 002 VI.B, Lemma 3's premise)",
	"promises never decrease within an incarnation",
	"one leader per ballot: at most one node completes a takeover under a ballot (Lemma 1: primaries are linearly ordered)",
	"serve-after-takeover: a leader executes or answers no new request before both phases of its takeover are complete (VI.B Protocol 1, New leader)",
	"reads-confirmed: an X-Paxos read is answered only with confirms from a majority, the leader included (VI.A.3; Protocol 1, Read)",
	"one outstanding proposal: with pipeline=1 the leader proposes instance i only once i-1 is applied (VI.A.2)",
}

// Invariants implements automaton.InvariantStater.
func (protocol) Invariants() ([]string, automaton.InvariantChecker) {
	return append([]string(nil), invariantNames...), &checker{
		chosen:  map[uint64]uint64{},
		leaders: map[Ballot]automaton.NodeID{},
		seen:    map[automaton.NodeID]*seenNode{},
	}
}

type checker struct {
	chosen  map[uint64]uint64
	leaders map[Ballot]automaton.NodeID
	seen    map[automaton.NodeID]*seenNode
}

type seenNode struct {
	a        *PBPaxos
	promised Ballot
}

func (c *checker) Check(stepped automaton.NodeID, up map[automaton.NodeID]automaton.Automaton) error {
	a, ok := up[stepped].(*PBPaxos)
	if !ok {
		return nil
	}
	for _, r := range a.justApplied {
		if !r.known {
			continue
		}
		if d, ok := c.chosen[r.i]; ok && d != r.digest {
			return fmt.Errorf("one value chosen per instance: %s applied other requests at instance %d", stepped, r.i)
		} else if !ok {
			c.chosen[r.i] = r.digest
		}
	}
	s := c.seen[stepped]
	if s == nil || s.a != a {
		s = &seenNode{a: a, promised: a.promised}
		c.seen[stepped] = s
	}
	if a.promised.Less(s.promised) {
		return fmt.Errorf("promises never decrease: %s promised %s after %s", stepped, a.promised, s.promised)
	}
	s.promised = a.promised
	if a.role == leader {
		if l, ok := c.leaders[a.ballot]; ok && l != stepped {
			return fmt.Errorf("one leader per ballot: %s and %s both lead %s", l, stepped, a.ballot)
		}
		c.leaders[a.ballot] = stepped
		if a.ready && a.prm.pipeline == 1 && a.applied >= a.batchTop && a.next > a.applied+2 {
			return fmt.Errorf("one outstanding proposal: %s proposed up to %d with %d applied", stepped, a.next-1, a.applied)
		}
	}
	for _, sv := range a.served {
		if sv.early {
			return fmt.Errorf("serve-after-takeover: %s served a new request before its takeover batch (up to %d) was applied (applied %d)", stepped, a.batchTop, a.applied)
		}
		if sv.read && sv.confirms < a.majority() {
			return fmt.Errorf("reads-confirmed: %s answered a read with %d confirms of %d nodes", stepped, sv.confirms, len(a.cfg.Nodes))
		}
	}
	return nil
}

// Dump implements harness.Dumper.
func (a *PBPaxos) Dump() string {
	var b strings.Builder
	role := [...]string{"follower", "candidate", "leader"}[a.role]
	fmt.Fprintf(&b, "%s ballot=%s promised=%s accepted=%s applied=%d pn=%s", role, a.ballot, a.promised, a.accBal, a.applied, a.appliedPN)
	if a.role == leader {
		fmt.Fprintf(&b, " ready=%v next=%d", a.ready, a.next)
	}
	var is []uint64
	for i := range a.log {
		if i > a.applied {
			is = append(is, i)
		}
	}
	sort.Slice(is, func(x, y int) bool { return is[x] < is[y] })
	for _, i := range is {
		s := a.log[i]
		fmt.Fprintf(&b, " [%d %s %s]", i, s.bal, updNames[s.kind])
	}
	if g := a.gapList(); len(g) > 0 {
		fmt.Fprintf(&b, " gaps=%v", g)
	}
	if ids := a.openTxns(); len(ids) > 0 {
		fmt.Fprintf(&b, " txns=%v", ids)
	}
	fmt.Fprintf(&b, " state=%s", describeState(a.sm))
	return b.String()
}

// describeState renders a small state for traces: its snapshot's length
// and the KV-like content when the service has a readable one.
func describeState(m *machine) string {
	return fmt.Sprintf("v%d/%dB", m.version(), len(m.st.Snapshot()))
}

// DescribeMessage implements harness.MessageDescriber.
func (a *PBPaxos) DescribeMessage(b []byte) string {
	m, err := unmarshal(b)
	if err != nil {
		return "corrupt: " + err.Error()
	}
	k := header.KindName(m.Kind)
	switch m.Kind {
	case kindPrepare:
		return fmt.Sprintf("%s %s after=%d gaps=%v", k, m.Ballot, m.After, m.Gaps)
	case kindPromise:
		if !m.OK {
			return fmt.Sprintf("%s %s refused promised=%s applied=%d", k, m.Ballot, m.Promised, m.Commit)
		}
		if len(m.Entries) == 0 && len(m.State) == 0 {
			return fmt.Sprintf("%s %s OK applied=%d", k, m.Ballot, m.Commit)
		}
		var es []string
		for _, e := range m.Entries {
			es = append(es, fmt.Sprintf("%d@%s:%s", e.I, e.Bal, describeCmds(e.Cmds)))
		}
		st := ""
		if len(m.State) > 0 {
			st = fmt.Sprintf(" state@%s", m.StatePN)
		}
		return fmt.Sprintf("%s %s applied=%d [%s]%s", k, m.Ballot, m.Commit, strings.Join(es, " "), st)
	case kindAccept:
		var es []string
		for _, e := range m.Entries {
			es = append(es, fmt.Sprintf("%d:%s/%s", e.I, describeCmds(e.Cmds), updNames[e.Kind]))
		}
		return fmt.Sprintf("%s %s commit=%d [%s]", k, m.Ballot, m.Commit, strings.Join(es, " "))
	case kindAccepted:
		if !m.OK {
			return fmt.Sprintf("%s %s refused promised=%s", k, m.Ballot, m.Promised)
		}
		return fmt.Sprintf("%s %s acks=%v", k, m.Ballot, m.Acks)
	case kindHeartbeat:
		return fmt.Sprintf("%s %s commit=%d", k, m.Ballot, m.Commit)
	case kindHeartbeatAck:
		return fmt.Sprintf("%s %s ok=%v applied=%d", k, m.Ballot, m.OK, m.Commit)
	case kindCatchupReq:
		return fmt.Sprintf("%s applied=%d", k, m.Commit)
	case kindSnapshot:
		return fmt.Sprintf("%s %d@%s", k, m.Commit, m.StatePN)
	case kindForward:
		return fmt.Sprintf("%s %v %v", k, m.Req.ID, describeReq(m.Req))
	case kindRead:
		return fmt.Sprintf("%s %v %v origin=%s", k, m.Req.ID, describeReq(m.Req), m.Origin)
	case kindConfirm:
		return fmt.Sprintf("%s %v %s", k, m.ID, m.Ballot)
	case kindForwardReply, kindReadReply:
		return fmt.Sprintf("%s %v %v", k, m.ID, m.Result)
	}
	return k
}

func describeReq(r automaton.Request) string {
	if r.Txn != nil {
		return fmt.Sprintf("txn %v %v %v", r.Txn.Txn, r.Txn.Action, r.Op)
	}
	if len(r.Ops) > 0 {
		return fmt.Sprintf("group %v", r.Ops)
	}
	return r.Op.String()
}

func describeCmds(b []byte) string {
	if len(b) == 0 {
		return "?"
	}
	cs, err := decodeCmds(b)
	if err != nil {
		return "corrupt"
	}
	var out []string
	for _, c := range cs {
		switch c.Kind {
		case cmdNoop:
			out = append(out, "noop")
		case cmdTxn:
			out = append(out, fmt.Sprintf("commit(%v %d ops)", c.ID, len(c.Ops)))
		case cmdGroup:
			out = append(out, fmt.Sprintf("%v group", c.ID))
		default:
			out = append(out, fmt.Sprintf("%v %s", c.ID, c.Op))
		}
	}
	return strings.Join(out, ",")
}
