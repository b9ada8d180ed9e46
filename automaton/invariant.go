package automaton

import "sort"

// Invariants, checked after every step in simulation.
//
// A protocol states what must always hold of one replica and of the whole
// cluster (Paxos: no two values chosen for one instance, a promise never
// decreases; ABD: a replica's tag never decreases; ...). The simulator
// creates one InvariantChecker per run and calls Check after every Step of
// every replica, with the automata of the nodes that are up; the first error
// fails the run with its seed and the command that replays it. Checks may
// keep state across calls (to assert that something never decreases), and
// may read the automata's unexported fields: the checker lives in the
// protocol's package. Checks must not change the automata.
//
// Invariants are the early warning: a broken variant often trips one long
// before a client sees a wrong answer.

// InvariantChecker checks a protocol's invariants during one simulated run.
type InvariantChecker interface {
	// Check is called after node stepped took one step. Up holds the
	// automaton of every node that is up (crashed nodes are absent; a
	// restarted node appears as its new incarnation). The map is valid
	// only during the call (the model checker reuses it): a checker that
	// needs the nodes later copies what it needs.
	Check(stepped NodeID, up map[NodeID]Automaton) error
}

// CrashObserver may be implemented by an InvariantChecker that must know
// what a crash lost: the simulator calls Crashed when node id crashes, with
// the keys of the records it had persisted but not yet made durable (they
// are gone). A replica may act on its own record before it is durable (a
// Paxos leader counts its own acceptance towards a majority), provided
// nothing that depends on it leaves before it is; what such a replica knew
// may be un-known by the crash, and the checker must not hold the cluster
// to it.
type CrashObserver interface {
	Crashed(id NodeID, lost []string)
}

// InvariantStater is implemented by protocols that state invariants.
type InvariantStater interface {
	// Invariants returns the names of the invariants checked, one line each
	// (for docs and `synod-lab sim --help`), and a fresh checker for one run.
	Invariants() ([]string, InvariantChecker)
}

// NewInvariantChecker returns a checker for the named protocol, or nil when
// it states none.
func NewInvariantChecker(protocol string) (InvariantChecker, []string) {
	caps, err := capsOf(protocol)
	if err != nil || caps.Invariants == nil {
		return nil, nil
	}
	names, c := caps.Invariants()
	return c, names
}

// UpNodes returns the ids of up in order, for checks that report the first
// violation they meet: iterating the map itself would make the report (not
// the verdict) differ between replays of one seed.
func UpNodes(up map[NodeID]Automaton) []NodeID {
	ids := make([]NodeID, 0, len(up))
	for id := range up {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}
