package esds

import (
	"runtime"
	"slices"
	"testing"

	"github.com/synod-dev/synod/automaton"
)

// BenchmarkRewriteTicks: 3 replicas, 10,000 keys (100-byte values), 170
// SETs per node per 20 ms gossip tick (~25k puts/s over the cluster, as
// PutSteps's perTick=170,drain=5ms), run for 300 ticks; each timer step's
// thread CPU is put in one of two classes: the steps that rewrote the
// stable state (record "s": its snapshot and the deletes of the records
// "g" kept, gc.go collectDelta) and the others. It reports how often "s"
// is rewritten (puts per rewrite), the deletes per rewrite, and each
// class's p50/p99/max CPU: a rewrite's step is one in which nothing else
// is answered at that replica (issue 28: ESDS's put p99 at 64 clients).
// Since session 51 "s" is encoded a part a tick (rewrite.go): "rewrite"
// is then the step that encodes the last part and writes "s", "part" the
// timer steps that start a rewrite or encode one of its other parts.
//
//	go test ./protocol/esds -run '^$' -bench RewriteTicks -benchtime 1x
func BenchmarkRewriteTicks(b *testing.B) {
	for range b.N {
		c, put, n := setClusterP(b, map[string]string{"drain": "5ms"})
		runtime.LockOSThread()
		for k := range 10000 {
			put(c.IDs()[k%3], k)
		}
		for range 4 * gcEveryTicks {
			for _, id := range c.IDs() {
				c.FireTimer(id, timerGossip)
				c.FireTimer(id, timerDrain)
			}
			c.DeliverAll()
		}
		n0 := *n
		var sRec, dels int
		c.Observe(func(_ automaton.NodeID, o automaton.Output) {
			if p, ok := o.(automaton.Persist); ok {
				switch {
				case p.Key == recStable && !p.Delete:
					sRec++
				case p.Delete && len(p.Key) > len(recOp) && p.Key[:len(recOp)] == recOp:
					dels++
				}
			}
		})
		var rw, part, other []float64
		for range 300 {
			c.ResetTrace()
			for _, id := range c.IDs() {
				for range 170 {
					put(id, c.rng.Intn(10000))
				}
			}
			for _, id := range c.IDs() {
				for _, t := range []automaton.TimerID{timerDrain, timerGossip} {
					s0 := sRec
					paced := c.esds(id).rw != nil
					t0 := threadCPU()
					if c.FireTimer(id, t) {
						d := float64(threadCPU()-t0) / 1e6
						switch {
						case sRec > s0:
							rw = append(rw, d)
						case paced || c.esds(id).rw != nil:
							part = append(part, d)
						default:
							other = append(other, d)
						}
					}
				}
			}
			c.DeliverAll()
		}
		c.Observe(nil)
		runtime.UnlockOSThread()
		sets := float64(*n - n0)
		b.ReportMetric(float64(sRec), "rewrites")
		if sRec > 0 {
			b.ReportMetric(sets/float64(sRec), "puts/rewrite")
			b.ReportMetric(float64(dels)/float64(sRec), "deletes/rewrite")
		}
		q := func(xs []float64, name string) {
			if len(xs) == 0 {
				return
			}
			slices.Sort(xs)
			b.ReportMetric(xs[len(xs)/2], name+"-p50-ms")
			b.ReportMetric(xs[len(xs)*99/100], name+"-p99-ms")
			b.ReportMetric(xs[len(xs)-1], name+"-max-ms")
		}
		q(rw, "rewrite")
		q(part, "part")
		q(other, "tick")
	}
}
