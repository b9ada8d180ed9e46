package cli

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/synod-dev/synod/bench"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/gateway/grpcserver"
)

// withPeerTarget registers a bench target named name for the test, as the
// workbench registers etcd and zookeeper.
func withPeerTarget(t *testing.T, name string) {
	BenchTargets[name] = func(*bench.Config) bench.TargetFactory {
		return func(context.Context, string, int) (bench.Target, error) { return nil, nil }
	}
	t.Cleanup(func() { delete(BenchTargets, name) })
}

func TestApplyBenchTarget(t *testing.T) {
	withPeerTarget(t, "testpeer")
	for _, name := range []string{"", "resp"} {
		cfg := bench.DefaultConfig()
		cfg.Namespace = "kv"
		if err := applyBenchTarget(name, &cfg); err != nil || cfg.NewTarget != nil || cfg.TargetName != "" {
			t.Fatalf("%q: err %v, target %q", name, err, cfg.TargetName)
		}
	}
	for _, name := range []string{"testpeer"} {
		cfg := bench.DefaultConfig()
		if err := applyBenchTarget(name, &cfg); err != nil || cfg.NewTarget == nil || cfg.TargetName != name {
			t.Fatalf("%q: err %v, target %q", name, err, cfg.TargetName)
		}
		cfg = bench.DefaultConfig()
		cfg.ReadMode = "regular"
		if err := applyBenchTarget(name, &cfg); err == nil || !strings.Contains(err.Error(), "--read-mode") {
			t.Fatalf("%q with a read mode: %v", name, err)
		}
	}
	cfg := bench.DefaultConfig()
	if err := applyBenchTarget("consul", &cfg); err == nil || !strings.Contains(err.Error(), "etcd") {
		t.Fatalf("unknown target: %v", err)
	}
	// The server binary does not link etcd's or ZooKeeper's client: it
	// names the binary that does.
	for _, name := range []string{"etcd", "zookeeper"} {
		if err := applyBenchTarget(name, &cfg); err == nil || !strings.Contains(err.Error(), "synod-lab") {
			t.Fatalf("%s in the server binary: %v", name, err)
		}
	}
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// TestApplyBenchConns: --conns and --pipeline decide how many connections
// the clients of a run open (8 clients against a gateway on an in-memory
// backend), and the refused combinations say why.
func TestApplyBenchConns(t *testing.T) {
	for _, c := range []struct {
		conns    string
		pipeline int
		want     int64
	}{
		{"per-client", 0, 8},
		{"", 4, 2},
		{"pipeline:8", 0, 1},
		{"3", 0, 3},
	} {
		srv := gateway.NewServer(gatewaytest.KV(), gateway.ServerOptions{})
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cl := &countingListener{Listener: l}
		go srv.Serve(cl)
		cfg := bench.DefaultConfig()
		cfg.Addrs, cfg.Clients, cfg.Keys, cfg.Ops, cfg.Duration = []string{l.Addr().String()}, 8, 10, 400, 0
		err = applyBenchConns(c.conns, c.pipeline, c.conns != "", c.pipeline != 0, &cfg)
		if err != nil {
			t.Fatalf("%q/%d: %v", c.conns, c.pipeline, err)
		}
		rep, err := bench.Run(context.Background(), cfg, nil)
		srv.Close()
		if err != nil {
			t.Fatalf("%q/%d: %v", c.conns, c.pipeline, err)
		}
		if got := cl.n.Load(); got != c.want {
			t.Errorf("%q/%d: %d connections, want %d (target %q)", c.conns, c.pipeline, got, c.want, cfg.TargetName)
		}
		if rep.All.Errors != 0 {
			t.Errorf("%q/%d: %d errors", c.conns, c.pipeline, rep.All.Errors)
		}
	}
	cfg := bench.DefaultConfig()
	for _, c := range []struct {
		conns            string
		pipeline         int
		connsSet, pipSet bool
		want             string
	}{
		{"2", 4, true, true, "not both"},
		{"pipeline:0", 0, true, false, "positive"},
		{"many", 0, true, false, "per-client"},
		{"", -1, false, true, "at least 1"},
	} {
		if err := applyBenchConns(c.conns, c.pipeline, c.connsSet, c.pipSet, &cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q/%d: %v, want an error saying %q", c.conns, c.pipeline, err, c.want)
		}
	}
	// Client-driven ABD clients may be shared: their phases share the
	// replicas' streams.
	cfg = bench.DefaultConfig()
	cfg.UseABDClient(false)
	if err := applyBenchConns("pipeline:4", 0, true, false, &cfg); err != nil || !strings.HasPrefix(cfg.TargetName, bench.TargetABDClient+" (") {
		t.Errorf("--abd-client --conns pipeline:4: %v, target %q", err, cfg.TargetName)
	}
	withPeerTarget(t, "testpeer")
	cfg = bench.DefaultConfig()
	if err := applyBenchTarget("testpeer", &cfg); err != nil {
		t.Fatal(err)
	}
	if err := applyBenchConns("pipeline:4", 0, true, false, &cfg); err == nil || !strings.Contains(err.Error(), "does not pipeline") {
		t.Errorf("a peer target pipelined: %v", err)
	}
}

// TestBenchGRPCTarget: --target grpc drives the gRPC API through the Go
// client: one client (one connection) per bench client by default, one per
// P clients with --pipeline P, whose requests then travel on Pipeline
// streams: over Multi-Paxos (atomic groups) the protocol sees them under
// the streams' message lanes (at least one per stream, at most one per
// bench client), where Do calls carry one identity per client.
func TestBenchGRPCTarget(t *testing.T) {
	for _, c := range []struct {
		pipeline   int
		conns, ids int
	}{{0, 8, 8}, {4, 2, 2}} {
		b := gatewaytest.MustAutomaton(t, "paxos", "kv")
		srv := grpcserver.New(b, grpcserver.Options{})
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cl := &countingListener{Listener: l}
		go srv.Serve(cl)
		cfg := bench.DefaultConfig()
		cfg.Addrs, cfg.Clients, cfg.Keys, cfg.Ops, cfg.Duration = []string{l.Addr().String()}, 8, 10, 400, 0
		if err := applyBenchTarget("grpc", &cfg); err != nil {
			t.Fatal(err)
		}
		if err := applyBenchConns("", c.pipeline, false, c.pipeline != 0, &cfg); err != nil {
			t.Fatal(err)
		}
		rep, err := bench.Run(context.Background(), cfg, nil)
		srv.Close()
		if err != nil {
			t.Fatalf("pipeline %d: %v", c.pipeline, err)
		}
		if got := cl.n.Load(); got != int64(c.conns) {
			t.Errorf("pipeline %d: %d connections, want %d (target %q)", c.pipeline, got, c.conns, cfg.TargetName)
		}
		if rep.All.Errors != 0 || rep.All.Count < 400 {
			t.Errorf("pipeline %d: %d operations, %d errors", c.pipeline, rep.All.Count, rep.All.Errors)
		}
		ids := map[uint64]bool{}
		for _, r := range b.Log() {
			ids[r.ID.Client] = true
		}
		// Do calls carry one identity per bench client. A pipelined
		// message on a namespace with atomic groups carries its own lane
		// (client id, seq), reused once its calls are answered (client
		// package doc, "Named groups"), so a stream uses at least one lane
		// and never more than the bench clients it serves have in flight.
		if c.pipeline == 0 && len(ids) != c.ids || c.pipeline != 0 && (len(ids) < c.ids || len(ids) > cfg.Clients) {
			t.Errorf("pipeline %d: requests under %d client ids, want %d (pipelined: %d to %d)", c.pipeline, len(ids), c.ids, c.ids, cfg.Clients)
		}
	}
	cfg := bench.DefaultConfig()
	cfg.Leader = true
	if err := applyBenchTarget("grpc", &cfg); err == nil || !strings.Contains(err.Error(), "--leader") {
		t.Errorf("grpc with --leader: %v", err)
	}
}
