package orcabcast

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
)

// Invariants implements automaton.InvariantStater.
func (p protocol) Invariants() ([]string, automaton.InvariantChecker) {
	return []string{
		"global-write-order: every replica handles the same update at each sequence number, across sequencers and crashes (seed 004 §4.2: all processors observe changes in the same order)",
		"sequencer-ahead: no replica has handled a number that a sequencer of its ballot or a later one has not assigned (the new sequencer recovered every delivered update)",
		"one-sequencer-per-ballot: a ballot's sequencer is always its owner node",
		"writer-after-apply: a node answers an update only in a step where it handled it or found it in its deduplication table (the writer blocks until its update is applied locally)",
	}, &checker{order: map[uint64]automaton.RequestID{}, seqOf: map[uint64]automaton.NodeID{}}
}

type checker struct {
	order map[uint64]automaton.RequestID
	seqOf map[uint64]automaton.NodeID
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
		c.order[a.seq] = a.id
	}
	if b.proto.fifo {
		return nil
	}
	if b.isSeq {
		if n, ok := c.seqOf[b.ballot]; ok && n != stepped {
			return fmt.Errorf("one-sequencer-per-ballot: %s and %s both sequencer in ballot %d", n, stepped, b.ballot)
		}
		c.seqOf[b.ballot] = stepped
	}
	for id, a := range up {
		s, ok := a.(*Bcast)
		if !ok || !s.isSeq {
			continue
		}
		if s.ballot >= b.ballot && b.applied > s.next-1 {
			return fmt.Errorf("sequencer-ahead: %s handled %d updates, the sequencer %s of ballot %d assigned %d", stepped, b.applied, id, s.ballot, s.next-1)
		}
		if b.isSeq && b.ballot >= s.ballot && s.applied > b.next-1 {
			return fmt.Errorf("sequencer-ahead: %s handled %d updates, the sequencer %s of ballot %d assigned %d", id, s.applied, stepped, b.ballot, b.next-1)
		}
	}
	for _, o := range b.Out {
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
