package esds

import (
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// TestStaleDeletesBounded: once a state takes the delta path (records "g"
// kept, gc.go collectDelta), a collection that rewrites "s" deletes none
// of the records it stands for in its step; they go at most gcPerTick a
// tick (dropStale). Before, the rewrite's step deleted them all (76,000
// at 10,000 keys and ~25k puts/s: a 94-116 ms step; BenchmarkRewriteTicks).
// After the load, every record o/<id> left on a replica's disk is a live
// operation's or one "g" keeps (none leaks), also after a crash between
// the rewrite and its deletes (restore queues them again). Fails on the
// old collection (170 deletes in a step) and without restore's queueing
// (a record of a collected operation left on n2's disk).
func TestStaleDeletesBounded(t *testing.T) {
	oldMin, oldFactor, oldPer, oldScan := deltaMin, deltaFactor, gcPerTick, gcScanPerTick
	deltaMin, deltaFactor, gcPerTick, gcScanPerTick = 1, 2, 3, 64
	t.Cleanup(func() { deltaMin, deltaFactor, gcPerTick, gcScanPerTick = oldMin, oldFactor, oldPer, oldScan })
	c := newCluster(t, "esds", 3, service.KV{}, nil)
	rewrites, maxDel := 0, 0
	dels, rewrote := 0, false // the current step's (outputs come before its end)
	c.Observe(func(id automaton.NodeID, o automaton.Output) {
		if p, ok := o.(automaton.Persist); ok {
			switch {
			case p.Key == recStable && !p.Delete:
				rewrote = true
			case p.Delete && strings.HasPrefix(p.Key, recOp):
				dels++
			}
		}
	})
	c.afterStep = func(a *ESDS) {
		if a.collectEveryTick() {
			maxDel = max(maxDel, dels)
			if rewrote {
				rewrites++
			}
		}
		dels, rewrote = 0, false
	}
	ids := c.IDs()
	for i := range 400 {
		c.Request(ids[i%3], service.Op{Kind: "set", Key: fmt.Sprintf("k%d", i%20), Args: [][]byte{[]byte(fmt.Sprint(i))}}, opts(fmt.Sprintf("w%d", i), false))
		if i%10 == 9 {
			c.settle(1)
		}
		if i == 200 {
			c.Crash(ids[1]) // between rewrites and their deletes, most likely
			c.Restart(ids[1])
		}
	}
	c.settle(200)
	if rewrites == 0 {
		t.Fatal("no collection rewrote \"s\" on the delta path: the test exercises nothing")
	}
	if maxDel > gcPerTick {
		t.Errorf("a step on the delta path deleted %d records o/<id>, bound %d", maxDel, gcPerTick)
	}
	for _, id := range ids {
		a := c.esds(id)
		kept := map[string]bool{}
		for _, k := range a.uncompacted {
			kept[k.key] = true
		}
		for k := range c.Disk(id) {
			if strings.HasPrefix(k, recOp) && a.ops[k[len(recOp):]] == nil && !kept[k] {
				t.Errorf("%s: record %q of a collected operation left on disk (stale queue %d)", id, k, a.staleN)
				break
			}
		}
	}
	t.Logf("%d rewrites on the delta path, at most %d deletes a step", rewrites, maxDel)
}
