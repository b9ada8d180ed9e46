package pbpaxos

import (
	"strconv"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// TestReplayWhenDeltaOutgrowsCommands: pushes onto one growing list are
// shipped as their commands once the list's delta (its whole value)
// outweighs them (replay.go), so what each acceptor persists per instance
// stays flat instead of growing with the list, and every replica reaches
// the leader's state.
func TestReplayWhenDeltaOutgrowsCommands(t *testing.T) {
	c := cluster(t, service.KV{}, nil)
	persisted := map[automaton.NodeID]int{}
	c.Observe(func(id automaton.NodeID, o automaton.Output) {
		if p, ok := o.(automaton.Persist); ok && strings.HasPrefix(p.Key, recSlotPfx) {
			persisted[id] += len(p.Value)
		}
	})
	const n = 1000
	for i := 0; i < n; i++ {
		op := service.Op{Kind: "lpush", Key: "list", Args: [][]byte{[]byte("element-" + strconv.Itoa(i))}}
		id := c.RequestFanout(op, automaton.Options{})
		c.DeliverAll()
		if r, ok := c.Response(id); !ok || r.Err != "" {
			t.Fatalf("lpush %d: %v %v", i, r, ok)
		}
	}
	// Shipping the delta, instance i would persist the whole list (about
	// 12 B per element here): ~6 MB over the run at each node.
	for _, id := range c.IDs() {
		if per := persisted[id] / n; per > 200 {
			t.Errorf("%s persisted %d B per instance (%d in all): the list's value is being shipped", id, per, persisted[id])
		}
	}
	c.FireTimer("n1", tmTick) // the commit notice reaches the followers
	c.DeliverAll()
	leader := c.Node("n1").(*PBPaxos)
	want := service.StateHash(leader.sm.st)
	for _, id := range c.IDs()[1:] {
		b := c.Node(id).(*PBPaxos)
		if b.applied != leader.applied {
			t.Fatalf("%s applied %d, leader %d", id, b.applied, leader.applied)
		}
		if got := service.StateHash(b.sm.st); got != want {
			t.Fatalf("%s's state differs from the leader's", id)
		}
		if s := b.log[b.applied]; s == nil || s.kind != updReplay {
			t.Fatalf("%s: the last push was not shipped as a replay: %+v", id, s)
		}
	}
	// A small write on a fresh key still ships its delta.
	c.RequestFanout(set("small", "v"), automaton.Options{})
	c.DeliverAll()
	c.FireTimer("n1", tmTick)
	c.DeliverAll()
	if s := c.Node("n2").(*PBPaxos).log[leader.applied]; s == nil || s.kind != updDelta {
		t.Fatalf("a SET of a small value was not shipped as a delta: %+v", s)
	}
}
