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
func ckptRun(t *testing.T, tail, gap int, frontier bool) (map[string]string, ckptCounts) {
	oldTail, oldGap, oldFrontier := ckptTail, ckptGap, ckptFrontier
	ckptTail, ckptGap, ckptFrontier = tail, gap, frontier
	t.Cleanup(func() { ckptTail, ckptGap, ckptFrontier = oldTail, oldGap, oldFrontier })
	c := newCluster(t, "esds", 3, service.KV{}, nil)
	c.rng = rand.New(rand.NewSource(18))
	keys := []string{"a", "b", "c", "d"}
	for i := len(keys); i < ckptKeys; i++ {
		keys = append(keys, fmt.Sprint("k", i))
	}
	out := kvAnswers(c, 700, 6, func(i int) service.Op {
		k := []byte(keys[c.rng.Intn(len(keys))])
		kinds := 4
		if ckptKeys > 4 {
			kinds = 5 // and deletes, which are not key-local (commuting insertions)
		}
		switch c.rng.Intn(kinds) {
		case 0:
			return service.Op{Kind: "set", Key: string(k), Args: [][]byte{[]byte(fmt.Sprint(i))}}
		case 1:
			return service.Op{Kind: "get", Key: string(k)}
		case 2:
			return service.Op{Kind: "incr", Key: string(k), Args: [][]byte{[]byte("1")}}
		case 3:
			return service.Op{Kind: "append", Key: string(k), Args: [][]byte{[]byte("x")}}
		}
		return service.Op{Kind: "del", Key: string(k)}
	})
	var n ckptCounts
	for _, id := range c.IDs() {
		a := c.esds(id)
		n.commuted += a.commuted
		n.stale += a.staleApplied
		n.used += a.ckptUsed
		n.finalUsed += a.ckptFinalUsed
		n.finalStale += a.ckptFinalStale
		n.free += a.freeAnswers
		n.replayed += a.replayed
		n.keyed += a.keyAnswers
	}
	return out, n
}

