package programs_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/gateway/grpcserver"
	"github.com/synod-dev/synod/node"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/orca/programs"
	_ "github.com/synod-dev/synod/protocol/all"
)

// liveCluster starts n nodes of rt's protocol over the orca service on
// loopback, in this process (synod-lab orca run --live starts processes), and
// returns their gRPC addresses.
func liveCluster(t *testing.T, rt programs.Runtime, n int) []string {
	t.Helper()
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	cfg := &config.Cluster{Cluster: "orca-live", Durability: config.Memory,
		Namespaces: []config.Namespace{{Name: "default", Protocol: rt.Protocol, Service: orca.ServiceName, Params: rt.Params()}}}
	var ls [][4]net.Listener
	for i := 0; i < n; i++ {
		l := [4]net.Listener{listen(), listen(), listen(), listen()}
		ls = append(ls, l)
		cfg.Nodes = append(cfg.Nodes, config.Node{ID: fmt.Sprintf("n%d", i+1), Peer: l[0].Addr().String(),
			Client: l[1].Addr().String(), Metrics: l[2].Addr().String(), GRPC: l[3].Addr().String()})
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for i, nc := range cfg.Nodes {
		opts := node.Options{PeerListener: ls[i][0], ClientListener: ls[i][1], MetricsListener: ls[i][2], GRPCListener: ls[i][3],
			GRPC: func(b gateway.Backend, pw string, log *slog.Logger) node.ClientServer {
				return grpcserver.New(b, grpcserver.Options{Password: pw, Logger: log})
			}}
		nd, err := node.New(cfg, nc.ID, opts)
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- nd.Run(context.Background()) }()
		select {
		case <-nd.Ready():
		case err := <-errc:
			t.Fatalf("node %s: %v", nc.ID, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("node %s not ready", nc.ID)
		}
		t.Cleanup(func() { nd.Close(); <-errc })
		addrs = append(addrs, nc.GRPC)
	}
	return addrs
}

// TSP's master and workers run as clients of a real loopback cluster under
// each runtime, and find the sequential solver's tour.
func TestTSPLiveMatchesSequential(t *testing.T) {
	inst := programs.NewTSP(8, 3)
	want, expanded := programs.SolveTSP(inst)
	cfg := programs.TSPConfig{NodeCost: 0, ReadEvery: 50}
	for _, rt := range programs.Runtimes {
		for _, n := range []int{1, 3} {
			res, err := programs.RunTSPLive(context.Background(), liveCluster(t, rt, n), inst, cfg)
			if err != nil {
				t.Fatalf("%s on %d nodes: %v", rt, n, err)
			}
			if res.Answer != want {
				t.Fatalf("%s on %d nodes: tour %d, sequential solver %d", rt, n, res.Answer, want)
			}
			// Every worker searched, and every job went through the queue.
			if res.Work <= 0 || res.Requests < len(inst.Jobs())+n {
				t.Fatalf("%s on %d nodes: work %d (sequential %d), %d requests", rt, n, res.Work, expanded, res.Requests)
			}
		}
	}
}

// ASP's workers run as clients of a real loopback cluster under each
// runtime, share every pivot row through it, and compute the sequential
// solver's matrix.
func TestASPLiveMatchesSequential(t *testing.T) {
	const size = 20
	g := programs.NewGraph(size, 5)
	want := programs.SolveASP(g)
	for _, rt := range programs.Runtimes {
		for _, n := range []int{1, 3} {
			res, got, err := programs.RunASPLive(context.Background(), liveCluster(t, rt, n), g, programs.ASPConfig{})
			if err != nil {
				t.Fatalf("%s on %d nodes: %v", rt, n, err)
			}
			if !got.Equal(want) {
				t.Fatalf("%s on %d nodes: the matrix differs from the sequential solver's", rt, n)
			}
			// Every cell updated once per iteration; one create, every
			// pivot row put once and taken by every worker.
			if res.Work != size*size*size || res.Writes != 1+size || res.Requests != 1+size+n*size {
				t.Fatalf("%s on %d nodes: %d cell updates, %d writes, %d requests", rt, n, res.Work, res.Writes, res.Requests)
			}
		}
	}
}
