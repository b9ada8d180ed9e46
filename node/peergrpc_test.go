package node

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/config"
	_ "github.com/synod-dev/synod/protocol/paxos"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/transport/grpcpeer"
)

// grpcPeers is what package daemon supplies as Options.PeerGRPC.
func grpcPeers(o PeerGRPCOptions) (PeerGRPC, error) {
	return grpcpeer.New(grpcpeer.Options{Cluster: o.Cluster, Self: o.Self, Listener: o.Listener,
		Addr: o.Addr, Peers: o.Peers, Handler: o.Handler, Logger: o.Logger, Stream: o.Stream})
}

// TestPaxosOverGRPCTransports: Multi-Paxos namespaces whose messages travel
// by gRPC unary calls and by a gRPC server-streamed push serve writes and
// reads end to end on three real nodes, beside an ABD namespace on the TCP
// transport; all three share each node's peer port. The gRPC counters show
// the messages went by gRPC, and INFO names each namespace's transport.
func TestPaxosOverGRPCTransports(t *testing.T) {
	nsUnary := config.Namespace{Name: "pu", Protocol: "paxos", Service: "kv", Transport: config.TransportGRPCUnary}
	nsStream := config.Namespace{Name: "ps", Protocol: "paxos", Service: "kv", Transport: config.TransportGRPCStream}
	cfg, ls := mkCluster(t, 3, config.Memory, nsABD, nsUnary, nsStream)
	var nodes []*Node
	for i, l := range ls {
		nodes = append(nodes, startNode(t, cfg, cfg.Nodes[i].ID, l, Options{PeerGRPC: grpcPeers}))
	}
	for _, ns := range []string{"pu", "ps", "default"} {
		for i, n := range nodes {
			key := ns + string(n.ID())
			if r := do(t, n, ns, req("set", key, "v"+ns)); r.Type != service.ResultOK {
				t.Fatalf("%s: set on %s: %v", ns, n.ID(), r)
			}
			other := nodes[(i+1)%len(nodes)]
			if r := do(t, other, ns, req("get", key)); !r.Equal(service.Bytes([]byte("v" + ns))) {
				t.Fatalf("%s: get %s on %s: %v", ns, key, other.ID(), r)
			}
		}
	}
	var unarySent, streamSent, streamRecv uint64
	for _, n := range nodes {
		u, s := n.gp.Stats()
		for _, st := range u {
			unarySent += st.Sent
		}
		for _, st := range s {
			streamSent += st.Sent
			streamRecv += st.Received
		}
		c, _ := n.Counters("pu")
		if c.MessagesOut == 0 && c.MessagesIn == 0 {
			t.Errorf("%s: no paxos messages in pu: %+v", n.ID(), c)
		}
	}
	if unarySent == 0 || streamSent == 0 || streamRecv == 0 {
		t.Errorf("gRPC peer traffic: unary sent %d, stream sent %d received %d", unarySent, streamSent, streamRecv)
	}
	info := nodes[0].Info()
	if s := info["namespaces"]["pu"]; !strings.Contains(s, ",transport=grpc-unary") {
		t.Errorf("INFO pu: %q", s)
	}
	if s := info["namespaces"]["ps"]; !strings.Contains(s, ",transport=grpc-stream") {
		t.Errorf("INFO ps: %q", s)
	}
	if s := info["namespaces"]["default"]; strings.Contains(s, "transport=") {
		t.Errorf("INFO default (tcp) names a transport: %q", s)
	}
	if s := info["peers_grpc_stream"]["n2"]; !strings.HasPrefix(s, "connected=1") {
		t.Errorf("INFO peers_grpc_stream n2: %q (sections %v)", s, info)
	}
}

// TestGRPCTransportNeedsPeerGRPC: a namespace on a gRPC transport in a
// program that links none fails at Run with a clear error.
func TestGRPCTransportNeedsPeerGRPC(t *testing.T) {
	ns := config.Namespace{Name: "pu", Protocol: "paxos", Service: "kv", Transport: config.TransportGRPCUnary}
	cfg, ls := mkCluster(t, 1, config.Memory, ns)
	n, err := New(cfg, "n1", Options{PeerListener: ls[0].peer, ClientListener: ls[0].client, MetricsListener: ls[0].metrics})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "node.Options.PeerGRPC") {
		t.Fatalf("Run: %v", err)
	}
}
