package automaton

import "github.com/synod-dev/synod/service"

// Membership changes at run time (protocols that support them: paxos).
//
// A change is submitted as a request whose operation has the reserved kind
// MemberOpKind. No service defines that kind, so a runtime that validates
// client operations against the namespace's service (node.Do, the simulator's
// clients) refuses it from ordinary clients; runtimes submit it only through
// their administrative path (the gateway's SYNOD MEMBER command). The
// operation's Key is the action ("add" or "remove") and its Args are the
// node id, and for "add" its peer and client addresses.
const MemberOpKind = "synod.member"

// MemberAdd is the operation that adds node id (reachable by peers at peer,
// by clients at client) to a namespace's membership.
func MemberAdd(id NodeID, peer, client string) service.Op {
	return service.Op{Kind: MemberOpKind, Key: "add", Args: [][]byte{[]byte(id), []byte(peer), []byte(client)}}
}

// MemberRemove is the operation that removes node id from a namespace's membership.
func MemberRemove(id NodeID) service.Op {
	return service.Op{Kind: MemberOpKind, Key: "remove", Args: [][]byte{[]byte(id)}}
}

// LeaderTransfer is the operation that asks a namespace's leader to hand its
// leadership to member id (protocols with a leader and a transfer on
// request: paxos). It is answered once the leader has handed off, not once
// id leads; nothing is logged.
func LeaderTransfer(id NodeID) service.Op {
	return service.Op{Kind: MemberOpKind, Key: "transfer", Args: [][]byte{[]byte(id)}}
}

// IsLeaderTransfer reports whether op is a LeaderTransfer.
func IsLeaderTransfer(op service.Op) bool { return op.Kind == MemberOpKind && op.Key == "transfer" }

// IsMemberOp reports whether op is a membership change.
func IsMemberOp(op service.Op) bool { return op.Kind == MemberOpKind }

// Member is one node a membership-aware automaton talks to. Peer and Client
// are empty for members whose addresses the runtime already knows from its
// bootstrap configuration (the cluster file).
type Member struct {
	ID           NodeID
	Peer, Client string
	// Voting is false for a node that is being caught up (a learner) or is
	// named by a change not yet executed; such nodes receive messages but
	// are not (yet) in the configuration.
	Voting bool
}

// Members is an output of membership-aware automata: the complete set of
// nodes this automaton now exchanges messages with (itself excluded or not;
// runtimes ignore Self). Runtimes connect to nodes that appear and may drop
// nodes that disappear. It is emitted at Start and whenever the set changes;
// it carries no durability requirement.
type Members struct{ Members []Member }

func (Members) isOutput() {}
