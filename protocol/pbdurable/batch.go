package pbdurable

import (
	"github.com/synod-dev/synod/automaton"
)

// Client batches (issue 28, session 54).
//
// PBD declares automaton.BatchStepper: the runtime hands it the client
// requests that reached the node together as one automaton.ClientBatch.
// Each request is served as alone (execute, forward), in batch order,
// but the primary issues and releases once, at the batch's end: the
// batch's writes go into one group-committed transaction (primary.go
// issue, up to maxGroup requests; one commit, one fsync) instead of the
// first alone and the rest in the next. Every request is still answered
// only once its transaction committed and its buffer is held where the
// mapping requires (release, durable): a batch changes how many requests
// share a commit, never when one is answered.
//
// In a batch step the messages to one peer leave as one batch message
// (kindBatch, proto.Header.Coalesce): a backup gets the batch's update
// buffers in one message and acknowledges them once (the cumulative
// acknowledgement of the last it holds), a forwarder sends the primary
// its batch's forwards in one, and the primary's replies to it leave
// in one. A node handles a batch message's messages in order, each as
// if it had arrived alone, under the same rules as a client batch.

// StepsClientBatches implements automaton.BatchStepper.
func (p protocol) StepsClientBatches() bool { return true }

// OrdersKeyRuns implements automaton.KeyRunOrderer: a batch's requests
// execute at the primary one after the other in batch order (a read sees
// the batch's earlier writes) and are answered in that order; at another
// node they are forwarded in batch order in one batch message, which the
// primary serves in order. So a connection's pipelined same-key commands
// may share a batch (gateway/pipeline.go), and share its transaction. (A
// batch of forwards larger than proto.MaxBatchBytes leaves as several
// messages, which a link that reorders could deliver out of order; the
// gateway bounds a batch's arguments by about that size, and peer links
// deliver in order.)
func (p protocol) OrdersKeyRuns() bool { return true }

// OnBatch implements proto.BatchRole: a client batch's requests, served
// in order, then one issue and one release.
func (a *PBD) OnBatch(reqs []automaton.Request) {
	a.batching = true
	for _, req := range reqs {
		a.serve("", req)
	}
	a.endBatch()
}

// endBatch issues and releases what the batch executed, and sends the
// one acknowledgement a batch of update buffers earned.
func (a *PBD) endBatch() {
	a.batching = false
	if a.ackTo != "" {
		if !a.primary && a.synced {
			a.send(a.ackTo, msg{kind: kindAck, view: a.view, index: a.index})
		}
		a.ackTo = ""
	}
	if a.primary {
		a.issue()
		a.release()
	}
}

// onBatchMessage handles a batch message's messages in order.
func (a *PBD) onBatchMessage(from automaton.NodeID, raw []byte) {
	msgs, err := header.SplitBatch(raw, kindBatch)
	if err != nil {
		return // corrupt: dropped, as any undecodable message
	}
	a.batching = true
	for _, b := range msgs {
		m, err := decode(b)
		if err != nil {
			continue
		}
		a.onMsg(from, m)
	}
	a.endBatch()
}
