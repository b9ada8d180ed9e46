package esds

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/service"
)

// BenchmarkOverload drives 3 replicas with more puts per gossip interval
// than batch-sized stream messages carry (perTick puts at every replica
// each interval, batch 32, every message delivered at the interval's end), and
// reports, per put: the operations rebuilds of the tentative state replay
// (replay/op) and the gossip entries merged (merged/op); and the largest
// rebuild (maxreplay: the event loop's longest blocking work, in
// operations) and the done, non-stable operations left at the end
// (unstable). window=false sends batch positions a message (the default);
// window=true sets the parameter widen (streamWindow).
//
//	go test ./protocol/esds -run '^$' -bench Overload -benchtime 1x
func BenchmarkOverload(b *testing.B) {
	for _, window := range []bool{false, true} {
		b.Run(fmt.Sprintf("window=%v", window), func(b *testing.B) {
			for range b.N {
				overloadRun(b, 60, 100, window)
			}
		})
	}
}

func overloadRun(b *testing.B, ticks, perTick int, widen bool) {
	c := &cluster{rng: rand.New(rand.NewSource(1))}
	c.Cluster = harness.New(b, harness.Options{Protocol: "esds", Nodes: 3, Service: service.KV{},
		Params: map[string]string{"batch": "32", "widen": fmt.Sprint(widen)}, NoInvariants: true,
		RandFor: func(automaton.NodeID, int) *rand.Rand { return rand.New(rand.NewSource(c.rng.Int63())) }})
	n := 0
	for range ticks {
		for _, id := range c.IDs() {
			for range perTick {
				c.Request(id, service.Op{Kind: "set", Key: fmt.Sprint("k", c.rng.Intn(1000)), Args: [][]byte{[]byte("v")}},
					opts(fmt.Sprint("p", n), false))
				n++
			}
		}
		for _, id := range c.IDs() {
			c.FireTimer(id, timerGossip)
		}
		c.DeliverAll()
	}
	var replayed, maxReplay, merged, unstable int
	for _, id := range c.IDs() {
		a := c.esds(id)
		replayed += a.replayed
		merged += a.merged
		maxReplay = max(maxReplay, a.maxReplay)
		unstable = max(unstable, len(a.dna)+len(a.dnaNew))
	}
	b.ReportMetric(float64(replayed)/float64(n), "replay/op")
	b.ReportMetric(float64(merged)/float64(n), "merged/op")
	b.ReportMetric(float64(maxReplay), "maxreplay")
	b.ReportMetric(float64(unstable), "unstable")
}

// BenchmarkStableRecord is the collection step's largest piece of work at
// a large state: encoding the stable-state record (marshalStable) of a
// replica whose stable state holds 10,000 16-byte keys with 100-byte
// values, 500 of them rewritten between two collections; kept=false
// forgets the kept key order and size before each (what every collection
// cost before issue 28's change).
//
//	go test ./protocol/esds -run '^$' -bench StableRecord
func BenchmarkStableRecord(b *testing.B) {
	for _, kept := range []bool{false, true} {
		b.Run(fmt.Sprintf("kept=%v", kept), func(b *testing.B) {
			c := harness.New(b, harness.Options{Protocol: "esds", Nodes: 3, Service: service.KV{}, NoInvariants: true})
			a := c.Node(c.IDs()[0]).(*ESDS)
			v := []byte(strings.Repeat("v", 100))
			for i := range 10000 {
				a.stable.Apply(service.Op{Kind: "set", Key: fmt.Sprintf("key:%012d", i), Args: [][]byte{v}})
			}
			b.ResetTimer()
			for n := range b.N {
				b.StopTimer()
				for i := range 500 {
					a.stable.Apply(service.Op{Kind: "set", Key: fmt.Sprintf("key:%012d", (n*500+i*7)%10000), Args: [][]byte{v}})
				}
				if !kept {
					a.stableOrder = service.KeyOrder{}
				}
				b.StartTimer()
				a.marshalStable(true)
			}
		})
	}
}

// BenchmarkGetsAmongPuts drives 3 replicas with 300 operations each per
// gossip interval over 10,000 keys, half gets and half plain SETs
// (mixed), or 30 intervals of SETs then 30 of gets (phases: the get cell
// of a benchmark after its put cell), and reports per operation the
// operations rebuilds of the tentative state replay (replay/op), the
// answers computed over their keys alone (keyed/op, apply.go keyValue),
// and the largest rebuild (maxreplay). keyed=false turns keyValue off.
//
//	go test ./protocol/esds -run '^$' -bench GetsAmongPuts -benchtime 1x
func BenchmarkGetsAmongPuts(b *testing.B) {
	defer func(v bool) { keyValues = v }(keyValues)
	for _, phases := range []bool{false, true} {
		for _, keyed := range []bool{false, true} {
			b.Run(fmt.Sprintf("phases=%v/keyed=%v", phases, keyed), func(b *testing.B) {
				keyValues = keyed
				for range b.N {
					getsAmongPuts(b, phases)
				}
			})
		}
	}
}

func getsAmongPuts(b *testing.B, phases bool) {
	c := &cluster{rng: rand.New(rand.NewSource(1))}
	c.Cluster = harness.New(b, harness.Options{Protocol: "esds", Nodes: 3, Service: service.KV{}, NoInvariants: true,
		RandFor: func(automaton.NodeID, int) *rand.Rand { return rand.New(rand.NewSource(c.rng.Int63())) }})
	n := 0
	for t := range 60 {
		for _, id := range c.IDs() {
			for range 300 {
				k := fmt.Sprint("k", c.rng.Intn(10000))
				o := service.Op{Kind: "set", Key: k, Args: [][]byte{[]byte("v")}}
				if get := c.rng.Intn(2) == 0; (phases && t >= 30) || (!phases && get) {
					o = service.Op{Kind: "get", Key: k}
				}
				c.Request(id, o, opts(fmt.Sprint("p", n), false))
				n++
			}
		}
		for _, id := range c.IDs() {
			c.FireTimer(id, timerGossip)
		}
		c.DeliverAll()
	}
	var replayed, maxReplay, keyed int
	for _, id := range c.IDs() {
		a := c.esds(id)
		replayed += a.replayed
		keyed += a.keyAnswers
		maxReplay = max(maxReplay, a.maxReplay)
	}
	b.ReportMetric(float64(replayed)/float64(n), "replay/op")
	b.ReportMetric(float64(keyed)/float64(n), "keyed/op")
	b.ReportMetric(float64(maxReplay), "maxreplay")
}
