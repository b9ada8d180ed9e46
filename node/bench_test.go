package node

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	_ "github.com/synod-dev/synod/protocol/paxos"
	"github.com/synod-dev/synod/service"
)

// BenchmarkPaxosPut measures the node runtime path alone (no RESP
// gateway): puts submitted with Node.Do to the leader of a 3-node
// Multi-Paxos cluster in this process, 64 at a time. Besides ns/op it
// reports allocs/op and B/op summed over the three nodes (all in this
// process) and cpu-us/op, the process's user+system CPU per put, the figure
// docs/COSTS.md ("Runtime path profile") compares before and after.
//
//	go test ./node -run '^$' -bench PaxosPut -benchtime 20000x
func BenchmarkPaxosPut(b *testing.B) {
	for _, d := range []string{config.Memory, config.Fsync} {
		b.Run(d, func(b *testing.B) {
			ns := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv"}
			cfg, ls := mkCluster(b, 3, d, ns)
			var nodes []*Node
			for i, n := range cfg.Nodes {
				nodes = append(nodes, startNode(b, cfg, n.ID, ls[i], Options{}))
			}
			leader := nodes[0]
			do(b, leader, "default", req("set", "warm", "x")) // elects a leader
			eventually(b, "a leader", func() bool {
				id, _, _ := nodes[0].Leader("default")
				for _, n := range nodes {
					if n.ID() == id {
						leader = n
						return true
					}
				}
				return false
			})
			val := make([]byte, 100)
			var client atomic.Uint64
			b.SetParallelism(32) // 32 x GOMAXPROCS goroutines
			b.ReportAllocs()
			cpu0 := cpuTime()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				id := client.Add(1)
				seq := uint64(0)
				for pb.Next() {
					seq++
					r := automaton.Request{ID: automaton.RequestID{Client: 1000 + id, Seq: seq},
						Op: service.Op{Kind: "set", Key: fmt.Sprintf("k%d", seq%10000), Args: [][]byte{val}}}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					resp, err := leader.Do(ctx, "default", r)
					cancel()
					if err != nil || resp.Result.IsErr() {
						b.Errorf("set: %v %v", err, resp.Result)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
		})
	}
}

// cpuTime is this process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
