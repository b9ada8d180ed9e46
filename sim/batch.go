package sim

import "github.com/synod-dev/synod/automaton"

// Client batches (Config.BatchWindow).
//
// The live node steps the client requests it finds together in its inbox
// as one automaton.ClientBatch when the protocol declares
// automaton.BatchStepper (node/loop.go). The simulator does the same with
// the requests that reach a node within BatchWindow of virtual time: the
// first one opens the node's batch and schedules its delivery at
// BatchWindow later; those arriving before it join; one request alone is
// stepped as a ClientRequest. A crash loses the open batch (its clients
// learn that their node crashed, as for any request in flight there); a
// pause or a busy processor delays its delivery as any input's, and the
// batch then holds whatever joined until it is delivered. Zero (the
// default) steps every request on arrival, as before.
//
// Order: a batch is stepped in arrival order, as the live loop steps its
// inbox's requests (node/loop.go take), and a node.DoBatch batch in the
// order handed over. That order is a promise only for a protocol that
// orders key runs (automaton.KeyRunOrderer: ABD), and only to a client
// that pipelines same-key commands (gateway/pipeline.go). The simulator's
// clients have one request in flight each, so a simulated batch holds
// requests of different clients, which are concurrent: any order of them
// is linearizable, and the history checker cannot tell a reordered batch
// from this one. The order promise is therefore tested live
// (livetest TestABDPipelineOwnOrder, which fails with the batch handed to
// the loop reversed) and on the protocol (protocol/abd
// TestKeyRunSerialResults), not here.

const evClientBatch evKind = 250 // a node's open client batch is due

// batchOn reports whether client requests go through batches.
func (s *simulator) batchOn() bool { return s.cfg.BatchWindow > 0 && s.batcher }

// joinBatch adds an arrived request to n's open batch, opening it if
// there is none.
func (s *simulator) joinBatch(n *node, req automaton.Request) {
	if len(n.batchQ) == 0 {
		s.after(s.cfg.BatchWindow, &event{kind: evClientBatch, node: n.idx, inc: n.inc})
	}
	n.batchQ = append(n.batchQ, req)
}

// onClientBatch steps n's open batch.
func (s *simulator) onClientBatch(e *event) {
	n := s.nodes[e.node]
	if !n.up || n.inc != e.inc {
		return // lost with a crash (crash clears batchQ)
	}
	if !s.deliverable(e) || s.cpuDefer(n, e) {
		return
	}
	q := n.batchQ
	n.batchQ = nil
	switch len(q) {
	case 0:
	case 1:
		s.step(n, automaton.ClientRequest{Req: q[0]})
	default:
		s.tracef("%s <- client batch of %d requests", n.id, len(q))
		s.stats.ClientBatches++
		s.step(n, automaton.ClientBatch{Reqs: q})
	}
}
