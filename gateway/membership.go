package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// MembershipBackend is implemented by backends whose namespaces can change
// their membership at run time (node.Node, for paxos namespaces).
type MembershipBackend interface {
	// ChangeMembership submits automaton.MemberAdd or MemberRemove to
	// namespace ns and waits for its result.
	ChangeMembership(ctx context.Context, ns string, op service.Op) (service.Result, error)
}

// LeaderBackend is implemented by backends that can name the leader of a
// namespace (node.Node, for protocols with one: paxos).
type LeaderBackend interface {
	// Leader returns the node that namespace ns's replica on this node
	// believes leads, with its client address; "", "" when it knows none or
	// the protocol has no leader. It fails for an unknown namespace.
	Leader(ns string) (automaton.NodeID, string, error)
}

// LeaderHint names a namespace's leader as one node sees it.
type LeaderHint struct {
	// From is the node reporting the hint (the one the caller asked).
	From automaton.NodeID
	// ID is the leader; "" while the reporting node knows none (an
	// election is under way).
	ID automaton.NodeID
	// Client and GRPC are the leader's RESP and gRPC addresses ("" when
	// unknown: a node without a gRPC API, or one added at run time).
	Client, GRPC string
}

// LeaderWatcher is implemented by backends that announce leader changes
// (node.Node): the fail-over notifications of the Grid Services thesis, chapter III.A,
// served as RESP SUBSCRIBE synod:leader:<ns> (subscribe.go) and gRPC
// WatchLeader (grpcserver).
type LeaderWatcher interface {
	// HasLeader reports whether namespace ns's protocol has a leader (its
	// automaton implements automaton.LeaderReporter). False for an unknown
	// namespace.
	HasLeader(ns string) bool
	// WatchLeader returns namespace ns's current leader hint and a channel
	// closed when the hint may have changed; the caller then calls again.
	// Intermediate hints may be skipped: a watcher always reads the latest.
	// It fails for an unknown namespace or a protocol without a leader.
	WatchLeader(ns string) (LeaderHint, <-chan struct{}, error)
}

// leaderCommand answers SYNOD LEADER on the connection's namespace: an array
// [node id, client address] of the leader this node knows, or a null array
// when it knows none (an election is under way, or the protocol has no
// leader: any node serves it as well). It is a hint for clients
// that want to send to the leader directly; every node serves every request
// whichever it is sent to.
func (c *conn) leaderCommand(sub string, args [][]byte) bool {
	if sub != "leader" {
		return false
	}
	if len(args) != 2 {
		c.writeError(arityErr("synod|leader"))
		return true
	}
	lb, ok := c.s.b.(LeaderBackend)
	if !ok {
		c.writeError("ERR this server does not know leaders")
		return true
	}
	c.mu.Lock()
	ns := c.ns.Name
	c.mu.Unlock()
	id, addr, err := lb.Leader(ns)
	if err != nil {
		c.writeError("ERR " + err.Error())
		return true
	}
	if id == "" {
		c.w.WriteNullArray()
		return true
	}
	c.w.WriteArray(2)
	c.w.WriteBulkString(string(id))
	c.w.WriteBulkString(addr)
	return true
}

// memberTimeout bounds one SYNOD MEMBER command.
const memberTimeout = 30 * time.Second

// memberCommand handles the administrative membership commands on the
// connection's namespace:
//
//	SYNOD MEMBER ADD id peer-addr client-addr
//	SYNOD MEMBER REMOVE id
//
// The change goes through the namespace's log (an add first waits for the
// new node to catch up). The reply is +OK once the change has executed, an
// error otherwise (TRYAGAIN: outcome unknown, retry). This is the only way
// to submit a membership change: SYNOD OP with the reserved kind is refused
// by the service's validation.
func (c *conn) memberCommand(sub string, args [][]byte) bool {
	if sub != "member" {
		return false
	}
	mb, ok := c.s.b.(MembershipBackend)
	if !ok {
		c.writeError("ERR this server cannot change memberships")
		return true
	}
	if len(args) < 3 {
		c.writeError(arityErr("synod|member"))
		return true
	}
	var op service.Op
	switch strings.ToLower(string(args[2])) {
	case "add":
		if len(args) != 6 {
			c.writeError("ERR usage: SYNOD MEMBER ADD id peer-addr client-addr")
			return true
		}
		op = automaton.MemberAdd(automaton.NodeID(args[3]), string(args[4]), string(args[5]))
	case "remove":
		if len(args) != 4 {
			c.writeError("ERR usage: SYNOD MEMBER REMOVE id")
			return true
		}
		op = automaton.MemberRemove(automaton.NodeID(args[3]))
	default:
		c.writeError(fmt.Sprintf("ERR unknown SYNOD MEMBER action '%s' (want ADD or REMOVE)", args[2]))
		return true
	}
	c.mu.Lock()
	ns := c.ns.Name
	c.mu.Unlock()
	if msg := c.permit(ns, automaton.Request{Op: op}); msg != "" {
		c.writeError(msg)
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), memberTimeout)
	defer cancel()
	r, err := mb.ChangeMembership(ctx, ns, op)
	if err != nil {
		c.writeError(synoderr.New(synoderr.TryAgain, err.Error()).Error())
		return true
	}
	c.writeResult(r)
	return true
}
