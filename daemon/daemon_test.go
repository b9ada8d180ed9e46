package daemon

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/node"
	"github.com/synod-dev/synod/service"
)

// TestNodesWireTheGRPCPeerTransport: nodes made by New carry a namespace
// whose transport is grpc-stream without further options (the gRPC peer
// transport is linked here), and a write on one node is read on another.
func TestNodesWireTheGRPCPeerTransport(t *testing.T) {
	cfg := &config.Cluster{Cluster: "d", Durability: config.Memory,
		Namespaces: []config.Namespace{{Name: "default", Protocol: "paxos", Service: "kv", Transport: config.TransportGRPCStream}}}
	var lns [][2]net.Listener
	for i := range 3 {
		var pair [2]net.Listener
		for j := range pair {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			pair[j] = ln
		}
		lns = append(lns, pair)
		cfg.Nodes = append(cfg.Nodes, config.Node{ID: fmt.Sprintf("n%d", i+1), Peer: pair[0].Addr().String(), Client: pair[1].Addr().String()})
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	nodes := startNodes(t, cfg, func(i int) node.Options {
		return node.Options{PeerListener: lns[i][0], ClientListener: lns[i][1]}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	do := func(n *node.Node, seq uint64, kind string, args ...string) service.Result {
		op := service.Op{Kind: kind, Key: "k"}
		for _, a := range args {
			op.Args = append(op.Args, []byte(a))
		}
		r, err := n.Do(ctx, "default", automaton.Request{ID: automaton.RequestID{Client: 7, Seq: seq}, Op: op})
		if err != nil {
			t.Fatalf("%s %s: %v", n.ID(), kind, err)
		}
		return r.Result
	}
	if r := do(nodes[0], 1, "set", "v"); r.Type != service.ResultOK {
		t.Fatalf("set: %v", r)
	}
	if r := do(nodes[2], 2, "get"); !r.Equal(service.Bytes([]byte("v"))) {
		t.Fatalf("get on n3: %v", r)
	}
	if s := nodes[1].Info()["peers_grpc_stream"]; len(s) != 2 {
		t.Errorf("n2's gRPC stream peers: %v", s)
	}
}

// startNodes makes every node of cfg with New and opts(i), runs it until
// ready, and stops it when the test ends.
func startNodes(t *testing.T, cfg *config.Cluster, opts func(i int) node.Options) []*node.Node {
	t.Helper()
	var nodes []*node.Node
	for i, n := range cfg.Nodes {
		nd, err := New(cfg, n.ID, opts(i))
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- nd.Run(context.Background()) }()
		select {
		case <-nd.Ready():
		case err := <-errc:
			t.Fatalf("%s: %v", n.ID, err)
		}
		t.Cleanup(func() { nd.Close(); <-errc })
		nodes = append(nodes, nd)
	}
	return nodes
}
