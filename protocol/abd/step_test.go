package abd

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// stepCluster is three ABD automatons wired directly (no harness, no
// network): what one client operation costs the protocol code alone, the
// part of a node's CPU that protocol/abd owns (docs/COSTS.md, "Where the
// time goes, per target").
type stepCluster struct {
	ids   []automaton.NodeID
	nodes map[automaton.NodeID]automaton.Automaton
	queue []automaton.PeerMessage
	to    []automaton.NodeID
	resps int
	last  service.Result
	// scribble overwrites every delivered message's bytes after its step
	// (a runtime reusing its frame buffers); drop loses messages to a node.
	scribble bool
	drop     automaton.NodeID
	// batch hands each request over as a client batch of one (what a
	// node's direct pass steps), one its slice.
	batch bool
	one   [1]automaton.Request
}

// newStepCluster is three automatons whose phases ask every replica at
// once (thrifty=false, the default: the message counts these tests
// assert are the seed's); newThriftyCluster's query phases ask a
// majority first.
func newStepCluster(tb testing.TB) *stepCluster {
	return newStepClusterParams(tb, map[string]string{"thrifty": "false"})
}

func newThriftyCluster(tb testing.TB) *stepCluster {
	return newStepClusterParams(tb, map[string]string{"thrifty": "true"})
}

func newStepClusterParams(tb testing.TB, params map[string]string) *stepCluster {
	c := &stepCluster{ids: []automaton.NodeID{"n1", "n2", "n3"}, nodes: map[automaton.NodeID]automaton.Automaton{}}
	for i, id := range c.ids {
		a, err := protocol{Capabilities: capabilities("abd", "")}.New(automaton.Config{Self: id, Nodes: c.ids, Namespace: "default",
			Service: service.KV{}, Params: params, Rand: rand.New(rand.NewSource(int64(i)))})
		if err != nil {
			tb.Fatal(err)
		}
		c.nodes[id] = a
		c.route(id, a.Step(automaton.Start{}))
	}
	return c
}

// route queues a step's sends and counts its responses.
func (c *stepCluster) route(from automaton.NodeID, outs []automaton.Output) {
	for _, o := range outs {
		switch o := o.(type) {
		case automaton.Send:
			if o.To == c.drop {
				continue
			}
			msg := o.Msg
			if c.scribble {
				msg = append([]byte(nil), msg...) // its own buffer, overwritten after delivery
			}
			c.queue = append(c.queue, automaton.PeerMessage{From: from, Msg: msg})
			c.to = append(c.to, o.To)
		case automaton.Respond:
			c.resps++
			c.last = o.Resp.Result
		}
	}
}

// do runs one request at n1 to completion, delivering every message.
func (c *stepCluster) do(req automaton.Request) { c.doAt("n1", req) }

func (c *stepCluster) doAt(at automaton.NodeID, req automaton.Request) {
	if c.batch {
		c.one[0] = req
		c.route(at, c.nodes[at].Step(automaton.ClientBatch{Reqs: c.one[:]}))
		c.one[0] = automaton.Request{}
	} else {
		c.route(at, c.nodes[at].Step(automaton.ClientRequest{Req: req}))
	}
	for i := 0; i < len(c.queue); i++ {
		c.route(c.to[i], c.nodes[c.to[i]].Step(c.queue[i]))
		if c.scribble {
			for j := range c.queue[i].Msg {
				c.queue[i].Msg[j] = 0xAA
			}
		}
	}
	c.queue, c.to = c.queue[:0], c.to[:0]
}

// TestFramesAreNotRetained: OnMessage reads a frame in place (msg.go), so a
// replica's register and a read's highest value must be copies; the
// runtime may reuse the buffer after the step.
func TestFramesAreNotRetained(t *testing.T) {
	c := newStepCluster(t)
	c.scribble = true
	c.drop = "n3" // n3 misses the write: its own answer is not the highest
	c.doAt("n1", automaton.Request{ID: automaton.RequestID{Client: 1, Seq: 1}, Op: set("k", "v1")})
	c.drop = ""
	if !c.last.Equal(service.OK()) {
		t.Fatalf("set answered %v", c.last)
	}
	if e := abdOf(c, "n2").entry("k"); string(e.Value) != "v1" {
		t.Fatalf("n2 holds %q after a store whose frame was overwritten, want v1", e.Value)
	}
	// n3 reads: n1's and n2's replies carry the value (their frames are
	// overwritten after each step); n3 returns it and writes it back.
	c.doAt("n3", automaton.Request{ID: automaton.RequestID{Client: 1, Seq: 2}, Op: get("k")})
	if !c.last.Equal(service.Bytes([]byte("v1"))) {
		t.Fatalf("get at n3 answered %v, want v1", c.last)
	}
	for _, id := range c.ids {
		if e := abdOf(c, id).entry("k"); string(e.Value) != "v1" {
			t.Errorf("%s holds %q, want v1", id, e.Value)
		}
	}
}

