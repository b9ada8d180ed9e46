package esds

import (
	"fmt"
	"testing"

	"github.com/synod-dev/synod/service"
)

// quiescentKept runs a random KV load for one seed on three replicas over a
// lossy, duplicating, reordering network (with crashes and restarts if
// crash), checks that the replicas agree on one order, and returns what a
// replica still holds after quiescence ("" when every replica collected
// everything).
func quiescentKept(t *testing.T, params map[string]string, crash bool, seed int64) string {
	c := newCluster(t, "esds", 3, service.KV{}, params)
	c.rng.Seed(seed)
	for i := 0; i < 150; i++ {
		n := c.IDs()[c.rng.Intn(len(c.IDs()))]
		if crash && c.rng.Intn(25) == 0 {
			c.Restart(n)
		}
		key := fmt.Sprint("k", c.rng.Intn(4))
		if c.rng.Intn(2) == 0 {
			kvRequest(c, n, opts("", c.rng.Intn(4) == 0), "get", key)
		} else {
			kvRequest(c, n, opts("", false), "set", key, fmt.Sprint(i))
		}
		if c.rng.Intn(2) == 0 {
			c.tick()
			c.deliver(0.2, 0.1, 0.3)
		}
	}
	c.settle(300)
	c.agreedOrder()
	c.settle(2 * gcEveryTicks)
	for _, id := range c.IDs() {
		if a := c.esds(id); len(a.ops) != 0 || len(a.dna) != 0 || len(a.appliedLive) != 0 {
			return fmt.Sprintf("%s keeps %d operations (%d done, %d applied)", id, len(a.ops), len(a.dna), len(a.appliedLive))
		}
	}
	return ""
}

// TestBrokenGonelessCaught: with stability=prefix, collection queues no
// "gone" positions (gc.go goneless); the peers learn that a collected
// operation is stable at its collector from the collector's stable prefix,
// which reaches stableMax over the collected operations (solidPrefix). Left
// out (brokenGoneless=1: the prefix covers live operations only, as before
// session 46), a replica restarted after its peers collected operations it
// still holds never learns they are stable there, and keeps them for good:
// seed 2 of kvLoad's crash load, batch 4, keeps 63 operations at n1 (seed
// 5: 64; 2 of seeds 1-20 with and without crashes). The correct protocol
// collects everything in all 40 runs.
func TestBrokenGonelessCaught(t *testing.T) {
	defer func() { brokenGoneless = 0 }()
	brokenGoneless = 1
	if s := quiescentKept(t, map[string]string{"batch": "4"}, true, 2); s == "" {
		t.Fatal("brokenGoneless=1, seed 2: every replica collected everything; want operations kept")
	}
	brokenGoneless = 0
	for seed := int64(1); seed <= 20; seed++ {
		for _, crash := range []bool{false, true} {
			if s := quiescentKept(t, map[string]string{"batch": "4"}, crash, seed); s != "" {
				t.Errorf("seed %d, crash %v: %s after quiescence", seed, crash, s)
			}
		}
	}
}
