package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/synod-dev/synod/config"
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
