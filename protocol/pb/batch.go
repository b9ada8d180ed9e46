package pb

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
)

// Client batches (issue 28, session 54; protocol/pbdurable's batch.go).
//
// PB declares automaton.BatchStepper: the runtime hands it the client
// requests that reached the node together as one automaton.ClientBatch,
// which proto.Dispatch steps one request after the other (OnRequest,
// each as alone). In such a step, and in a step that handles a batch
// message, the messages to one peer leave as one batch message
// (kindBatch, proto.Header.Coalesce): the primary's update entries of a
// batch reach each backup in one message, a forwarder's forwards reach
// the primary in one, the primary's replies to a forwarder leave in one.
// A node handles a batch message's messages in order, each as if it had
// arrived alone, except that a backup acknowledges the entries of one
// batch message once, after the last (acknowledgements are cumulative:
// the primary counts the highest). Every request is answered exactly
// when it was before: once every member acknowledged its entry.

// StepsClientBatches implements automaton.BatchStepper.
func (p protocol) StepsClientBatches() bool { return true }

// OrdersKeyRuns implements automaton.KeyRunOrderer: the primary executes
// a batch's requests one after the other in batch order (a read sees the
// batch's earlier writes: it waits for the entries up to them) and a
// forwarder forwards them in order in one batch message, so a
// connection's pipelined same-key commands may share a batch
// (gateway/pipeline.go). (As in pbdurable: a batch of forwards larger
// than proto.MaxBatchBytes leaves as several messages.)
func (p protocol) OrdersKeyRuns() bool { return true }

// onBatchMessage handles a batch message's messages in order, and sends
// the one acknowledgement its update entries earned.
func (a *PB) onBatchMessage(from automaton.NodeID, b []byte) {
	msgs, err := header.SplitBatch(b, kindBatch)
	if err != nil {
		return // corrupt: dropped, as a lost message
	}
	a.batching = true
	for _, raw := range msgs {
		m, err := unmarshal(raw)
		if err != nil {
			continue
		}
		a.onMsg(from, m)
	}
	a.batching = false
	if a.ackTo != "" {
		if a.role == roleBackup && !a.waiting && a.view == a.ackView && a.ackTo == a.primary() {
			a.send(a.ackTo, a.ackMsg())
		}
		a.ackTo, a.ackView = "", proto.Ballot{}
	}
}
