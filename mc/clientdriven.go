package mc

import (
	"fmt"
	"hash/maphash"
	"sort"
	"strings"

	"github.com/synod-dev/synod/automaton"
)

// Client-driven clients (automaton.ModelConfig.ClientDriven; issue 20).
//
// A client runs each operation of its script through the protocol's
// Coordination (automaton.ClientCoordinator), as sim/clientdriven.go does:
//   - invoking the operation records its invocation and sends the first
//     phase's request to every node (a message in flight per node, each a
//     separate delivery, as a fanning-out client's copies are);
//   - a node's answer to the current phase (its request id) feeds the
//     coordination at once (responses reach clients at once, world.go);
//     answers to an earlier phase, or a second answer, are ignored;
//   - when the coordination ends a phase, the next one is sent to every
//     node under a fresh request id (the client's phase counter); when it
//     is done, its result is the operation's return in the history.
//
// Coordinate(op, writer, seq, n) gets writer = the client's number and
// seq = the operation's position in its script (from 1). The coordination
// is copied before it takes an answer (copy on write: worlds share it
// after clone) and hashed reflectively into the fingerprint with the
// client's phase counter. An answer the coordination refuses (an error
// result) is a violation: the checked network neither loses nor delays
// answers, so no runtime retry applies.

// startClientDriven checks a client-driven model: the protocol coordinates
// and every script operation is one it runs. Symmetry is switched off: a
// coordination names its client (ABD's tags carry the writer) and indexes
// replicas.
func (w *world) startClientDriven() error {
	cc, ok := automaton.CoordinatorOf(w.cfg.Protocol)
	if !ok {
		return fmt.Errorf("client-driven model: protocol %s has no client-side coordinator (automaton.ClientCoordinator)", w.cfg.Protocol)
	}
	for c := range w.clients {
		for i, op := range w.script(c) {
			if isStep(op) {
				return fmt.Errorf("client-driven model: client %d's step %d (%s) is not a single operation", c+1, i+1, opString(op))
			}
			if _, err := cc.Coordinate(op, uint64(c+1), uint64(i+1), len(w.ids)); err != nil {
				return fmt.Errorf("client-driven model: client %d's step %d: %w", c+1, i+1, err)
			}
		}
	}
	w.coordinator = cc
	w.groups, w.nodeGroups = nil, nil
	return nil
}

// coordinate returns client c's coordination of its i-th operation.
func (w *world) coordinate(c, i int) (automaton.Coordination, error) {
	return w.coordinator.Coordinate(w.script(c)[i], uint64(c+1), uint64(i+1), len(w.ids))
}

// invokeDriven starts client c's next operation: its invocation, then its
// first phase to every node.
func (w *world) invokeDriven(c int) error {
	cl := &w.clients[c]
	co, err := w.coordinate(c, cl.next)
	if err != nil {
		return err
	}
	cl.pending, cl.coord = true, co
	w.addHop(hop{client: c, op: cl.next})
	w.sendPhase(c)
	return nil
}

// sendPhase sends client c's current phase to every node, as a fresh
// request (the ABD report §3.1.2: the client asks every server).
func (w *world) sendPhase(c int) {
	cl := &w.clients[c]
	cl.phaseSeq++
	ph := cl.coord.Phase()
	req := &automaton.Request{ID: automaton.RequestID{Client: uint64(c + 1), Seq: cl.phaseSeq}, Op: ph.Op}
	req.Opts.Ext = ph.Ext // never changed (a phase's options are read only: protocol/abd shares its query phases')
	for i := range w.nodes {
		w.send(message{from: -1 - c, to: i, req: req})
	}
}

// drivenAnswer feeds node i's answer to its client's coordination.
func (w *world) drivenAnswer(i int, r automaton.Response) {
	c := int(r.ID.Client) - 1
	if c < 0 || c >= len(w.clients) || r.Silent {
		return
	}
	cl := &w.clients[c]
	if !cl.pending || cl.coord == nil || r.ID.Seq != cl.phaseSeq {
		return // an earlier phase's answer
	}
	co := newCopier().copyAny(cl.coord).(automaton.Coordination)
	cl.coord = co
	name := co.Phase().Name
	advanced, err := co.Answer(i, r.Result)
	if err != nil {
		w.fail(fmt.Sprintf("client-driven: client %d's %s phase: %v", c+1, name, err))
		return
	}
	if !advanced {
		return
	}
	if !co.Done() {
		w.sendPhase(c)
		return
	}
	w.addHop(hop{client: c, op: cl.next, ret: true, res: co.Result()})
	cl.pending, cl.coord = false, nil
	cl.next++
	w.returned = true
}

// coordHash hashes a client's coordination state with the fingerprint's
// hasher hs (0 when it has none; clients and nodes are never renamed in a
// client-driven model).
func coordHash(hs *hasher, cl *clientState) uint64 {
	if cl.coord == nil {
		return 0
	}
	var h maphash.Hash
	h.SetSeed(seed)
	hs.prepare()
	hs.u64(&h, cl.phaseSeq)
	hs.u64(&h, hs.sum(cl.coord, -1))
	return h.Sum64()
}

// describeInvokeDriven renders a client-driven invocation.
func (w *world) describeInvokeDriven(c int) string {
	cl := w.clients[c]
	if cl.next >= len(w.script(c)) {
		return fmt.Sprintf("client %d has no operation left", c+1)
	}
	op := w.script(c)[cl.next]
	co, err := w.coordinate(c, cl.next)
	if err != nil {
		return fmt.Sprintf("client %d runs %s (%v)", c+1, op, err)
	}
	return fmt.Sprintf("client %d runs %s: %s phase to every node", c+1, op, co.Phase().Name)
}

// extString renders request options in a fixed order ("" when none), for
// message hashes and descriptions (a client-driven phase's options say
// which phase, and which tag a store installs).
func extString(ext map[string][]string) string {
	if len(ext) == 0 {
		return ""
	}
	keys := make([]string, 0, len(ext))
	for k := range ext {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, strings.Join(ext[k], ","))
	}
	return b.String()
}

// coordView describes client c's coordination for the explorer.
func coordView(cl clientState) string {
	if cl.coord == nil {
		return ""
	}
	return fmt.Sprintf(", %s phase (request %d)", cl.coord.Phase().Name, cl.phaseSeq)
}
