package node

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/service"
)

// Membership at run time (protocols that change it through their log:
// paxos). The cluster file is the bootstrap membership; the live one is in
// each namespace's replicated log. A membership-aware automaton emits
// automaton.Members whenever the set of nodes it talks to changes; the node
// then connects the transport to nodes that appeared (at the peer address
// the configuration carries, or the cluster file's) and drops nodes that no
// namespace needs any more. Namespaces that never emit Members keep every
// node of the cluster file. INFO shows each such namespace's members.

// memberState is the latest Members output of each namespace that emitted one.
type memberState struct {
	mu   sync.Mutex
	byNS map[string][]automaton.Member
}

func (n *Node) members() *memberState {
	ms := &n.mem
	ms.mu.Lock()
	if ms.byNS == nil {
		ms.byNS = map[string][]automaton.Member{}
	}
	ms.mu.Unlock()
	return ms
}

// setMembers applies a namespace's Members output to the transport. Called
// from that namespace's loop goroutine.
func (n *Node) setMembers(ns string, o automaton.Members) {
	ms := n.members()
	ms.mu.Lock()
	defer ms.mu.Unlock()
	old, had := ms.byNS[ns]
	ms.byNS[ns] = append([]automaton.Member(nil), o.Members...)
	if ids, oldIDs := memberIDs(o.Members), memberIDs(old); n.log != nil && (!had || ids != oldIDs) {
		// One log line per membership change (the first Members output too).
		n.log.Info("membership changed", "namespace", ns, "from", oldIDs, "to", ids)
	}
	if n.tr == nil {
		return
	}
	want := map[automaton.NodeID]string{}
	file := map[automaton.NodeID]string{}
	for _, m := range n.cfg.Nodes {
		file[automaton.NodeID(m.ID)] = m.Peer
	}
	for _, c := range n.nss {
		mem, ok := ms.byNS[c.Name]
		if !ok {
			for id, addr := range file {
				want[id] = addr
			}
			continue
		}
		for _, m := range mem {
			addr := m.Peer
			if addr == "" {
				addr = file[m.ID]
			}
			if addr == "" {
				if cur, ok := n.tr.PeerAddr(m.ID); ok {
					addr = cur
				}
			}
			if addr == "" {
				n.log.Warn("member without a known peer address; not connected", "namespace", c.Name, "member", m.ID)
				continue
			}
			want[m.ID] = addr
		}
	}
	delete(want, n.id)
	for id, addr := range want {
		if err := n.tr.AddPeer(id, addr); err != nil {
			n.log.Warn("adding peer", "peer", id, "addr", addr, "err", err)
		}
	}
	for _, id := range n.tr.Peers() {
		if _, ok := want[id]; !ok {
			n.tr.RemovePeer(id)
		}
	}
}

// membersFact is the ",members=..." suffix of a namespace's INFO line (""
// for namespaces whose membership is the cluster file's).
func (n *Node) membersFact(ns string) string {
	ms := n.members()
	ms.mu.Lock()
	defer ms.mu.Unlock()
	mem, ok := ms.byNS[ns]
	if !ok {
		return ""
	}
	var voting []string
	for _, m := range mem {
		if m.Voting {
			voting = append(voting, string(m.ID))
		}
	}
	sort.Strings(voting)
	return ",members=" + strings.Join(voting, " ")
}

var _ gateway.MembershipBackend = (*Node)(nil)

// ChangeMembership implements gateway.MembershipBackend: it submits a
// membership change (automaton.MemberAdd / MemberRemove) to namespace ns
// under a fresh request id, bypassing the service validation that refuses
// the reserved operation kind to ordinary clients.
func (n *Node) ChangeMembership(ctx context.Context, ns string, op service.Op) (service.Result, error) {
	var b [8]byte
	if _, err := crand.Read(b[:]); err != nil {
		return service.Result{}, err
	}
	return n.changeMembership(ctx, ns, automaton.RequestID{Client: binary.LittleEndian.Uint64(b[:]) | 1, Seq: 1}, op)
}

// changeMembership submits membership operation op (a change or a
// leadership transfer) to ns's loop under request id id (a resent one
// is answered once: the protocol deduplicates it).
func (n *Node) changeMembership(ctx context.Context, ns string, id automaton.RequestID, op service.Op) (service.Result, error) {
	l := n.loop(ns)
	if l == nil {
		return service.Result{}, fmt.Errorf("unknown namespace %q (this node serves %s)", ns, n.nsNames())
	}
	if !automaton.IsMemberOp(op) {
		return service.Result{}, fmt.Errorf("not a membership operation: %q", op.Kind)
	}
	req := automaton.Request{ID: id, Op: op}
	req.Op.Args = cloneArgs(req.Op.Args)
	ch := make(chan automaton.Response, 1)
	l.addWaiter(req.ID, ch)
	defer l.removeWaiter(req.ID, ch)
	switch l.requestQueue().put(event{in: automaton.ClientRequest{Req: req}}, ctx.Done(), n.stopping, nil) {
	case -1:
		l.noteRequest()
	case 0:
		return service.Result{}, fmt.Errorf("membership change not submitted: %w", ctx.Err())
	default:
		return service.Result{}, gateway.ErrShuttingDown
	}
	t := time.NewTimer(time.Minute)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.Result, nil
	case <-ctx.Done():
		return service.Result{}, fmt.Errorf("membership change %v: outcome unknown: %w", op, ctx.Err())
	case <-n.stopping:
		return service.Result{}, fmt.Errorf("membership change: outcome unknown: %w", gateway.ErrShuttingDown)
	case <-t.C:
		return service.Result{}, fmt.Errorf("membership change %v: no answer within a minute; outcome unknown", op)
	}
}

// memberIDs lists the members' ids, space-separated, for the log.
func memberIDs(ms []automaton.Member) string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = string(m.ID)
	}
	return strings.Join(ids, " ")
}
