package paxos

import (
	"fmt"
	"sort"
	"strings"
)

// Hooks for the test harness (package harness): one-line messages in
// traces (harness.MessageDescriber) and the replica's state for the
// interaction scripts' `state` command (harness.Dumper). Neither changes
// the automaton.

var kindNames = map[byte]string{
	kindPrepare: "prepare", kindPromise: "promise", kindAccept: "accept", kindAccepted: "accepted",
	kindHeartbeat: "heartbeat", kindHeartbeatAck: "heartbeat-ack", kindCatchupReq: "catchup-req",
	kindCatchup: "catchup", kindSnapshot: "snapshot", kindForward: "forward",
	kindForwardReply: "forward-reply", kindTakeOver: "takeover",
	kindTimeoutNow: "timeout-now",
}

// DescribeMessage renders a peer message in one line ("accept b=(1,1)
// commit=0 [1: 1:1 set x "1"]").
func (a *Paxos) DescribeMessage(b []byte) string {
	m, err := unmarshal(b)
	if err != nil {
		return fmt.Sprintf("undecodable (%v)", err)
	}
	s := kindNames[m.Kind]
	switch m.Kind {
	case kindPrepare:
		s += fmt.Sprintf(" b=%v from=%d", m.Ballot, m.From)
	case kindPromise:
		s += fmt.Sprintf(" b=%v%s commit=%d", m.Ballot, okOrPromised(m), m.Commit)
		for _, e := range m.Entries {
			chosen := ""
			if e.Chosen {
				chosen = " chosen"
			}
			s += fmt.Sprintf(" [%d: %v%s %s]", e.I, e.Ballot, chosen, describeValue(e.Value))
		}
	case kindAccept, kindCatchup:
		s += fmt.Sprintf(" b=%v commit=%d", m.Ballot, m.Commit)
		for _, e := range m.Entries {
			s += fmt.Sprintf(" [%d: %s]", e.I, describeValue(e.Value))
		}
	case kindAccepted:
		s += fmt.Sprintf(" b=%v%s acks=%v", m.Ballot, okOrPromised(m), m.Acks)
	case kindHeartbeat:
		s += fmt.Sprintf(" b=%v commit=%d round=%d", m.Ballot, m.Commit, m.Round)
	case kindHeartbeatAck:
		s += fmt.Sprintf(" b=%v%s round=%d commit=%d", m.Ballot, okOrPromised(m), m.Round, m.Commit)
	case kindTakeOver, kindTimeoutNow:
		s += fmt.Sprintf(" b=%v ok=%v commit=%d", m.Ballot, m.OK, m.Commit)
	case kindCatchupReq:
		s += fmt.Sprintf(" %d..%d", m.From, m.To)
	case kindSnapshot:
		s += fmt.Sprintf(" index=%d (%d bytes)", m.Index, len(m.Data))
	case kindForward:
		s += " " + describeCmd(cmd{ID: m.Req.ID, Op: m.Req.Op, Ops: m.Req.Ops})
	case kindForwardReply:
		s += fmt.Sprintf(" %v %v", m.Req.ID, m.Result)
		if m.Results != nil {
			s += fmt.Sprintf(" %v", m.Results)
		}
	}
	return s
}

func okOrPromised(m *message) string {
	if m.OK {
		return " ok"
	}
	return fmt.Sprintf(" refused promised=%v", m.Promised)
}

// describeValue renders a log value: a no-op, a membership change, or a
// batch of commands.
func describeValue(v []byte) string {
	if string(v) == string(noop) {
		return "noop"
	}
	if ch, ok := valueChange(v); ok {
		return "member " + ch.String()
	}
	cmds, err := decodeBatch(v)
	if err != nil {
		return fmt.Sprintf("undecodable value (%v)", err)
	}
	var parts []string
	for _, c := range cmds {
		parts = append(parts, describeCmd(c))
	}
	return strings.Join(parts, "; ")
}

func describeCmd(c cmd) string {
	if len(c.Ops) > 0 {
		return fmt.Sprintf("%v atomic%v", c.ID, c.Ops)
	}
	s := fmt.Sprintf("%v %v", c.ID, c.Op)
	if c.parts > 0 {
		s += fmt.Sprintf(" (part %d of %d)", c.part+1, c.parts)
	}
	return s
}

// Dump describes the replica: role and ballots, the chosen and executed
// prefixes, the configuration, and the log instances it holds.
func (a *Paxos) Dump() string {
	st := a.Status()
	var b strings.Builder
	fmt.Fprintf(&b, "%s ballot=%v promised=%v chosen=%d executed=%d snapshot=%d members=%v",
		st.Role, st.Ballot, st.Promised, st.ChosenUpTo, st.Executed, st.SnapIndex, st.Members)
	if st.Leader != "" {
		fmt.Fprintf(&b, " leader=%s", st.Leader)
	}
	insts := make([]uint64, 0, len(a.log))
	for i := range a.log {
		insts = append(insts, i)
	}
	sort.Slice(insts, func(i, j int) bool { return insts[i] < insts[j] })
	for _, i := range insts {
		s := a.log[i]
		chosen := ""
		if s.chosen {
			chosen = " chosen"
		}
		fmt.Fprintf(&b, "\n  %d: %v%s %s", i, s.bal, chosen, describeValue(s.val))
	}
	return b.String()
}
