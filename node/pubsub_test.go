package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/synod-dev/synod/config"
	_ "github.com/synod-dev/synod/protocol/paxos"
	_ "github.com/synod-dev/synod/protocol/pbpaxos"
)

// TestPubSubAcrossNodes: a message published through one node's gateway
// reaches subscribers at every node of a live cluster, through the peer
// transport (gateway/pubsub.go).
func TestPubSubAcrossNodes(t *testing.T) {
	cfg, ls := mkCluster(t, 3, config.Memory, nsABD)
	var nodes []*Node
	for i, nd := range cfg.Nodes {
		nodes = append(nodes, startNode(t, cfg, nd.ID, ls[i], Options{}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := func(n *Node) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: n.ClientAddr().String(), Protocol: 2})
		t.Cleanup(func() { c.Close() })
		return c
	}
	var subs []*redis.PubSub
	for _, n := range nodes[1:] {
		ps := client(n).Subscribe(ctx, "news")
		if _, err := ps.Receive(ctx); err != nil { // the confirmation
			t.Fatal(err)
		}
		subs = append(subs, ps)
	}
	pub := client(nodes[0])
	// The peer connections come up in their own time: until they have, a
	// message may be lost (at most once); publish until one arrives.
	for i, ps := range subs {
		got := false
		for try := 0; !got; try++ {
			if try == 100 {
				t.Fatalf("subscriber at %s never received a message", nodes[i+1].ID())
			}
			if n, err := pub.Publish(ctx, "news", "ping").Result(); err != nil || n != 0 {
				t.Fatalf("PUBLISH at a node without subscribers: %d, %v (want 0: it counts its own)", n, err)
			}
			m, err := ps.ReceiveTimeout(ctx, 200*time.Millisecond)
			got = err == nil
			if got {
				if msg, ok := m.(*redis.Message); !ok || msg.Channel != "news" || msg.Payload != "ping" {
					t.Fatalf("received %v", m)
				}
			}
		}
	}
	for _, ps := range subs { // drain the pings still on their way
		for {
			if _, err := ps.ReceiveTimeout(ctx, 300*time.Millisecond); err != nil {
				break
			}
		}
	}
	// Connected: every message reaches both, in the order published.
	for i := range 20 {
		if err := pub.Publish(ctx, "news", fmt.Sprint(i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for j, ps := range subs {
		for i := range 20 {
			m, err := ps.ReceiveTimeout(ctx, 5*time.Second)
			if err != nil {
				t.Fatalf("subscriber %d, message %d: %v", j, i, err)
			}
			if msg, ok := m.(*redis.Message); !ok || msg.Payload != fmt.Sprint(i) {
				t.Fatalf("subscriber %d, message %d: got %v", j, i, m)
			}
		}
	}
}

// TestExpiredEvents: a key removed by the leader's active expiry fires
// Redis's "expired" keyspace event once at every node's subscribers,
// whichever node leads and whichever node's client set the deadline
// (automaton.Announce, gateway/notify.go). Each node turns the event on
// for itself, as Redis's notify-keyspace-events is per process; the
// node where it stays off publishes nothing to its own subscriber.
func TestExpiredEvents(t *testing.T) {
	for _, proto := range []string{"paxos", "pbpaxos"} {
		t.Run(proto, func(t *testing.T) { testExpiredEvents(t, proto) })
	}
}

func testExpiredEvents(t *testing.T, proto string) {
	ns := config.Namespace{Name: "default", Protocol: proto, Service: "kv",
		Params: map[string]string{"heartbeat": "10ms", "election_timeout": "100ms", "expiry_period": "20ms"}}
	cfg, ls := mkCluster(t, 3, config.Memory, ns)
	var nodes []*Node
	for i, nd := range cfg.Nodes {
		nodes = append(nodes, startNode(t, cfg, nd.ID, ls[i], Options{}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var subs []*redis.PubSub
	var cs []*redis.Client
	for i, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.ClientAddr().String(), Protocol: 2})
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
		if i < 2 {
			if err := c.ConfigSet(ctx, "notify-keyspace-events", "Ex").Err(); err != nil {
				t.Fatal(err)
			}
		}
		ps := c.PSubscribe(ctx, "__keyevent@0__:*")
		t.Cleanup(func() { ps.Close() })
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		subs = append(subs, ps)
	}
	// The peer connections come up in their own time, and an announcement
	// sent before is lost (at most once): expire keys until both enabled
	// subscribers have seen one.
	warm := map[int]bool{}
	for try := 0; len(warm) < 2; try++ {
		if try == 100 {
			t.Fatalf("expired events reached only nodes %v", warm)
		}
		if err := cs[2].Set(ctx, fmt.Sprint("warm", try), "v", 10*time.Millisecond).Err(); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if m, err := subs[i].ReceiveTimeout(ctx, 300*time.Millisecond); err == nil {
				if msg, ok := m.(*redis.Message); !ok || msg.Channel != "__keyevent@0__:expired" {
					t.Fatalf("node %d received %v", i, m)
				}
				warm[i] = true
			}
		}
	}
	for i := range 2 { // drain the warm-up events still on their way
		for {
			if _, err := subs[i].ReceiveTimeout(ctx, 300*time.Millisecond); err != nil {
				break
			}
		}
	}
	// Connected: each key's event reaches each enabled node once.
	const keys = 10
	for k := range keys {
		if err := cs[k%3].Set(ctx, fmt.Sprint("k", k), "v", 50*time.Millisecond).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		seen := map[string]int{}
		for range keys {
			m, err := subs[i].ReceiveTimeout(ctx, 5*time.Second)
			if err != nil {
				t.Fatalf("node %d after %v: %v", i, seen, err)
			}
			msg, ok := m.(*redis.Message)
			if !ok || msg.Channel != "__keyevent@0__:expired" {
				t.Fatalf("node %d received %v", i, m)
			}
			seen[msg.Payload]++
		}
		for k := range keys {
			if n := seen[fmt.Sprint("k", k)]; n != 1 {
				t.Fatalf("node %d: %d events for k%d (%v)", i, n, k, seen)
			}
		}
		if m, err := subs[i].ReceiveTimeout(ctx, 300*time.Millisecond); err == nil {
			t.Fatalf("node %d: an event more: %v", i, m)
		}
	}
	if m, err := subs[2].ReceiveTimeout(ctx, 100*time.Millisecond); err == nil {
		t.Fatalf("node 2, whose events are off, received %v", m)
	}
}
