package node

import (
	"fmt"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway"
)

var _ gateway.LeaderBackend = (*Node)(nil)

// noteLeader publishes the automaton's leader hint, if it gives one, and
// wakes the hint's watchers when it changed (watch.go). Loop goroutine only.
func (l *nsLoop) noteLeader() {
	l.noteKeys()
	l.notePlacement()
	if l.lr == nil {
		return
	}
	id := l.lr.Leader()
	if tr, ok := l.a.(automaton.TermReporter); ok {
		l.term.Store(tr.Term())
	}
	if cur := l.leader.Load(); cur == nil || *cur != id {
		old := automaton.NodeID("")
		if cur != nil {
			old = *cur
		}
		nid := id // only a change allocates: &id would move id to the heap on every pass
		l.leader.Store(&nid)
		l.announceLeader()
		if l.n != nil && id == l.n.id {
			l.n.nudgeLeaderGossip(l.ns.Name) // leadergossip.go
		}
		// One log line and the metrics per leadership change.
		if l.log != nil {
			l.log.Info("leader changed", "namespace", l.ns.Name, "from", string(old), "to", string(id))
		}
		if l.n != nil && l.n.m != nil {
			l.n.m.leaderChanged(l.ns.Name, string(l.n.id), string(old), string(id))
			l.n.m.setTerm(l.ns.Name, l.a)
		}
	}
}

// keyCounter is a service state that counts its keys (service.KVState,
// service.ShardedState).
type keyCounter interface{ Len() int }

// noteKeys refreshes the namespace's key count metric (synod_keys), at most
// once a second, from the replica's service state (automaton.StateReporter).
// It is called after each batch (noteLeader), on the loop goroutine, which
// owns the automaton. An Effect's executor may be working on the state
// (Eve's parallel execution) outside the loop, so once the namespace has
// run an executor its state is not read: rmu, held here, is also held while
// effects start, so none starts meanwhile. Loop goroutine only.
// A pass before keysNext looks no further: the node's clock of the
// refreshes (keysDue) takes a lock shared by its loops and a map lookup.
func (l *nsLoop) noteKeys() {
	if l.n == nil || l.n.m == nil {
		return
	}
	now := time.Now()
	if now.Before(l.keysNext) {
		return
	}
	l.keysNext = now.Add(keysEvery)
	if !l.n.m.keysDue(l.ns.Name, now) {
		return
	}
	sr, ok := l.a.(automaton.StateReporter)
	if !ok {
		return
	}
	l.rmu.Lock()
	defer l.rmu.Unlock()
	if l.eff.execs != nil {
		return
	}
	if _, st := sr.ServiceState(); st != nil {
		if kc, ok := st.(keyCounter); ok {
			l.n.m.setKeys(l.ns.Name, kc.Len())
		}
	}
}

// Leader implements gateway.LeaderBackend: the node that namespace ns's
// replica here believes leads, and that node's client address ("", "" when
// it knows none, and always for protocols without a leader, such as ABD:
// every node serves them alike). It fails for an unknown namespace.
func (n *Node) Leader(ns string) (automaton.NodeID, string, error) {
	l := n.loop(ns)
	if l == nil {
		return "", "", fmt.Errorf("unknown namespace %q (namespaces: %s)", ns, n.nsNames())
	}
	if l.lr == nil {
		return "", "", nil
	}
	p := l.leader.Load()
	if p == nil || *p == "" {
		return "", "", nil
	}
	return *p, n.clientAddrOf(ns, *p), nil
}

// clientAddrOf is node id's client address: from namespace ns's live
// membership when it names one (nodes added at run time), else from the
// cluster file ("" when neither knows the node).
func (n *Node) clientAddrOf(ns string, id automaton.NodeID) string {
	if id == n.id {
		if n.clientAddr != nil && strings.HasSuffix(n.self.Client, ":0") {
			return n.clientAddr.String() // the port the node actually got
		}
		return n.self.Client
	}
	ms := n.members()
	ms.mu.Lock()
	for _, m := range ms.byNS[ns] {
		if m.ID == id && m.Client != "" {
			ms.mu.Unlock()
			return m.Client
		}
	}
	ms.mu.Unlock()
	if m, err := n.cfg.Node(string(id)); err == nil {
		return m.Client
	}
	return ""
}
