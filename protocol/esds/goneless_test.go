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

// goneRestartKept drives the trap collection without "gone" must avoid:
// x (one set at n1) is done everywhere and stable at n1; then nothing
// reaches n1 while n2 and n3, told by n1's prefix that x is stable there,
// collect it; n1 restarts (x live, stable here, not known stable
// everywhere), and so do n2 and n3, which now hold nothing live. After a
// reliable settle it returns what a replica still holds ("" if nothing).
func goneRestartKept(t *testing.T) string {
	c := newCluster(t, "esds", 3, service.KV{}, nil)
	n1, n2, n3 := c.IDs()[0], c.IDs()[1], c.IDs()[2]
	kvRequest(c, n1, opts("", false), "set", "k", "1")
	var x *op
	for _, o := range c.esds(n1).ops {
		x = o
	}
	for i := 0; x.solid&c.esds(n1).bit() == 0; i++ {
		if i == 50 {
			t.Fatal("x never became stable at n1")
		}
		c.settle(1)
	}
	for i := 0; len(c.esds(n2).ops)+len(c.esds(n3).ops) > 0; i++ {
		if i == 200 {
			t.Fatal("n2 and n3 never collected x")
		}
		c.tick()
		for {
			m, ok := c.Pop()
			if !ok {
				break
			}
			if m.To != n1 {
				c.DeliverMessage(m)
			}
		}
	}
	if len(c.esds(n1).ops) == 0 {
		t.Fatal("n1 collected x although nothing reached it")
	}
	c.Restart(n1)
	c.Restart(n2)
	c.Restart(n3)
	c.settle(10 * gcEveryTicks)
	for _, id := range c.IDs() {
		if a := c.esds(id); len(a.ops) != 0 {
			return fmt.Sprintf("%s keeps %d operations", id, len(a.ops))
		}
	}
	return ""
}

// TestBrokenGonelessCaught: with stability=prefix, collection queues no
// "gone" positions (gc.go goneless); the peers learn that a collected
// operation is stable at its collector from the collector's stable prefix,
// which reaches stableMax over the collected operations (solidPrefix). Left
// out (brokenGoneless=1: the prefix covers live operations only, as before
// session 46), a replica restarted after its peers collected an operation
// it still holds, and restarted themselves, never learns it is stable
// there, and keeps it for good (goneRestartKept: "n1 keeps 1 operations").
// The correct protocol collects it; and kvLoad's random crash loads
// collect everything (seeds 1-20, batch 4, with and without crashes).
func TestBrokenGonelessCaught(t *testing.T) {
	defer func() { brokenGoneless = 0 }()
	brokenGoneless = 1
	if s := goneRestartKept(t); s == "" {
		t.Fatal("brokenGoneless=1: every replica collected everything; want x kept at n1")
	}
	brokenGoneless = 0
	if s := goneRestartKept(t); s != "" {
		t.Fatalf("%s after quiescence", s)
	}
	for seed := int64(1); seed <= 20; seed++ {
		for _, crash := range []bool{false, true} {
			if s := quiescentKept(t, map[string]string{"batch": "4"}, crash, seed); s != "" {
				t.Errorf("seed %d, crash %v: %s after quiescence", seed, crash, s)
			}
		}
	}
}

// stableHereAfterRestart runs sets at every replica, lets them become
// stable (not collected), restarts n1 and returns the operations stable
// at n1 before the restart and not after it.
func stableHereAfterRestart(t *testing.T) []string {
	c := newCluster(t, "esds", 3, service.KV{}, nil)
	for i := range 30 {
		kvRequest(c, c.IDs()[i%3], opts("", false), "set", fmt.Sprint("k", i%5), fmt.Sprint(i))
		if i%4 == 0 {
			c.settle(1)
		}
	}
	c.settle(3)
	n1 := c.IDs()[0]
	a := c.esds(n1)
	var before []string
	for id, o := range a.ops {
		if o.solid&a.bit() != 0 {
			before = append(before, id)
		}
	}
	if len(before) == 0 {
		t.Fatal("no operation stable at n1 before the restart")
	}
	c.Restart(n1)
	a = c.esds(n1)
	var lost []string
	for _, id := range before {
		if o := a.ops[id]; o == nil || o.solid&a.bit() == 0 {
			lost = append(lost, id)
		}
	}
	return lost
}

// TestBrokenPrefixRecordCaught: under stability=prefix a record o/<id> is
// not rewritten when its operation becomes stable here at or below the
// stable prefix; record "p" says it for all of them (store.go flushDirty).
// What a replica knew stable here it knows again after a restart (the
// liveness of collection without "gone" rests on it: package doc). Without
// "p" (brokenPrefixRec=1) a restart forgets it.
func TestBrokenPrefixRecordCaught(t *testing.T) {
	if lost := stableHereAfterRestart(t); len(lost) > 0 {
		t.Fatalf("after a restart n1 no longer knows %d operations stable here: %v", len(lost), lost)
	}
	defer func() { brokenPrefixRec = 0 }()
	brokenPrefixRec = 1
	if lost := stableHereAfterRestart(t); len(lost) == 0 {
		t.Fatal("brokenPrefixRec=1: n1 still knows every operation stable here after the restart")
	}
}
