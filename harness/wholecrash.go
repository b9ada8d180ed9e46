package harness

import (
	"fmt"
	"math/rand"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// WholeCrash is the whole-cluster crash check (issue 29, "durable means
// durable"): rounds times, writes new keys at random nodes while messages
// are delivered, timers fired and effects completed in a seeded random
// interleaving, then crashes every node at once (messages in flight are
// lost with them) and restarts them all. After each restart it settles
// the cluster and requires every write acknowledged so far, in this round
// and the earlier ones, to read back at a random node (a TRYAGAIN answer
// is retried after more settling). Persist outputs are durable at once
// here (the simulator's power loss is what loses unsynced ones).
//
// It returns the number of acknowledged writes it read back.
func WholeCrash(t TB, opts Options, seed int64, rounds, writes int) int {
	t.Helper()
	r := rand.New(rand.NewSource(seed))
	c := New(t, opts)
	ids := c.IDs()
	settle := func(n int) {
		for i := 0; i < n; i++ {
			c.FireAllNodes()
			c.CompleteEffects()
			c.DeliverAll()
			c.CompleteEffects()
		}
	}
	set := func(k string) service.Op { return service.Op{Kind: "set", Key: k, Args: [][]byte{[]byte("v" + k)}} }
	settle(2)
	var acked []string
	for round := 0; round < rounds; round++ {
		var ws []automaton.RequestID
		keys := map[automaton.RequestID]string{}
		for i := 0; i < writes; i++ {
			k := fmt.Sprintf("r%dk%d", round, i)
			id := c.Request(ids[r.Intn(len(ids))], set(k), automaton.Options{})
			ws, keys[id] = append(ws, id), k
			for j := r.Intn(8); j > 0 && c.DeliverOne(); j-- {
			}
			if r.Intn(3) == 0 {
				c.CompleteEffects()
			}
			if r.Intn(5) == 0 {
				settle(1)
			}
		}
		for j := r.Intn(4 * writes); j > 0 && c.DeliverOne(); j-- {
		}
		for _, id := range ws {
			if res, ok := c.Response(id); ok && !res.IsErr() {
				acked = append(acked, keys[id])
			}
		}
		for _, id := range ids {
			c.Crash(id)
		}
		for _, id := range ids {
			c.Restart(id)
		}
		settle(12)
		for _, k := range acked {
			var got service.Result
			answered := false
			for try := 0; try < 20 && !answered; try++ {
				id := c.Request(ids[r.Intn(len(ids))], service.Op{Kind: "get", Key: k}, automaton.Options{})
				settle(3)
				got, answered = c.Response(id)
				if answered && got.IsErr() {
					answered = false
				}
			}
			if !answered {
				t.Fatalf("seed %d round %d: acknowledged write %s not readable after every node crashed and restarted (last answer %v)", seed, round, k, got)
				return 0
			}
			if string(got.Bytes) != "v"+k {
				t.Fatalf("seed %d round %d: acknowledged write %s reads back %v after every node crashed and restarted", seed, round, k, got)
				return 0
			}
		}
	}
	return len(acked)
}
