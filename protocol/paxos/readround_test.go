package paxos

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
)

// heartbeats returns the heartbeat rounds n1 has in flight to n2, in order.
func heartbeats(c *cluster) []uint64 {
	var rs []uint64
	for _, m := range c.Queue() {
		if m.From != "n1" || m.To != "n2" {
			continue
		}
		if msg, err := unmarshal(m.Msg); err == nil && msg.Kind == kindHeartbeat {
			rs = append(rs, msg.Round)
		}
	}
	return rs
}

// Quorum reads (package doc, "Reads"): the reads of one step share one
// confirmation round, sent at the end of the step; a step whose reads
// find a round in flight sends its own, up to readRounds in flight; a
// read arriving with readRounds in flight waits for the next round, which
// the first acknowledgement sends. Each read is answered once a majority
// acknowledged a round sent after it arrived, never on an earlier one.
func TestReadRounds(t *testing.T) {
	c := newCluster(t, 3, "kv", nil)
	c.elect("n1")
	c.DeliverAll()
	if n := c.Pending(); n != 0 {
		t.Fatalf("%d messages in flight after the election", n)
	}
	read := func(seq uint64) automaton.Request {
		return automaton.Request{ID: automaton.RequestID{Client: 7, Seq: seq}, Op: get("k"), Opts: automaton.Options{Read: automaton.ReadQuorum}}
	}
	answered := func(seq uint64) bool {
		_, ok := c.LastResponse(automaton.RequestID{Client: 7, Seq: seq})
		return ok
	}
	base := c.node("n1").hbRound

	// Three reads in one step: one round for all of them.
	c.Step("n1", automaton.ClientBatch{Reqs: []automaton.Request{read(1), read(2), read(3)}})
	if got := heartbeats(c); len(got) != 1 || got[0] != base+1 {
		t.Fatalf("after a step of 3 reads, rounds in flight %v (want [%d])", got, base+1)
	}
	// A read while that round is in flight: a second round at once.
	c.Submit("n1", read(4))
	if got := heartbeats(c); len(got) != 2 || got[1] != base+2 {
		t.Fatalf("after a read with one round in flight, rounds %v (want [%d %d])", got, base+1, base+2)
	}
	// readRounds (2) in flight: the next read waits.
	c.Submit("n1", read(5))
	if got := heartbeats(c); len(got) != 2 {
		t.Fatalf("after a read with %d rounds in flight, rounds %v (want no third)", readRounds, got)
	}
	// n2 acknowledges the first round only: reads 1-3 are answered, 4 and
	// 5 are not (they arrived after it was sent), and read 5's round leaves.
	c.Deliver(harness.Match("n1", "n2"), 1)
	c.Deliver(harness.Match("n2", "n1"), 1)
	for seq := uint64(1); seq <= 5; seq++ {
		if want := seq <= 3; answered(seq) != want {
			t.Fatalf("after round %d's acknowledgement, read %d answered: %v (want %v)", base+1, seq, answered(seq), want)
		}
	}
	if got := heartbeats(c); len(got) != 2 || got[1] != base+3 {
		t.Fatalf("after the first acknowledgement, rounds in flight %v (want [%d %d])", got, base+2, base+3)
	}
	c.DeliverAll()
	for seq := uint64(4); seq <= 5; seq++ {
		if !answered(seq) {
			t.Fatalf("read %d not answered once every round was acknowledged", seq)
		}
	}
}
