package node

import (
	"fmt"
	"testing"

	_ "github.com/synod-dev/synod/protocol/pbdurable"
)

// BenchmarkOneClient: one closed-loop RESP client's gets (and sets) at
// the primary of a 3-node cluster with fsync, for protocols that step
// client batches (pb, pbdurable) and others, with the process's counts per
// operation (cpu-us/op, handoffs/op, read and write syscalls, context
// switches), the loop's passes per operation (direct, inline) and its
// yields for requests (yieldForRequests), with loneYield (every lone
// request yields, before session 56) and without. In one process the
// nodes' goroutines keep the Ps busy, so the yield's wake of an idle P
// (docs/costs/s56-lat56.md) shows less than on a live cluster:
//
//	go test ./node -run '^$' -bench OneClient -benchtime 20000x
func BenchmarkOneClient(b *testing.B) {
	for _, proto := range []string{"pb", "pbdurable"} {
		for _, v := range []struct {
			op        string
			loneYield bool
		}{{"GET", true}, {"GET", false}, {"SET", true}, {"SET", false}} {
			op := v.op
			b.Run(fmt.Sprintf("%s/%s/loneYield=%v", proto, op, v.loneYield), func(b *testing.B) {
				nodes, at := primaryCluster(b, proto, Options{loneYield: v.loneYield})
				cl := dialReplyClient(b, at.ClientAddr().String())
				val := string(make([]byte, 100))
				for k := range 100 {
					cl.do(b, "SET", fmt.Sprintf("k%d", k), val)
				}
				b.ReportAllocs()
				p0 := takeProcCounts(nodes)
				l := at.loop("default")
				d0, i0, y0 := l.directs.Load(), l.inlines.Load(), l.yields.Load()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					var got string
					if op == "GET" {
						got = cl.do(b, "GET", fmt.Sprintf("k%d", i%100))
					} else {
						got = cl.do(b, "SET", fmt.Sprintf("k%d", i%100), val)
					}
					if len(got) > 0 && got[0] == '(' {
						b.Fatalf("%s: %s", op, got)
					}
				}
				b.StopTimer()
				n := float64(b.N)
				p0.report(b, nodes, n)
				b.ReportMetric(float64(l.directs.Load()-d0)/n, "directs/op")
				b.ReportMetric(float64(l.inlines.Load()-i0)/n, "inlines/op")
				b.ReportMetric(float64(l.yields.Load()-y0)/n, "yields/op")
			})
		}
	}
}
