package orcabcast

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
)

// Invariants implements automaton.InvariantStater.
func (p protocol) Invariants() ([]string, automaton.InvariantChecker) {
	return []string{
		"global-write-order: every replica handles the same update at each sequence number (seed 004 §4.2: all processors observe changes in the same order)",
		"sequencer-ahead: no replica has handled a number the sequencer has not assigned",
		"writer-after-apply: a node answers an update only in a step where it handled it or found it in its deduplication table (the writer blocks until its update is applied locally)",
	}, &checker{order: map[uint64]automaton.RequestID{}}
}

type checker struct {
	order map[uint64]automaton.RequestID
}

// Check implements automaton.InvariantChecker.
func (c *checker) Check(stepped automaton.NodeID, up map[automaton.NodeID]automaton.Automaton) error {
	b, ok := up[stepped].(*Bcast)
	if !ok {
		return nil
	}
	for _, a := range b.applyLog {
		if id, ok := c.order[a.seq]; ok && id != a.id {
			return fmt.Errorf("global-write-order: %s handled %v as update %d, another replica handled %v", stepped, a.id, a.seq, id)
		}
		// The sequencer handles an update before its record is durable;
		// after a crash it may reuse a number nobody else saw. Only the
		// other replicas (which receive durable numbers) fix the order.
		if stepped != b.seqr || b.proto.fifo {
			c.order[a.seq] = a.id
		}
	}
	if !b.proto.fifo {
		if s, ok := up[b.seqr].(*Bcast); ok && b.applied > s.next-1 && s.next > 0 {
			return fmt.Errorf("sequencer-ahead: %s handled %d updates, the sequencer assigned %d", stepped, b.applied, s.next-1)
		}
	}
	for _, o := range b.out {
		r, ok := o.(automaton.Respond)
		if !ok || r.Resp.Result.IsErr() {
			continue
		}
		if d, ok := b.dedup[r.Resp.ID.Client]; ok && d.Seq == r.Resp.ID.Seq {
			continue
		}
		if _, waiting := b.pending[r.Resp.ID]; waiting {
			return fmt.Errorf("writer-after-apply: %s answered %v while the update is still pending", stepped, r.Resp.ID)
		}
	}
	return nil
}
