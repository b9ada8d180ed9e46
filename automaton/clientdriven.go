package automaton

import "github.com/synod-dev/synod/service"

// --- clients that coordinate ---

// ClientCoordinator is implemented by protocols whose clients can run an
// operation themselves against every replica, the replicas only answering
// the phases (the ABD report's ABD client, "mode 1": servers never talk to each
// other). Coordinate returns the client side of one operation as a pure,
// deterministic state machine, so that every runtime (the simulator, the Go
// client) drives it the same way without knowing the protocol:
//
//	c, err := Coordinate(op, writer, seq, n)
//	for !c.Done() {
//		send c.Phase() to every replica (fresh RequestIDs; a retry of a
//		phase resends the same Phase to the replicas that have not answered)
//		feed each answer to c.Answer(replica, result) until it reports
//		the phase over
//	}
//	c.Result() is the operation's answer
//
// writer names the client in what it writes (unique among clients) and seq
// numbers its operations (increasing); n is the number of replicas, indexed
// 0..n-1. err is set when op cannot be run by a client (a kind the
// protocol does not coordinate this way).
type ClientCoordinator interface {
	Coordinate(op service.Op, writer, seq uint64, n int) (Coordination, error)
}

// Coordination is one operation's client-side state machine
// (ClientCoordinator).
type Coordination interface {
	// Phase is the current phase's request, the same for every replica:
	// Op and the protocol-declared options Ext (automaton.OptionSpec).
	// Name says which phase it is ("query", "store"), for traces and
	// errors.
	Phase() CoordPhase
	// Answer takes replica i's answer to the current phase; a replica's
	// second answer to one phase is ignored. It returns true when the
	// answer ended the phase (the next Phase, or Done, holds), and an error
	// for an answer the protocol cannot take (an error result, a malformed
	// one): the runtime decides whether to wait for other replicas.
	Answer(replica int, res service.Result) (advanced bool, err error)
	// Done reports whether the operation is complete; Result is then its
	// answer.
	Done() bool
	Result() service.Result
}

// CoordPhase is one phase's request of a client-coordinated operation.
type CoordPhase struct {
	Name string
	Op   service.Op
	Ext  map[string][]string
}

// CoordinatorOf returns the named protocol's client coordinator, if its
// clients can coordinate.
func CoordinatorOf(name string) (ClientCoordinator, bool) {
	c, err := capsOf(name)
	return c.Coordinator, err == nil && c.Coordinator != nil
}
