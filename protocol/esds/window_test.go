package esds

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/synod-dev/synod/service"
)

// TestStreamWindowWidensUnderBacklog: a stream message carries batch
// positions while at most backlogAt batches are unsent, the whole backlog
// beyond that (up to backlogMax batches), one entry per operation; the
// peer then knows every operation it carried.
func TestStreamWindowWidensUnderBacklog(t *testing.T) {
	for _, tc := range []struct{ ops, want int }{
		{2 * backlogAt, 2},                  // at the threshold: one batch
		{2*backlogAt + 1, 2*backlogAt + 1},  // over it: the whole backlog
		{2*backlogMax + 10, 2 * backlogMax}, // capped
	} {
		t.Run(fmt.Sprint(tc.ops), func(t *testing.T) {
			c := newCluster(t, "esds", 2, service.KV{}, map[string]string{"batch": "2", "widen": "true"})
			for i := range tc.ops {
				kvRequest(c, "n1", opts(fmt.Sprint("x", i), false), "set", "k", fmt.Sprint(i))
			}
			c.FireTimer("n1", timerGossip)
			p := c.esds("n1").peers[1]
			want := tc.want
			if int(p.sentUpTo) != want {
				t.Fatalf("%d positions queued: sent up to %d, want %d", len(p.queue), p.sentUpTo, want)
			}
			c.DeliverAll()
			done := 0
			for _, o := range c.esds("n2").ops {
				if o.done&1 != 0 {
					done++
				}
			}
			if done != want {
				t.Fatalf("n2 knows %d operations done at n1, want %d", done, want)
			}
			c.settle(tc.ops)
			c.agreedOrder()
		})
	}
}

// TestStreamWindowOffByDefault: without the parameter widen, a backlog
// beyond backlogAt batches still goes out batch positions a message.
func TestStreamWindowOffByDefault(t *testing.T) {
	c := newCluster(t, "esds", 2, service.KV{}, map[string]string{"batch": "2"})
	for i := range 2*backlogMax + 10 {
		kvRequest(c, "n1", opts(fmt.Sprint("x", i), false), "set", "k", fmt.Sprint(i))
	}
	c.FireTimer("n1", timerGossip)
	if got := c.esds("n1").peers[1].sentUpTo; got != 2 {
		t.Fatalf("sent up to %d, want one batch (2)", got)
	}
}

// TestStreamWindowConverges: with a small batch and a lossy, reordering
// network (wide windows, retransmitted), three replicas doing operations
// concurrently agree on one order.
func TestStreamWindowConverges(t *testing.T) {
	c := newCluster(t, "esds", 3, service.KV{}, map[string]string{"batch": "2", "widen": "true"})
	c.rng = rand.New(rand.NewSource(7))
	for i := range 400 {
		n := c.IDs()[c.rng.Intn(3)]
		kvRequest(c, n, opts(fmt.Sprint("o", i), c.rng.Intn(8) == 0), "incr", fmt.Sprint("k", c.rng.Intn(3)), "1")
		if c.rng.Intn(20) == 0 {
			c.tick()
			c.deliver(0.2, 0.1, 0.5)
		}
	}
	c.settle(60)
	if got := len(c.agreedOrder()); got != 400 {
		t.Fatalf("%d operations in the agreed order, want 400", got)
	}
}
