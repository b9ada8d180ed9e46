package node

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
)

// BenchmarkSlotGuard measures what the slot guard costs a shard group's
// writes (node/slotmap.go): SETs to one shard group (3 in-process nodes,
// paxos, memory durability), 64 at a time, at its leader, in one run, as
// client: a client request (validated, the node's map check, then an
// atomic group: the slot guard, the SET, slotdirty); checked-unguarded:
// validated and map-checked as before, then the SET alone (a client
// request before the guard existed); own: the node's own request (the SET
// alone, unchecked). client minus checked-unguarded is the guard's cost.
// cpu-us/op is the process's CPU per SET.
//
//	go test ./node -run '^$' -bench SlotGuard -benchtime 20000x
func BenchmarkSlotGuard(b *testing.B) {
	ns := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv", Shards: []config.Shard{
		{Name: "s0", Slots: "0-16383", Nodes: []string{"n1", "n2", "n3"}},
	}}
	cfg, ls := mkCluster(b, 3, config.Memory, ns)
	var nodes []*Node
	for i, l := range ls {
		nodes = append(nodes, startNode(b, cfg, fmt.Sprintf("n%d", i+1), l, Options{}))
	}
	var leader *Node
	for deadline := time.Now().Add(20 * time.Second); leader == nil && time.Now().Before(deadline); {
		for _, n := range nodes {
			if p := n.loop("default#s0").leader.Load(); p != nil && *p == n.id {
				leader = n
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if leader == nil {
		b.Fatal("no leader")
	}
	val := make([]byte, 100)
	var client atomic.Uint64 // client ids never repeat (deduplication)
	for _, mode := range []string{"client", "checked-unguarded", "own"} {
		b.Run(mode, func(b *testing.B) {
			cpu0 := cpuTime()
			b.ResetTimer()
			b.SetParallelism(64 / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				id := client.Add(1)
				for seq := uint64(1); pb.Next(); seq++ {
					r := automaton.Request{ID: automaton.RequestID{Client: 5000 + id, Seq: seq},
						Op: service.Op{Kind: "set", Key: fmt.Sprintf("k%d", seq%10000), Args: [][]byte{val}}}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					var resp automaton.Response
					var err error
					switch mode {
					case "client":
						resp, err = leader.Do(ctx, "default#s0", r)
					case "checked-unguarded": // what a client request cost before the guard
						if err = automaton.ValidateRequest(leader.loop("default#s0").svc, r); err == nil {
							if res, refused := leader.refuseUnowned(ctx, "default#s0", r); refused {
								resp.Result = res
							} else {
								resp, err = leader.do(internalCtx(ctx), "default#s0", r)
							}
						}
					default:
						resp, err = leader.do(internalCtx(ctx), "default#s0", r)
					}
					cancel()
					if err != nil || resp.Result.IsErr() {
						b.Errorf("set: %v %v", err, resp.Result)
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
		})
	}
}
