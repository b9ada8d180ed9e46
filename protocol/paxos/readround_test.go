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

// hbTo counts the heartbeats n1 has in flight to each node.
func hbTo(c *cluster) map[automaton.NodeID]int {
	out := map[automaton.NodeID]int{}
	for _, m := range c.Queue() {
		if msg, err := unmarshal(m.Msg); err == nil && m.From == "n1" && msg.Kind == kindHeartbeat {
			out[m.To]++
		}
	}
	return out
}

// A read's confirmation round goes to the followers a majority needs, not
// to every follower with read_round=majority (readTargets, package doc
// "Reads"): of 3 nodes, to the one that acknowledged the latest rounds; by
// default (read_round=all), to both. When that follower stops answering, the reads waiting on its
// round are answered on the next tick's round, sent to every follower and
// acknowledged by the other one, which the next read's round goes to.
func TestReadRoundToMajority(t *testing.T) {
	read := func(seq uint64) automaton.Request {
		return automaton.Request{ID: automaton.RequestID{Client: 7, Seq: seq}, Op: get("k"), Opts: automaton.Options{Read: automaton.ReadQuorum}}
	}
	for _, all := range []bool{false, true} {
		params := map[string]string{"read_round": "majority"}
		if all {
			params = nil // the default: every peer
		}
		c := newCluster(t, 3, "kv", params)
		c.elect("n1")
		c.DeliverAll()
		answered := func(seq uint64) bool {
			_, ok := c.LastResponse(automaton.RequestID{Client: 7, Seq: seq})
			return ok
		}
		c.Submit("n1", read(1))
		got := hbTo(c)
		want := map[automaton.NodeID]int{"n2": 1}
		if all {
			want["n3"] = 1
		}
		if len(got) != len(want) || got["n2"] != want["n2"] || got["n3"] != want["n3"] {
			t.Fatalf("read_round all=%v: one read's round went to %v (want %v)", all, got, want)
		}
		c.DeliverAll()
		if !answered(1) {
			t.Fatalf("read_round all=%v: read 1 not answered after its round", all)
		}
		if all {
			continue
		}
		// n2 stops answering: read 2's round (to n2) is lost; the next
		// tick's round reaches n3, whose acknowledgement answers read 2.
		c.Isolate("n2")
		c.Submit("n1", read(2))
		if got := hbTo(c); got["n2"] != 1 || got["n3"] != 0 {
			t.Fatalf("read 2's round went to %v (want n2 only)", got)
		}
		c.DeliverAll()
		if answered(2) {
			t.Fatal("read 2 answered without a majority's acknowledgement")
		}
		c.fire("n1", tmTick)
		if !answered(2) {
			t.Fatal("read 2 not answered after the tick's round, acknowledged by n3")
		}
		c.Submit("n1", read(3))
		if got := hbTo(c); got["n3"] != 1 || got["n2"] != 0 {
			t.Fatalf("read 3's round went to %v (want n3 only: n2 has not acknowledged lately)", got)
		}
		c.DeliverAll()
		if !answered(3) {
			t.Fatal("read 3 not answered after n3 acknowledged its round")
		}
	}
}

// leaseTimers returns the rounds whose lease timers are set at n1.
func leaseTimers(c *cluster) []uint64 {
	var rs []uint64
	for _, id := range c.Timers("n1") {
		if id >= leaseTimerBase {
			rs = append(rs, uint64(id-leaseTimerBase))
		}
	}
	return rs
}

// A read's confirmation round sets no lease timer unless lease reads are
// the namespace's default (timesLease, package doc "Reads"): under quorum
// reads each timer was one more wake-up of the leader's loop per round.
// The tick's rounds still set theirs, so an explicit lease read is served
// on the lease of the latest acknowledged tick round, and needs a round
// once that round's timer fired. With read=lease every round sets one.
func TestReadRoundLeaseTimers(t *testing.T) {
	for _, mode := range []string{"quorum", "lease"} {
		c := newCluster(t, 3, "kv", map[string]string{"read": mode})
		c.elect("n1")
		c.DeliverAll()
		c.fire("n1", tmTick) // a tick round, acknowledged
		tickRound := c.node("n1").hbRound
		before := leaseTimers(c)
		c.Submit("n1", automaton.Request{ID: automaton.RequestID{Client: 7, Seq: 1}, Op: get("k"), Opts: automaton.Options{Read: automaton.ReadQuorum}})
		readRound := c.node("n1").hbRound
		if readRound != tickRound+1 {
			t.Fatalf("read=%s: the read sent round %d (want %d)", mode, readRound, tickRound+1)
		}
		_, timed := c.TimerAfter("n1", leaseTimerBase+automaton.TimerID(readRound))
		if want := mode == "lease"; timed != want {
			t.Fatalf("read=%s: the read's confirmation round %d set a lease timer: %v (want %v; lease timers before %v)", mode, readRound, timed, want, before)
		}
		c.DeliverAll()
		if _, ok := c.LastResponse(automaton.RequestID{Client: 7, Seq: 1}); !ok {
			t.Fatalf("read=%s: the quorum read not answered after its round", mode)
		}
		// A lease read: served at once on the lease.
		c.Submit("n1", automaton.Request{ID: automaton.RequestID{Client: 7, Seq: 2}, Op: get("k"), Opts: automaton.Options{Read: automaton.ReadLease}})
		if _, ok := c.LastResponse(automaton.RequestID{Client: 7, Seq: 2}); !ok || c.node("n1").hbRound != readRound {
			t.Fatalf("read=%s: a lease read with the tick round's lease standing: answered %v, rounds sent %d (want answered, none)", mode, ok, c.node("n1").hbRound-readRound)
		}
		if mode == "quorum" {
			// The tick round's timer fires: its lease ends although a
			// later (untimed) round was acknowledged.
			c.FireTimer("n1", leaseTimerBase+automaton.TimerID(tickRound))
			c.Submit("n1", automaton.Request{ID: automaton.RequestID{Client: 7, Seq: 3}, Op: get("k"), Opts: automaton.Options{Read: automaton.ReadLease}})
			if _, ok := c.LastResponse(automaton.RequestID{Client: 7, Seq: 3}); ok || c.node("n1").hbRound != readRound+1 {
				t.Fatalf("read=quorum: a lease read after the last timed round's timer fired: answered %v, rounds sent %d (want not yet, one)", ok, c.node("n1").hbRound-readRound)
			}
			c.DeliverAll()
			if _, ok := c.LastResponse(automaton.RequestID{Client: 7, Seq: 3}); !ok {
				t.Fatal("read=quorum: the lease read not answered after its round")
			}
		}
	}
}
