package paxos

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
)

// Leader reports the elected leader at every replica once they heard it, and
// follows a fail-over.
func TestLeaderHint(t *testing.T) {
	c := newCluster(t, 3, "kv", nil)
	for _, id := range c.IDs() {
		if l := c.node(id).Leader(); l != "" {
			t.Fatalf("%s reports leader %q before any election", id, l)
		}
	}
	c.elect("n2")
	c.tickAll()
	for _, id := range c.IDs() {
		if l := c.node(id).Leader(); l != "n2" {
			t.Errorf("%s reports leader %q, want n2", id, l)
		}
	}
	c.Crash("n2")
	c.elect("n3")
	c.tickAll()
	for _, id := range []automaton.NodeID{"n1", "n3"} {
		if l := c.node(id).Leader(); l != "n3" {
			t.Errorf("after fail-over %s reports leader %q, want n3", id, l)
		}
	}
}