// kvAnswers submits n operations made by next (op0, op1, ...) at random
// replicas, a fifth strict, with a gossip tick before one in tickOdds on
// average and a faulty delivery one in three, settles the cluster and
// returns every answer by operation id.
func kvAnswers(c *cluster, n, tickOdds int, next func(i int) service.Op) map[string]string {
	rids := map[string]automaton.RequestID{}
	for i := range n {
		node := c.IDs()[c.rng.Intn(len(c.IDs()))]
		id := fmt.Sprintf("op%d", i)
		o := next(i)
		rids[id] = c.Request(node, o, opts(id, c.rng.Intn(5) == 0))
		if c.rng.Intn(tickOdds) == 0 {
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
	return out
}

// ckptCounts: rebuilds started from a checkpoint, from one at the final
// frontier, and frontier checkpoints a placed label landed under.
// free: answers given without the tentative state (service.StateFree);
// replayed: operations applied by rebuilds; keyed: answers over keys
// alone (apply.go keyValue).
type ckptCounts struct{ used, finalUsed, finalStale, commuted, stale, free, replayed, keyed int }

// ckptKeys is the number of keys ckptRun's load uses (at least 4).
var ckptKeys = 4

// TestCommutingInsertsChangeNoValue: applying an operation that gossip
// placed under the tentative state's last label in place, when no later
// operation names its keys (tentInsert), and applying a local operation
// to a stale state when no operation placed since names its keys
// (staleAppend), answers every operation exactly as rebuilding does, with and without checkpoints, in a run where many
// insertions commute and many do not (32 keys).
func TestCommutingInsertsChangeNoValue(t *testing.T) {
	defer func(c bool, k int) { commute, ckptKeys = c, k }(commute, ckptKeys)
	ckptKeys = 32
	commute = false
	without, none := ckptRun(t, 1<<30, 1<<30, false)
	if none.commuted != 0 {
		t.Fatalf("commuting insertions off, yet %d done", none.commuted)
	}
	commute = true
	for _, tail := range []int{1 << 30, 2} {
		with, n := ckptRun(t, tail, 2, tail == 2)
		if n.commuted == 0 || n.stale == 0 {
			t.Fatalf("%d insertions commuted, %d operations applied to a stale state: the test exercises too little", n.commuted, n.stale)
		}
		sameAnswers(t, "with commuting insertions", with, without)
		if n.finalStale != 0 {
			t.Errorf("%d frontier checkpoints made stale by a placed label", n.finalStale)
		}
		t.Logf("%d answers, %d insertions in place, %d applied to a stale state, %d rebuilds from a checkpoint", len(with), n.commuted, n.stale, n.used)
	}
}

// TestStateFreeAnswersChangeNoValue: answering a plain SET without
// rebuilding the tentative state (apply.go value, service.StateFree)
// answers every operation exactly as rebuilding does, and saves replays.
func TestStateFreeAnswersChangeNoValue(t *testing.T) {
	defer func(f bool, k int) { stateFree, ckptKeys = f, k }(stateFree, ckptKeys)
	ckptKeys = 32
	stateFree = false
	without, none := ckptRun(t, 2, 2, true)
	if none.free != 0 {
		t.Fatalf("state-free answers off, yet %d given", none.free)
	}
	stateFree = true
	with, n := ckptRun(t, 2, 2, true)
	if n.free == 0 {
		t.Fatal("no state-free answer: the test exercises nothing")
	}
	sameAnswers(t, "with state-free answers", with, without)
	t.Logf("%d answers, %d state-free; operations replayed by rebuilds %d -> %d", len(with), n.free, none.replayed, n.replayed)
}

// TestKeyValuesChangeNoValue: computing a key-local operation's value over
// its keys alone when the tentative state is stale (apply.go keyValue)
// answers every operation exactly as rebuilding does (32 keys, deletes
// among the operations: those are not key-local and must stop it), and
// saves replays.
func TestKeyValuesChangeNoValue(t *testing.T) {
	defer func(v bool, k int) { keyValues, ckptKeys = v, k }(keyValues, ckptKeys)
	for _, keys := range []int{4, 32} { // key-local operations only; and deletes
		ckptKeys = keys
		keyValues = false
		without, none := ckptRun(t, 2, 2, true)
		if none.keyed != 0 {
			t.Fatalf("answers over keys alone off, yet %d given", none.keyed)
		}
		keyValues = true
		with, n := ckptRun(t, 2, 2, true)
		if keys == 4 && (n.keyed == 0 || n.replayed >= none.replayed) {
			t.Fatalf("%d answers over keys alone, replays %d -> %d: the test exercises nothing", n.keyed, none.replayed, n.replayed)
		}
		sameAnswers(t, "with answers over keys alone", with, without)
		t.Logf("%d keys: %d answers, %d over keys alone; operations replayed by rebuilds %d -> %d", keys, len(with), n.keyed, none.replayed, n.replayed)
	}
}

// sameAnswers reports the operations answered differently in two runs.
func sameAnswers(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d answers %s, %d without checkpoints", len(got), what, len(want))
	}
	diff := 0
	for id, w := range want {
		if g := got[id]; g != w {
			if diff++; diff <= 5 {
				t.Errorf("%s: %s %s, %s without checkpoints", id, g, what, w)
			}
		}
	}
}

// TestCheckpointsChangeNoValue: rebuilding the tentative state from a
// checkpoint (apply.go) answers every operation exactly as rebuilding it
// from the stable state does, in a run where many rebuilds use one.
func TestCheckpointsChangeNoValue(t *testing.T) {
	defer func(v bool) { keyValues = v }(keyValues)
	keyValues = false // else the rebuilds are few (keyValue)
	with, used := ckptRun(t, 2, 2, false)
	without, none := ckptRun(t, 1<<30, 1<<30, false)
	if none.used != 0 {
		t.Fatalf("checkpoints off, yet %d rebuilds used one", none.used)
	}
	if used.used == 0 {
		t.Fatalf("no rebuild started from a checkpoint: the test exercises nothing")
	}
	sameAnswers(t, "with checkpoints", with, without)
	t.Logf("%d answers, %d rebuilds from a checkpoint", len(with), used.used)
}

// TestFrontierCheckpoints: checkpoints at the final frontier (finalFrontier)
// are used, no placed label ever lands under one (its argument holds on a
// lossy, reordering network), and they change no answer.
func TestFrontierCheckpoints(t *testing.T) {
	defer func(v bool) { keyValues = v }(keyValues)
	keyValues = false // else the rebuilds are few (keyValue)
	without, _ := ckptRun(t, 1<<30, 1<<30, false)
	for _, tail := range []int{1 << 30, 2} { // frontier checkpoints only; with tail ones
		with, n := ckptRun(t, tail, 2, true)
		if n.finalUsed == 0 {
			t.Fatalf("no rebuild started from a frontier checkpoint: the test exercises nothing")
		}
		if n.finalStale != 0 {
			t.Errorf("%d frontier checkpoints made stale by a placed label", n.finalStale)
		}
		sameAnswers(t, "with frontier checkpoints", with, without)
		t.Logf("%d answers, %d rebuilds from a checkpoint, %d from the frontier", len(with), n.used, n.finalUsed)
	}
}
