package node

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway"
)

// Leader-change notifications (the Grid Services thesis, chapter III.A: "each client
// registers with each backup as a sink for the failover notification").
//
// A namespace's leader hint is published by noteLeader on the loop
// goroutine after each batch of steps (leader.go). Watchers wait on a
// channel that noteLeader closes, and replaces, whenever the hint changes:
// the loop never blocks and never waits for a watcher (closing a channel
// wakes every waiter at once, however many), and a watcher that was slow
// reads the latest hint when it wakes, skipping intermediate ones. A watch
// is level-triggered: it says "the hint may have changed, read it", never
// carries a value of its own.
//
// Where the channel lives: it would be a field of nsLoop, but loop.go and
// node.go belong to another change today, so it sits in a table keyed by a
// weak pointer to the loop, whose entry is deleted when the loop is
// collected. Moving it into nsLoop changes nothing else.

var _ gateway.LeaderWatcher = (*Node)(nil)

// leaderWatch is one namespace loop's change channel.
type leaderWatch struct {
	ch atomic.Pointer[chan struct{}] // closed and replaced on each change
}

var watches sync.Map // weak.Pointer[nsLoop] -> *leaderWatch

// watchOf returns l's watch, creating it on first use.
func (l *nsLoop) watchOf() *leaderWatch {
	k := weak.Make(l)
	if w, ok := watches.Load(k); ok {
		return w.(*leaderWatch)
	}
	w := &leaderWatch{}
	ch := make(chan struct{})
	w.ch.Store(&ch)
	got, loaded := watches.LoadOrStore(k, w)
	if !loaded {
		runtime.AddCleanup(l, func(k weak.Pointer[nsLoop]) { watches.Delete(k) }, k)
	}
	return got.(*leaderWatch)
}

// announceLeader wakes every watcher of l's leader hint. Loop goroutine
// only, after the new hint is stored.
func (l *nsLoop) announceLeader() {
	w := l.watchOf()
	ch := make(chan struct{})
	close(*w.ch.Swap(&ch))
}

// leaderChanged returns the channel closed at l's next hint change. Read
// it before the hint: a change between the two reads then closes the
// channel already taken, and the watcher looks again.
func (l *nsLoop) leaderChanged() <-chan struct{} {
	return *l.watchOf().ch.Load()
}

// HasLeader implements gateway.LeaderWatcher: whether namespace ns's
// automaton reports a leader hint (automaton.LeaderReporter: paxos,
// primary-backup's primary, the unreplicated server).
func (n *Node) HasLeader(ns string) bool {
	l := n.loop(ns)
	return l != nil && l.lr != nil
}

// WatchLeader implements gateway.LeaderWatcher: namespace ns's current
// leader hint, as Leader reports it plus the leader's gRPC address when
// known, and a channel closed when the hint next changes (then call again).
// It fails for an unknown namespace and for a protocol without a leader.
func (n *Node) WatchLeader(ns string) (gateway.LeaderHint, <-chan struct{}, error) {
	l := n.loop(ns)
	if l == nil {
		return gateway.LeaderHint{}, nil, fmt.Errorf("unknown namespace %q (namespaces: %s)", ns, n.nsNames())
	}
	if l.lr == nil {
		return gateway.LeaderHint{}, nil, fmt.Errorf("namespace %q: protocol %s has no leader (every node serves it alike)", ns, l.ns.Protocol)
	}
	ch := l.leaderChanged()
	h := gateway.LeaderHint{From: n.id}
	if p := l.leader.Load(); p != nil && *p != "" {
		h.ID = *p
		h.Client = n.clientAddrOf(ns, *p)
		h.GRPC = n.grpcAddrOf(*p)
	}
	return h, ch, nil
}

// grpcAddrOf is node id's gRPC address: the bound one for this node, else
// the cluster file's ("" when it names none, or for a node added at run
// time, whose membership record carries no gRPC address).
func (n *Node) grpcAddrOf(id automaton.NodeID) string {
	if id == n.id && n.grpcAddr != nil {
		return n.grpcAddr.String()
	}
	if m, err := n.cfg.Node(string(id)); err == nil {
		return m.GRPC
	}
	return ""
}
