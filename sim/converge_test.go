package sim

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// reporter is an automaton that reports a fixed applied count and state.
type reporter struct {
	applied uint64
	st      service.State
}

func (r *reporter) Step(automaton.Input) []automaton.Output { return nil }
func (r *reporter) ServiceState() (uint64, service.State)   { return r.applied, r.st }

func counterAt(v string) service.State {
	st := service.Counter{}.NewState()
	st.Apply(service.Op{Kind: "add", Args: [][]byte{[]byte(v)}})
	return st
}

// convSim is a simulator with n up nodes, enough for the convergence
// check's own methods.
func convSim(n int) *simulator {
	s := &simulator{}
	for i := 0; i < n; i++ {
		s.nodes = append(s.nodes, &node{idx: i, id: automaton.NodeID("n" + string(rune('1'+i))), up: true})
	}
	s.conv.init(n, 0)
	return s
}

func (s *simulator) report(i int, applied uint64, st service.State) {
	s.nodes[i].a = &reporter{applied, st}
	s.observeState(s.nodes[i])
}

// Replicas reporting one count with different states fail the run; equal
// states pass and count as a comparison.
func TestConvergenceComparesEqualCounts(t *testing.T) {
	s := convSim(3)
	s.report(0, 5, counterAt("7"))
	s.report(1, 5, counterAt("7"))
	s.report(2, 4, counterAt("9")) // another count: nothing to compare
	if s.conv.err != "" || s.conv.checks != 1 {
		t.Fatalf("equal states: err %q, checks %d (want none, 1)", s.conv.err, s.conv.checks)
	}
	s.report(2, 5, counterAt("8"))
	if !strings.Contains(s.conv.err, "applied count 5") || !strings.Contains(s.conv.err, "n3") {
		t.Fatalf("diverging state at count 5 not reported: %q", s.conv.err)
	}
}

// A count only a crashed incarnation reported is forgotten (it may have
// been lost with the crash); a count an up replica vouches for is not.
func TestConvergenceForgetsCrashedIncarnation(t *testing.T) {
	s := convSim(2)
	s.report(0, 3, counterAt("1"))
	s.report(1, 3, counterAt("1"))
	s.report(0, 4, counterAt("2")) // only n1 reached 4
	s.forgetIncarnation(s.nodes[0])
	s.nodes[0].inc++
	s.report(0, 4, counterAt("5")) // the restarted n1 reaches 4 with another command
	if s.conv.err != "" {
		t.Fatalf("a count only the crashed incarnation reported was held against its successor: %s", s.conv.err)
	}
	s.forgetIncarnation(s.nodes[0])
	s.nodes[0].inc++
	s.report(0, 3, counterAt("6")) // n2 still vouches for count 3
	if !strings.Contains(s.conv.err, "applied count 3") {
		t.Fatalf("divergence at a count an up replica vouches for not reported: %q", s.conv.err)
	}
}

// With ConvergeEvery k, a replica is hashed only when its count passes a
// multiple of k; the final check still compares up replicas at equal
// counts.
func TestConvergenceSamplingAndFinalCheck(t *testing.T) {
	s := convSim(2)
	s.conv.init(2, 10)
	s.report(0, 3, counterAt("1"))
	s.report(1, 3, counterAt("2"))
	if s.conv.err != "" || len(s.conv.seen) != 0 {
		t.Fatalf("counts below the first multiple were recorded: %v %q", s.conv.seen, s.conv.err)
	}
	s.report(0, 12, counterAt("1")) // passes 10: recorded at 12
	if _, ok := s.conv.seen[12]; !ok {
		t.Fatalf("count 12, past the multiple 10, not recorded: %v", s.conv.seen)
	}
	s.finalConvergence()
	if s.conv.err != "" {
		t.Fatalf("replicas at different counts compared: %s", s.conv.err)
	}
	s.nodes[1].a = &reporter{12, counterAt("2")}
	s.finalConvergence()
	if !strings.Contains(s.conv.err, "end of the run") {
		t.Fatalf("final check missed two replicas at 12 with different states: %q", s.conv.err)
	}
}
