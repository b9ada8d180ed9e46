package esds

import (
	"fmt"
	"math/rand"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/automaton/cpuwork"
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

// BenchmarkCollectionTicks drives 3 replicas whose stable state holds
// 10,000 keys with 100-byte values (a 1.3 MB snapshot) with 300 plain
// SETs each per gossip interval for 120 intervals, and reports the
// longest gossip-tick step (maxtick-ms: a collection every gcEveryTicks
// ticks, the step that wrote the stable-state record) and the 99th
// percentile of tick steps (p99tick-ms), in CPU time of the thread that
// steps (a loaded machine makes wall time meaningless), and the bytes
// persisted per SET (B/set). delta=false rewrites record "s" at every
// collection (deltaMin out of reach: before issue 28's change); delta=true
// writes record "g" (gc.go collectDelta). The harness copies every record
// it stores, which both pay.
//
//	go test ./protocol/esds -run '^$' -bench CollectionTicks -benchtime 1x
func BenchmarkCollectionTicks(b *testing.B) {
	defer func(v int) { deltaMin = v }(deltaMin)
	for _, delta := range []bool{false, true} {
		b.Run(fmt.Sprintf("delta=%v", delta), func(b *testing.B) {
			deltaMin = 64 << 10
			if !delta {
				deltaMin = 1 << 62
			}
			for range b.N {
				collectionTicks(b)
			}
		})
	}
}

func collectionTicks(b *testing.B) {
	c, put, n := setCluster(b)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tick := func(measure []float64) []float64 {
		for _, id := range c.IDs() {
			t0 := threadCPU()
			c.FireTimer(id, timerGossip)
			if measure != nil {
				measure = append(measure, float64(threadCPU()-t0)/1e6)
			}
		}
		c.DeliverAll()
		return measure
	}
	for k := range 10000 {
		put(c.IDs()[k%3], k)
	}
	for range 4 * gcEveryTicks {
		tick(nil)
	}
	var bytes int
	c.Observe(func(_ automaton.NodeID, o automaton.Output) {
		if p, ok := o.(automaton.Persist); ok {
			bytes += len(p.Value)
		}
	})
	n0 := *n
	ticks := []float64{}
	for range 120 {
		for _, id := range c.IDs() {
			for range 300 {
				put(id, c.rng.Intn(10000))
			}
		}
		ticks = tick(ticks)
	}
	slices.Sort(ticks)
	b.ReportMetric(ticks[len(ticks)-1], "maxtick-ms")
	b.ReportMetric(ticks[len(ticks)*99/100], "p99tick-ms")
	b.ReportMetric(float64(bytes)/float64(*n-n0), "B/set")
}

// setCluster starts 3 replicas of a KV service and returns put, which
// submits a plain SET of a 100-byte value to key k at a replica, and the
// count of puts submitted.
func setCluster(b *testing.B) (*cluster, func(automaton.NodeID, int), *int) {
	return setClusterT(b)
}

func setClusterT(b testing.TB) (*cluster, func(automaton.NodeID, int), *int) {
	return setClusterP(b, nil)
}

// setClusterP is setClusterT with protocol parameters.
func setClusterP(b testing.TB, params map[string]string) (*cluster, func(automaton.NodeID, int), *int) {
	c := &cluster{rng: rand.New(rand.NewSource(1))}
	c.Cluster = harness.New(b, harness.Options{Protocol: "esds", Nodes: 3, Service: service.KV{}, NoInvariants: true, Params: params,
		RandFor: func(automaton.NodeID, int) *rand.Rand { return rand.New(rand.NewSource(c.rng.Int63())) }})
	v := []byte(strings.Repeat("v", 100))
	n := new(int)
	// Ids of AssignedOpID's form, as the edges give requests without an
	// op id: 21 clients per node, each numbering its requests, so the id
	// summary is a few ranges per client as it is live (ids of another
	// form are kept one by one, and every collection would encode them
	// all).
	seq := map[automaton.NodeID]int{}
	put := func(id automaton.NodeID, k int) {
		s := seq[id]
		seq[id]++
		r := automaton.RequestID{Client: uint64(len(id))<<40 | uint64(id[len(id)-1])<<8 | uint64(s%21), Seq: uint64(s/21 + 1)}
		c.Request(id, service.Op{Kind: "set", Key: fmt.Sprintf("key:%012d", k), Args: [][]byte{v}}, opts(AssignedOpID(r), false))
		*n++
	}
	return c, put, n
}

// threadCPU is the CPU time of the calling OS thread in nanoseconds
// (cpuwork.ThreadCPU; 0 where it cannot be read).
func threadCPU() int64 {
	t, _ := cpuwork.ThreadCPU()
	return int64(t)
}

// BenchmarkPutSteps drives 3 replicas whose stable state holds 10,000
// keys (100-byte values) with perTick plain SETs each per 20 ms interval
// (170: 25.5k puts/s over the cluster, session 41's quiet 64-client rate;
// 60: 9k puts/s, about where the streams' capacity of batch positions a
// tick is reached) for 100 intervals, every message delivered one at a time after the
// interval's tick, and reports in CPU time of the stepping thread (a
// loaded machine makes wall time meaningless): the CPU of every step per
// SET (cpu-us/set), and the longest and 99th-percentile tick step and
// message step (maxtick-ms, p99tick-ms, maxmsg-ms, p99msg-ms) and their
// medians (p50tick-ms, p50msg-ms): the steps a request arriving meanwhile
// waits behind; and the bytes of peer messages sent (msgB/set) and the
// gossip entries delivered (entries/set) per SET. Ids are of AssignedOpID's form (setCluster) and the
// harness's trace is emptied at every interval, so that neither an id
// summary of every id nor the trace's reallocations are measured as the
// protocol's (session 42's figures had both).
//
// The streams' cadence (session 44): every interval is 4 slots of 5 ms,
// a quarter of the SETs before each; a gossip tick fires at every node
// each 4/ticks slots (ticks=k: gossip=20ms/k) and a drain timer
// (parameter drain=5ms: stream.go onDrain) set in one slot fires in the
// next, both counted as tick steps; batch=n sets the positions per
// message. Beside the step figures it reports the positions left unsent
// per stream at the end (queued: the backlog a saturated stream grows),
// then ticks without SETs until every stream is empty and reports that
// drain's CPU per SET (drain-us/set) and the whole, run and drain, per
// SET (total-us/set): the work a saturated stream defers past the run,
// which cpu-us/set alone does not count; allocs/set is the heap
// allocations per SET (harness included). p99burst-ms and p50burst-ms are
// a node's step CPU within one 5 ms slot (timer steps and the messages
// delivered to it), over every node and slot: the bursts a request
// arriving in the slot waits behind, whatever their division into steps.
//
//	go test ./protocol/esds -run '^$' -bench PutSteps -benchtime 1x
func BenchmarkPutSteps(b *testing.B) {
	type pcase struct {
		perTick, ticks, batch int
		drain                 string
		name                  string
	}
	cases := []pcase{
		{60, 1, DefaultBatch, "off", "perTick=60,drain=off"},
		{60, 1, DefaultBatch, "5ms", "perTick=60,drain=5ms"},
		{170, 1, DefaultBatch, "off", "perTick=170,drain=off"},
		{170, 1, DefaultBatch, "5ms", "perTick=170,drain=5ms"},
		{170, 4, 128, "off", "perTick=170,ticks=4,batch=128,drain=off"},
		{170, 4, 512, "off", "perTick=170,ticks=4,batch=512,drain=off"},
		{170, 1, 2048, "off", "perTick=170,batch=2048,drain=off"},
		{170, 2, DefaultBatch, "5ms", "perTick=170,ticks=2,drain=5ms"},
		{170, 4, DefaultBatch, "5ms", "perTick=170,ticks=4,drain=5ms"},
	}
	// The same loads with stability=positions (the gossip before session
	// 45: a stream position per operation that becomes stable here).
	for _, c := range cases[:4] {
		cases = append(cases, pcase{c.perTick, c.ticks, c.batch, c.drain, c.name + ",stability=positions"})
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			stability := "prefix"
			if strings.HasSuffix(c.name, ",stability=positions") {
				stability = "positions"
			}
			for range b.N {
				putSteps(b, c.perTick, c.ticks, c.batch, c.drain, stability)
			}
		})
	}
}

