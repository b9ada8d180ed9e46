package fastpaxos

import (
	"fmt"
	"strings"
)

// DescribeMessage renders a peer message in one line for harness traces.
func (a *FastPaxos) DescribeMessage(b []byte) string { return describeMessage(b) }

func describeMessage(b []byte) string {
	m, err := unmarshal(b)
	if err != nil {
		return fmt.Sprintf("undecodable (%v)", err)
	}
	s := header.KindName(m.Kind)
	switch m.Kind {
	case kindPrepare:
		s += fmt.Sprintf(" b=%v from=%d", m.Ballot, m.From)
	case kindPromise, kindRecovered:
		if m.OK {
			s += fmt.Sprintf(" b=%v", m.Ballot)
		} else {
			s += fmt.Sprintf(" b=%v refused promised=%v", m.Ballot, m.Promised)
		}
		s += describeEntries(m.Entries, true)
	case kindAny:
		s += fmt.Sprintf(" b=%v from=%d commit=%d", m.Ballot, m.From, m.Commit)
	case kindPropose:
		s += fmt.Sprintf(" %v %s", m.Req.ID, strings.TrimPrefix(describeValue(encodeValue(m.Req)), m.Req.ID.String()+" "))
	case kindNotChosen:
		s += fmt.Sprintf(" %v", m.Req.ID)
	case kindAccept, kindCatchup:
		if !m.Ballot.IsZero() {
			s += fmt.Sprintf(" b=%v", m.Ballot)
		}
		s += describeEntries(m.Entries, false)
	case kindVoted:
		s += describeEntries(m.Entries, true)
	case kindRefuse:
		s += fmt.Sprintf(" b=%v promised=%v", m.Ballot, m.Promised)
	case kindRecover:
		s += fmt.Sprintf(" b=%v insts=%v", m.Ballot, m.Insts)
	case kindCatchupReq:
		s += fmt.Sprintf(" %d..%d", m.From, m.To)
	}
	return s
}

func describeEntries(es []entry, ballots bool) string {
	var parts []string
	for _, e := range es {
		switch {
		case ballots && e.Ballot.IsZero():
			parts = append(parts, fmt.Sprintf("%d: none", e.I))
		case ballots:
			parts = append(parts, fmt.Sprintf("%d: %v %s", e.I, e.Ballot, describeValue(e.Value)))
		default:
			parts = append(parts, fmt.Sprintf("%d: %s", e.I, describeValue(e.Value)))
		}
	}
	return " [" + strings.Join(parts, ", ") + "]"
}

// Dump describes the replica for the harness's state command.
func (a *FastPaxos) Dump() string {
	var b strings.Builder
	role := [...]string{"follower", "candidate", "leader"}[a.role]
	fmt.Fprintf(&b, "%s promised=%v any=%v from=%d next=%d chosen=%d executed=%d", role, a.promised, a.anyBal, a.anyFrom, a.fastNext, a.chosenUpTo, a.executed)
	if l := a.Leader(); l != "" {
		fmt.Fprintf(&b, " leader=%s", l)
	}
	var is []uint64
	for i := range a.insts {
		is = append(is, i)
	}
	sortU64(is)
	for _, i := range is {
		s := a.insts[i]
		fmt.Fprintf(&b, "\n  inst %d: rnd=%v vote=%v %s", i, s.rnd, s.vrnd, describeValue(s.vval))
		if v, ok := a.chosen[i]; ok {
			fmt.Fprintf(&b, " (chosen %s)", describeValue(v))
		}
	}
	st := a.stats
	fmt.Fprintf(&b, "\n  stats: fast=%d classic=%d caughtup=%d collisions=%d recovered=%d notchosen=%d resent=%d",
		st.FastLearned, st.ClassicLearned, st.CaughtUp, st.Collisions, st.Recovered, st.NotChosen, st.Resent)
	return b.String()
}
