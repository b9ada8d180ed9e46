package esds

import (
	"fmt"
	"testing"
	"time"

	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/sim"
)

// TestDrainSendsBacklog: a stream with more than a full batch unsent after
// the tick sends its next message at the drain timer (parameter drain),
// not at the next tick, and only while at most drainInflight batches are
// unacknowledged; drain=off sends only at ticks. Fails if onDrain sends
// nothing (the stream then carries batch positions a tick, as before).
func TestDrainSendsBacklog(t *testing.T) {
	for _, drain := range []string{"5ms", "off"} {
		t.Run("drain="+drain, func(t *testing.T) {
			c := newCluster(t, "esds", 2, service.KV{}, map[string]string{"batch": "2", "drain": drain})
			for k := range 12 {
				c.Request("n1", service.Op{Kind: "set", Key: fmt.Sprint("k", k), Args: [][]byte{[]byte("v")}}, opts(fmt.Sprint("p", k), false))
			}
			a := c.esds("n1")
			j := a.index["n2"]
			p := &a.peers[j]
			c.FireTimer("n1", timerGossip)
			if p.sentUpTo != 2 {
				t.Fatalf("the tick sent up to %d, want 2 (one batch)", p.sentUpTo)
			}
			_, set := c.TimerAfter("n1", timerDrain)
			if drain == "off" {
				if set {
					t.Fatal("drain=off set the drain timer")
				}
				return
			}
			if !set {
				t.Fatal("a backlog of 10 positions (batch 2) set no drain timer")
			}
			// Unacknowledged: one more message (2 batches in flight), then none.
			c.FireTimer("n1", timerDrain)
			if p.sentUpTo != 4 {
				t.Fatalf("the drain sent up to %d, want 4", p.sentUpTo)
			}
			c.FireTimer("n1", timerDrain)
			if p.sentUpTo != 4 {
				t.Fatalf("with 2 batches unacknowledged the drain sent up to %d, want 4", p.sentUpTo)
			}
			// n2 merges both (its last message was full: it acknowledges at
			// its drain), and the acknowledgement opens n1's window.
			c.DeliverAll()
			if !c.FireTimer("n2", timerDrain) {
				t.Fatal("n2, sent full messages, set no drain timer to acknowledge them")
			}
			c.DeliverAll()
			if p.acked != 4 {
				t.Fatalf("n1's stream acknowledged up to %d, want 4", p.acked)
			}
			for c.FireTimer("n1", timerDrain) {
				c.DeliverAll()
				c.FireTimer("n2", timerDrain)
				c.DeliverAll()
			}
			if end := p.acked + uint64(len(p.queue)); end-p.sentUpTo >= 2 {
				t.Fatalf("drained to %d of %d, want less than a batch left", p.sentUpTo, end)
			}
			if got := c.esds("n2").ops["p11"]; got == nil {
				t.Fatal("n2 never received the last operation")
			}
		})
	}
}

// TestDrainSim runs the drain path (batch 2, so a tick leaves a full batch
// unsent) in simulation with crashes, power loss and a lossy network, the
// invariants and the ESDS checker, and fails unless some message was sent
// at the drain timer.
func TestDrainSim(t *testing.T) {
	before := drainSends.Load()
	for seed := int64(1); seed <= 6; seed++ {
		cfg := sim.Config{Protocol: "esds", Service: "kv", Nodes: 3, Clients: 6, Ops: 300, Seed: seed, Faults: "all",
			StrictFrac: 0.3, PrevProb: 0.3, RequestTimeout: 3 * time.Second,
			Params: map[string]string{"batch": "2", "drain": "5ms"}}
		res, err := sim.Run(cfg)
		if err != nil {
			t.Fatalf("%v\nreplay: %s", err, cfg.Command())
		}
		if res.Violation || res.Invariant != "" {
			t.Fatalf("seed %d: %s %s\nreplay: %s", seed, res.Invariant, res.ESDS.Detail(), cfg.Command())
		}
		t.Logf("seed %d: %d completed, %d invariant checks; %s", seed, res.Completed, res.InvariantChecks, res.ESDS.Detail())
	}
	if drainSends.Load() == before {
		t.Fatal("no message was sent at the drain timer")
	}
	t.Logf("%d messages sent at the drain timer", drainSends.Load()-before)
}