func putSteps(b *testing.B, perTick, ticksPer, batch int, drain, stability string) {
	c, put, n := setClusterP(b, map[string]string{
		"batch": fmt.Sprint(batch), "gossip": (DefaultGossip / time.Duration(ticksPer)).String(), "drain": drain,
		"stability": stability})
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for k := range 10000 {
		put(c.IDs()[k%3], k)
	}
	for range 4 * gcEveryTicks * ticksPer {
		for _, id := range c.IDs() {
			c.FireTimer(id, timerGossip)
			c.FireTimer(id, timerDrain)
		}
		c.DeliverAll()
	}
	n0 := *n
	var ticks, msgs []float64
	var sent, entries, persists, peerMsgs, gone, solidE int
	c.Observe(func(_ automaton.NodeID, o automaton.Output) {
		switch s := o.(type) {
		case automaton.Send:
			sent += len(s.Msg)
			peerMsgs++
		case automaton.Persist:
			persists++
		}
	})
	// busy: each node's step CPU in the current slot (a burst a SET
	// arriving in the slot may wait behind); bursts: every node's, every
	// slot.
	busy := map[automaton.NodeID]float64{}
	var bursts []float64
	var countAllocs uint64 // the counting decode's below (not the protocol's)
	deliver := func() {
		for {
			m, ok := c.Pop()
			if !ok {
				break
			}
			a0 := heapObjects()
			x, err := unmarshal(m.Msg)
			countAllocs += heapObjects() - a0
			if err == nil {
				entries += len(x.Entries)
				for i := range x.Entries {
					switch f := x.Entries[i].Flags; {
					case f == flagGone:
						gone++
					case f&flagSolid != 0:
						solidE++
					}
				}
			}
			s := threadCPU()
			c.DeliverMessage(m)
			d := float64(threadCPU()-s) / 1e6
			msgs = append(msgs, d)
			busy[m.To] += d
		}
	}
	const slots = 4
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m0 := ms.Mallocs
	t0 := threadCPU()
	for range 100 {
		// The harness keeps a trace of every input and output: grown
		// over the run, its reallocations (tens of ms) land in
		// whichever step crosses a capacity and were the longest
		// "message steps" this benchmark reported.
		c.ResetTrace()
		for t := range slots {
			for _, id := range c.IDs() {
				for range perTick*(t+1)/slots - perTick*t/slots {
					put(id, c.rng.Intn(10000))
				}
			}
			var due []automaton.NodeID
			for _, id := range c.IDs() {
				if _, ok := c.TimerAfter(id, timerDrain); ok {
					due = append(due, id)
				}
			}
			fire := func(id automaton.NodeID, tid automaton.TimerID) {
				s := threadCPU()
				if c.FireTimer(id, tid) {
					d := float64(threadCPU()-s) / 1e6
					ticks = append(ticks, d)
					busy[id] += d
				}
			}
			for _, id := range due {
				fire(id, timerDrain)
			}
			if t%(slots/ticksPer) == 0 {
				for _, id := range c.IDs() {
					fire(id, timerGossip)
				}
			}
			deliver()
			for _, id := range c.IDs() {
				bursts = append(bursts, busy[id])
				busy[id] = 0
			}
		}
	}
	total := threadCPU() - t0
	runtime.ReadMemStats(&ms)
	mallocs := ms.Mallocs - m0
	sets := float64(*n - n0)
	c.Observe(nil)
	unsent := func() (q uint64) {
		for _, id := range c.IDs() {
			a := c.esds(id)
			for j := range a.peers {
				if p := &a.peers[j]; j != a.self {
					q += p.acked + uint64(len(p.queue)) - p.sentUpTo
				}
			}
		}
		return q
	}
	// allocs/set: heap allocations of the run per SET, the harness's
	// (its trace, the records it keeps, the requests' options) included.
	b.ReportMetric(float64(mallocs)/sets, "allocs/set")
	// count-allocs/set: of those, the benchmark's own decode of every
	// message to count its entries (session 48: allocs/set less this is
	// the protocol's and the harness's).
	b.ReportMetric(float64(countAllocs)/sets, "count-allocs/set")
	b.ReportMetric(float64(unsent())/6, "queued")
	b.ReportMetric(float64(sent)/sets, "msgB/set")
	b.ReportMetric(float64(entries)/sets, "entries/set")
	b.ReportMetric(float64(persists)/sets, "records/set")
	// Of the entries: "gone" (collected at the sender) and those saying
	// stable at the sender (flagSolid); the rest say done or relayed.
	b.ReportMetric(float64(gone)/sets, "gone/set")
	b.ReportMetric(float64(solidE)/sets, "solidE/set")
	b.ReportMetric(sets/float64(max(peerMsgs, 1)), "sets/msg")
	// unstable: operations done here and not yet stable here at the end of
	// the run, per replica (stability's lag behind the load, in operations;
	// 170 SETs per replica a 20 ms tick is 510 a tick over the cluster).
	notStable := 0
	for _, id := range c.IDs() {
		a := c.esds(id)
		for _, o := range a.ops {
			if o.label.Set && o.solid&a.bit() == 0 {
				notStable++
			}
		}
	}
	b.ReportMetric(float64(notStable)/3, "unstable")
	slices.Sort(ticks)
	slices.Sort(msgs)
	b.ReportMetric(float64(total)/1e3/sets, "cpu-us/set")
	b.ReportMetric(ticks[len(ticks)-1], "maxtick-ms")
	b.ReportMetric(ticks[len(ticks)*99/100], "p99tick-ms")
	b.ReportMetric(msgs[len(msgs)-1], "maxmsg-ms")
	b.ReportMetric(msgs[len(msgs)*99/100], "p99msg-ms")
	b.ReportMetric(ticks[len(ticks)/2], "p50tick-ms")
	b.ReportMetric(msgs[len(msgs)/2], "p50msg-ms")
	slices.Sort(bursts)
	b.ReportMetric(bursts[len(bursts)*99/100], "p99burst-ms")
	b.ReportMetric(bursts[len(bursts)/2], "p50burst-ms")
	// The drain: what the run left queued, sent and merged with no SETs.
	t1 := threadCPU()
	for k := 0; k < 100000 && unsent() > 0; k++ {
		c.ResetTrace()
		for _, id := range c.IDs() {
			c.FireTimer(id, timerGossip)
			c.FireTimer(id, timerDrain)
		}
		deliver()
	}
	dr := threadCPU() - t1
	b.ReportMetric(float64(dr)/1e3/sets, "drain-us/set")
	b.ReportMetric(float64(total+dr)/1e3/sets, "total-us/set")
}

// heapObjects is the process's heap allocations so far (runtime/metrics,
// tiny allocations included, as runtime.MemStats.Mallocs; no
// stop-the-world).
func heapObjects() uint64 {
	ms := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/tiny/allocs:objects"}}
	metrics.Read(ms)
	return ms[0].Value.Uint64() + ms[1].Value.Uint64()
}