// TestAllocationsPerOperation bounds what one put and one get allocate in
// the three automatons together (BenchmarkStep's workload): 77 and 36
// before frames were read in place (decoder on the stack) and a step's
// outputs were sized once, 50 and 21 after. A change that copies or grows
// again fails here. Each also as a client batch of one request, which
// must allocate no more than the request handed over alone.
func TestAllocationsPerOperation(t *testing.T) {
	c := newStepCluster(t)
	val := make([]byte, 100)
	seq := uint64(0)
	for i := 0; i < 100; i++ {
		seq++
		c.do(automaton.Request{ID: automaton.RequestID{Client: 1, Seq: seq}, Op: service.Op{Kind: "set", Key: fmt.Sprint("key:", i), Args: [][]byte{val}}})
	}
	lone := map[string]float64{}
	for _, tc := range []struct {
		kind  string
		max   float64
		batch bool
	}{{"set", 50, false}, {"get", 21, false}, {"set", 50, true}, {"get", 21, true}} {
		c.batch = tc.batch
		i := 0
		got := testing.AllocsPerRun(200, func() {
			seq++
			i++
			op := service.Op{Kind: tc.kind, Key: fmt.Sprint("key:", i%100)}
			if tc.kind == "set" {
				op.Args = [][]byte{val}
			}
			c.do(automaton.Request{ID: automaton.RequestID{Client: 2, Seq: seq}, Op: op})
		})
		t.Logf("%s (batch of one %v): %.1f allocations per operation (the test's fmt.Sprint and Args included)", tc.kind, tc.batch, got)
		// fmt.Sprint and the request's Args are the test's own: 1 or 2.
		if got > tc.max+2 {
			t.Errorf("%s (batch of one %v): %.1f allocations per operation, want at most %.0f", tc.kind, tc.batch, got, tc.max)
		}
		// A client batch of one (a node's direct pass) allocates what the
		// request alone does (one more before OnBatch took it as OnRequest).
		if !tc.batch {
			lone[tc.kind] = got
		} else if got > lone[tc.kind] {
			t.Errorf("%s: %.1f allocations per operation as a client batch of one, %.1f as a request", tc.kind, got, lone[tc.kind])
		}
	}
}

func abdOf(c *stepCluster, id automaton.NodeID) *ABD { return c.nodes[id].(*ABD) }

// BenchmarkStep is one client operation at a coordinator of three replicas,
// every message delivered: puts (query, then store), gets (query; a
// majority holds the tag, so no write-back) over 10,000 keys, 100-byte
// values. Allocations are the three automatons' together.
func BenchmarkStep(b *testing.B) {
	for _, kind := range []string{"set", "get"} {
		b.Run(kind, func(b *testing.B) {
			c := newStepCluster(b)
			keys, val := preloaded(c)
			seq := uint64(len(keys))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				seq++
				op := service.Op{Kind: kind, Key: keys[i%len(keys)]}
				if kind == "set" {
					op.Args = [][]byte{val}
				}
				c.do(automaton.Request{ID: automaton.RequestID{Client: 2, Seq: seq}, Op: op})
			}
			b.StopTimer()
			if want := len(keys) + b.N; c.resps != want {
				b.Fatalf("%d responses, want %d", c.resps, want)
			}
		})
	}
}

// preloaded writes c's 10,000 keys once each (100-byte values) and
// returns the keys and the value.
func preloaded(c *stepCluster) ([]string, []byte) {
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = fmt.Sprintf("key:%06d", i)
	}
	val := make([]byte, 100)
	for i, k := range keys {
		c.do(automaton.Request{ID: automaton.RequestID{Client: 1, Seq: uint64(i + 1)}, Op: service.Op{Kind: "set", Key: k, Args: [][]byte{val}}})
	}
	return keys, val
}

// sendsOf counts outs' sends per destination.
func sendsOf(outs []automaton.Output) map[automaton.NodeID]int {
	m := map[automaton.NodeID]int{}
	for _, o := range outs {
		if s, ok := o.(automaton.Send); ok {
			m[s.To]++
		}
	}
	return m
}

