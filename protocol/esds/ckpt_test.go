package esds

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// ckptRun runs a random KV load (non-strict mostly, a faulty network so
// gossip lands out of label order) on 3 replicas and returns every answer
// by operation id, and how many rebuilds of the tentative state started
// from a checkpoint.
func ckptRun(t *testing.T, tail, gap int) (map[string]string, int) {
	oldTail, oldGap := ckptTail, ckptGap
	ckptTail, ckptGap = tail, gap
	t.Cleanup(func() { ckptTail, ckptGap = oldTail, oldGap })
	c := newCluster(t, "esds", 3, service.KV{}, nil)
	c.rng = rand.New(rand.NewSource(18))
	keys := []string{"a", "b", "c", "d"}
	rids := map[string]automaton.RequestID{}
	for i := range 700 {
		n := c.IDs()[c.rng.Intn(len(c.IDs()))]
		id := fmt.Sprintf("op%d", i)
		k := []byte(keys[c.rng.Intn(len(keys))])
		var o service.Op
		switch c.rng.Intn(4) {
		case 0:
			o = service.Op{Kind: "set", Key: string(k), Args: [][]byte{[]byte(fmt.Sprint(i))}}
		case 1:
			o = service.Op{Kind: "get", Key: string(k)}
		case 2:
			o = service.Op{Kind: "incr", Key: string(k), Args: [][]byte{[]byte("1")}}
		default:
			o = service.Op{Kind: "append", Key: string(k), Args: [][]byte{[]byte("x")}}
		}
		rids[id] = c.Request(n, o, opts(id, c.rng.Intn(5) == 0))
		if c.rng.Intn(6) == 0 {
			c.tick()
		}
		if c.rng.Intn(3) == 0 {
			c.deliver(0.1, 0.1, 0.5)
		}
	}
	c.settle(40)
	out := map[string]string{}
	for id, r := range rids {
		if res, ok := c.answer(r); ok {
			out[id] = res.String()
		}
	}
	used := 0
	for _, n := range c.IDs() {
		used += c.esds(n).ckptUsed
	}
	return out, used
}

// TestCheckpointsChangeNoValue: rebuilding the tentative state from a
// checkpoint (apply.go) answers every operation exactly as rebuilding it
// from the stable state does, in a run where many rebuilds use one.
func TestCheckpointsChangeNoValue(t *testing.T) {
	with, used := ckptRun(t, 2, 2)
	without, none := ckptRun(t, 1<<30, 1<<30)
	if none != 0 {
		t.Fatalf("checkpoints off, yet %d rebuilds used one", none)
	}
	if used == 0 {
		t.Fatalf("no rebuild started from a checkpoint: the test exercises nothing")
	}
	if len(with) != len(without) {
		t.Errorf("%d answers with checkpoints, %d without", len(with), len(without))
	}
	diff := 0
	for id, w := range without {
		if g := with[id]; g != w {
			if diff++; diff <= 5 {
				t.Errorf("%s: %s with checkpoints, %s without", id, g, w)
			}
		}
	}
	t.Logf("%d answers, %d rebuilds from a checkpoint, %d differences", len(with), used, diff)
}
