package paxos

import "github.com/synod-dev/synod/automaton"

// BrokenTransfer is the name of the broken variant whose leader hands its
// leadership off without stepping down.
const BrokenTransfer = "paxos-broken-transfer"

// brokenTransfer is Multi-Paxos whose leadership transfer target skips
// phase 1: on TimeoutNow it leads at once under the old leader's ballot,
// proposing what its own log holds ("its log is the leader's, phase 1 is
// redundant"). Raft §3.10's target starts a new term for a reason: a
// ballot has one proposer (the Grid Services thesis V), and the old
// leader may have proposed, under that ballot, values the target never
// received, so two proposers under one ballot can get two values chosen
// for one instance. The invariant "one leader per ballot" catches it at
// the first transfer (TestTransferSim).
type brokenTransfer struct{ protocol }

var (
	_ automaton.Describer        = brokenTransfer{}
	_ automaton.ScenarioDeclarer = brokenTransfer{}
)

// Describe implements automaton.Describer.
func (brokenTransfer) Describe() string {
	return "a leadership transfer's target leads under the old leader's ballot without phase 1: two proposers under one ballot, caught by the invariant \"one leader per ballot\" at the first transfer"
}

// transferSchedule is a schedule of leadership transfers every 150 ms of
// virtual time, rotating among n1..n3, for the simulator's --membership.
func transferSchedule() string {
	s := ""
	for i := 0; i < 20; i++ {
		if i > 0 {
			s += ","
		}
		s += "transfer:n" + string(rune('1'+(i+1)%3)) + "@" + itoa(300+150*i) + "ms"
	}
	return s
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// Scenarios implements automaton.ScenarioDeclarer: transfers every 150 ms;
// paxos passes the same runs (TestTransferSim).
func (brokenTransfer) Scenarios() []automaton.Scenario {
	return []automaton.Scenario{{Name: "transfers under lease reads, caught by the linearizability checker",
		Args:  TransferSimArgs(),
		Seeds: "1-5"}}
}

// TransferSimArgs are the simulator arguments of the transfer scenario.
func TransferSimArgs() []string {
	return []string{"--nodes", "3", "--clients", "6", "--ops", "600", "--faults", "none",
		"--param", "read=lease", "--membership", transferSchedule()}
}

// takeOverBallot: the broken target leads under ballot b as if its phase 1
// had completed with its own promise alone.
func (a *Paxos) takeOverBallot(b Ballot) {
	a.ballot = b
	a.role = candidate
	a.promises = map[int]*message{a.self: a.promiseFor(a.chosenUpTo + 1)}
	rep := a.gatherPromises()
	vals, _, segs := a.pickValues(rep)
	a.becomeLeader(segs)
	a.reproposeValues(rep.top, vals, segs)
	a.leadWaitingRequests()
}
