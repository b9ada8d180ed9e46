package paxos

import (
	"cmp"
	"slices"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
)

// TestUnpinOnOthersMajority: the leader answers a put on the follower's
// Accepted that completes a majority with its own vote, and unpins the
// instance (automaton.Unpin) on the Accepted that makes the followers'
// acceptances alone a majority: the second follower's of three nodes, the
// third's of five; never on fewer. paxos-broken-unpinone unpins on the
// first follower's, in the step that answers and before the answer. The
// test fails on a leader that unpins nothing ("unpinned after 0 ...") or
// on one follower's acceptance.
func TestUnpinOnOthersMajority(t *testing.T) {
	for _, tc := range []struct {
		proto              string
		nodes              int
		answered, unpinned int // followers' Accepteds stepped when the answer, the Unpin came
	}{
		{"paxos", 3, 1, 2},
		{"paxos", 5, 2, 3},
		{BrokenUnpinOne, 3, 1, 1},
	} {
		c := newClusterOf(t, tc.proto, tc.nodes, "kv", nil)
		c.elect("n1")
		c.DeliverAll()
		for seq := uint64(1); seq <= 3; seq++ {
			id := automaton.RequestID{Client: 1, Seq: seq}
			c.Submit("n1", automaton.Request{ID: id, Op: set("k", "v")})
			// The Accepts reach every follower; their Accepteds are held.
			c.Deliver(func(m harness.Message) bool { return m.From == "n1" }, 0)
			var acks []harness.Message
			for {
				m, ok := c.Pop()
				if !ok {
					break
				}
				acks = append(acks, m)
			}
			slices.SortFunc(acks, func(x, y harness.Message) int { return cmp.Compare(x.From, y.From) })
			answered, unpinned := 0, 0
			var inst uint64
			for k, m := range acks {
				for _, o := range c.DeliverMessage(m) {
					switch o := o.(type) {
					case automaton.Respond:
						if o.Resp.ID == id {
							answered, inst = k+1, o.UpTo
						}
					case automaton.Unpin:
						if unpinned != 0 {
							t.Errorf("%s, %d nodes, put %d: unpinned twice", tc.proto, tc.nodes, seq)
						}
						unpinned = k + 1
						if answered == 0 && tc.proto == "paxos" {
							t.Errorf("%s, %d nodes, put %d: Unpin{%d} before the answer", tc.proto, tc.nodes, seq, o.Pos)
						}
						if inst != 0 && o.Pos != inst {
							t.Errorf("%s, %d nodes, put %d: Unpin{%d}, answer positioned at %d", tc.proto, tc.nodes, seq, o.Pos, inst)
						}
					}
				}
			}
			if answered != tc.answered || unpinned != tc.unpinned {
				t.Errorf("%s, %d nodes, put %d: answered after %d followers' Accepteds, unpinned after %d; want %d and %d",
					tc.proto, tc.nodes, seq, answered, unpinned, tc.answered, tc.unpinned)
			}
			c.DeliverAll()
		}
		if n := len(c.node("n1").ownChosen); n != 0 {
			t.Errorf("%s, %d nodes: %d instances still kept after every follower acknowledged", tc.proto, tc.nodes, n)
		}
	}
}

// TestOwnChosenBounded: with a follower down, the instances chosen with
// the leader's vote stay kept (the followers' acceptances never form a
// majority without it), at most 2 x window of them.
func TestOwnChosenBounded(t *testing.T) {
	c := newClusterOf(t, "paxos", 3, "kv", map[string]string{"window": "2"})
	c.elect("n1")
	c.DeliverAll()
	c.Crash("n3")
	for seq := uint64(1); seq <= 10; seq++ {
		if _, ok := c.do("n1", automaton.RequestID{Client: 1, Seq: seq}, set("k", "v"), 0); !ok {
			t.Fatalf("put %d not answered", seq)
		}
	}
	if n := len(c.node("n1").ownChosen); n != 4 {
		t.Errorf("%d instances kept, want 2 x window = 4", n)
	}
}