// Thrifty queries (thrifty=true): a query phase asks this replica and one
// peer (a majority of three), a round group's operations the same peer,
// consecutive groups the other peer in turn; store phases ask both. A
// peer that did not answer before a retransmission is asked last until
// something comes from it, so a replica down costs one retransmission,
// not one per round group that would ask it.
func TestThriftyQueries(t *testing.T) {
	c := newThriftyCluster(t)
	n1 := c.nodes["n1"]
	batch := func(seq uint64, kind string) []automaton.Request {
		var reqs []automaton.Request
		for i := range 4 {
			op := service.Op{Kind: kind, Key: fmt.Sprintf("k%d", i)}
			if kind == "set" {
				op.Args = [][]byte{[]byte("v")}
			}
			reqs = append(reqs, automaton.Request{ID: automaton.RequestID{Client: uint64(10 + i), Seq: seq}, Op: op})
		}
		return reqs
	}
	// Group 1 asks n3, group 2 n2 (ring order after n1, offset by group).
	g1 := n1.Step(automaton.ClientBatch{Reqs: batch(1, "set")})
	if s := sendsOf(g1); len(s) != 1 || s["n3"] != 1 {
		t.Fatalf("group 1's queries went to %v, want one batch to n3 alone", s)
	}
	c.route("n1", g1)
	g2 := n1.Step(automaton.ClientBatch{Reqs: batch(2, "get")})
	if s := sendsOf(g2); len(s) != 1 || s["n2"] != 1 {
		t.Fatalf("group 2's queries went to %v, want one batch to n2 alone", s)
	}
	c.route("n1", g2)
	// Delivered: the sets' stores go to both peers; every request is answered.
	stores := map[automaton.NodeID]int{}
	for i := 0; i < len(c.queue); i++ {
		outs := c.nodes[c.to[i]].Step(c.queue[i])
		if c.to[i] == "n1" {
			for to, k := range sendsOf(outs) {
				stores[to] += k
			}
		}
		c.route(c.to[i], outs)
	}
	c.queue, c.to = c.queue[:0], c.to[:0]
	if c.resps != 8 || stores["n2"] != 1 || stores["n3"] != 1 {
		t.Fatalf("%d answers, stores to %v; want 8 answers and one store batch to each peer", c.resps, stores)
	}
	// n3 goes silent: group 3 would ask it; its query is lost, the
	// retransmission asks both peers, and n2 answers. Groups 4 and 5 then
	// ask n2 alone, whatever their turn.
	c.drop = "n3"
	g3 := n1.Step(automaton.ClientBatch{Reqs: batch(3, "get")})
	if s := sendsOf(g3); len(s) != 1 || s["n3"] != 1 {
		t.Fatalf("group 3's queries went to %v, want n3", s)
	}
	c.route("n1", g3)
	c.queue, c.to = c.queue[:0], c.to[:0] // lost
	a1 := abdOf(c, "n1")
	for id := range a1.ops {
		outs := n1.Step(automaton.TimerFired{ID: automaton.TimerID(id)})
		if s := sendsOf(outs); s["n2"] != 1 || s["n3"] != 1 {
			t.Fatalf("retransmission went to %v, want both peers", s)
		}
		c.route("n1", outs)
	}
	for i := 0; i < len(c.queue); i++ {
		c.route(c.to[i], c.nodes[c.to[i]].Step(c.queue[i]))
	}
	c.queue, c.to = c.queue[:0], c.to[:0]
	if c.resps != 12 {
		t.Fatalf("%d answers after the retransmission, want 12", c.resps)
	}
	for g := uint64(4); g <= 5; g++ {
		outs := n1.Step(automaton.ClientBatch{Reqs: batch(g, "get")})
		if s := sendsOf(outs); len(s) != 1 || s["n2"] != 1 {
			t.Fatalf("group %d's queries went to %v with n3 silent, want n2 alone", g, s)
		}
		c.route("n1", outs)
		for i := 0; i < len(c.queue); i++ {
			c.route(c.to[i], c.nodes[c.to[i]].Step(c.queue[i]))
		}
		c.queue, c.to = c.queue[:0], c.to[:0]
	}
	// n3 speaks again (its answer to a store): it takes its turn again.
	c.drop = ""
	c.doAt("n1", automaton.Request{ID: automaton.RequestID{Client: 99, Seq: 1}, Op: set("k0", "w")}) // group 6: n2's turn, stores reach n3
	outs := n1.Step(automaton.ClientBatch{Reqs: batch(7, "get")})
	if s := sendsOf(outs); len(s) != 1 || s["n3"] != 1 {
		t.Fatalf("group 7's queries went to %v after n3 answered, want n3", s)
	}
}
