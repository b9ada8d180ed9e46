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
}

func newStepCluster(tb testing.TB) *stepCluster {
	c := &stepCluster{ids: []automaton.NodeID{"n1", "n2", "n3"}, nodes: map[automaton.NodeID]automaton.Automaton{}}
	for i, id := range c.ids {
		a, err := protocol{Capabilities: capabilities("abd", "")}.New(automaton.Config{Self: id, Nodes: c.ids, Namespace: "default",
			Service: service.KV{}, Rand: rand.New(rand.NewSource(int64(i)))})
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
	c.route(at, c.nodes[at].Step(automaton.ClientRequest{Req: req}))
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
// again fails here.
func TestAllocationsPerOperation(t *testing.T) {
	c := newStepCluster(t)
	val := make([]byte, 100)
	seq := uint64(0)
	for i := 0; i < 100; i++ {
		seq++
		c.do(automaton.Request{ID: automaton.RequestID{Client: 1, Seq: seq}, Op: service.Op{Kind: "set", Key: fmt.Sprint("key:", i), Args: [][]byte{val}}})
	}
	for _, tc := range []struct {
		kind string
		max  float64
	}{{"set", 50}, {"get", 21}} {
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
		t.Logf("%s: %.1f allocations per operation (the test's fmt.Sprint and Args included)", tc.kind, got)
		// fmt.Sprint and the request's Args are the test's own: 1 or 2.
		if got > tc.max+2 {
			t.Errorf("%s: %.1f allocations per operation, want at most %.0f", tc.kind, got, tc.max)
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
			keys := make([]string, 10000)
			for i := range keys {
				keys[i] = fmt.Sprintf("key:%06d", i)
			}
			val := make([]byte, 100)
			for i, k := range keys { // every key written once
				c.do(automaton.Request{ID: automaton.RequestID{Client: 1, Seq: uint64(i + 1)}, Op: service.Op{Kind: "set", Key: k, Args: [][]byte{val}}})
			}
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
