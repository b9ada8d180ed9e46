package esds

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
)

// Front-end-only nodes (the ESDS thesis §4.2.4, Fig. 4.1; issue 21 item 1).
//
// The seed's front end is its own automaton: it "communicates with the
// replicas" over channels and keeps only wait_f and rept_f; nothing in
// §4.2.4 puts it beside a replica. Parameter replicas names the nodes that
// hold replicas; every other node of the namespace runs the front end only:
// it keeps wait_f, rept_f and the per-replica send counters (frontend.go),
// sends each operation to replicas under the send policy, answers from the
// first response, and persists nothing (a crash forgets wait_f, as the
// seed's front end has no stable state; the client's retry, which carries
// the same operation id, starts it again). Replicas gossip only with
// replicas; stability, the membership and every invariant are over the
// replicas only.

// replicaSet is the bit set of the nodes named by parameter replicas (every
// node when it is empty).
func replicaSet(cfg automaton.Config, index map[automaton.NodeID]int, names []string) (uint64, error) {
	if len(names) == 0 {
		if len(cfg.Nodes) == 64 {
			return ^uint64(0), nil
		}
		return uint64(1)<<len(cfg.Nodes) - 1, nil
	}
	var m uint64
	for _, s := range names {
		i, ok := index[automaton.NodeID(s)]
		if !ok {
			return 0, fmt.Errorf("esds: parameter replicas: %q is not a node", s)
		}
		m |= 1 << i
	}
	return m, nil
}

// isReplica reports whether node j holds a replica.
func (a *ESDS) isReplica(j int) bool { return a.all&(1<<j) != 0 }

// IsReplica reports whether this node holds a replica (false: a front end
// only, whose FinalOrder is empty). The simulator's ESDS checks ask only
// replicas for their final order.
func (a *ESDS) IsReplica() bool { return !a.feOnly }

// startFrontEndOnly starts a front-end-only node: empty wait_f (and rept_f),
// a new incarnation, and the tick that drives resends. Persisted records
// (there are none of ours) are ignored.
func (a *ESDS) startFrontEndOnly() {
	a.wait = map[string]*feOp{}
	a.removed = a.removedParam
	a.inc = a.cfg.Rand.Uint64() | 1
	a.Emit(automaton.SetTimer{ID: timerGossip, After: a.gossipIvl})
}

// frontEndOnlyMessage handles a message between a replica and a
// front-end-only node: at the front end, receive_{r,f}("response", x, v);
// at a replica, receive_{f,r}("request", x). Anything else (gossip,
// reservations) has no business between them and is dropped.
func (a *ESDS) frontEndOnlyMessage(j int, m message) {
	switch {
	case a.feOnly && m.Kind == kindResponse && a.isReplica(j):
		a.receiveResponse(m.Entries[0].ID, m.Value)
	case !a.feOnly && m.Kind == kindRequest && a.ops != nil:
		a.replicaRequest(j, m.Entries[0])
	}
}

// firstReplica is where a front end's ring of sends starts: its own
// replica, or, on a front-end-only node, the replica at position
// (self mod #replicas) among the replicas, so that front-end-only nodes
// spread over the replicas instead of all starting at the first.
func (a *ESDS) firstReplica() int {
	if !a.feOnly {
		return a.self
	}
	var reps []int
	for j := range a.cfg.Nodes {
		if a.isReplica(j) && a.removed&(1<<j) == 0 {
			reps = append(reps, j)
		}
	}
	if len(reps) == 0 {
		return a.self
	}
	return reps[a.self%len(reps)]
}
