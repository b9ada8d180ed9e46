package node

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/gateway/grpcserver"
)

// blackhole is a TCP proxy that can stop forwarding without closing
// anything: what a client sees of a machine that lost power (no RST, no
// FIN), the case the seed's notifications exist for ("it may take a while
// for the TCP socket to time out", III.B).
type blackhole struct {
	ln      net.Listener
	frozen  atomic.Bool
	dropped atomic.Int64 // bytes from clients swallowed while frozen
	mu      sync.Mutex
	conns   []net.Conn
}

func newBlackhole(t *testing.T, target string) *blackhole {
	b := &blackhole{ln: listen(t)}
	go func() {
		for {
			c, err := b.ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			b.mu.Lock()
			b.conns = append(b.conns, c, s)
			b.mu.Unlock()
			go b.pipe(s, c, true)
			go b.pipe(c, s, false)
		}
	}()
	t.Cleanup(func() {
		b.ln.Close()
		b.mu.Lock()
		for _, c := range b.conns {
			c.Close()
		}
		b.mu.Unlock()
	})
	return b
}

func (b *blackhole) pipe(dst, src net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if b.frozen.Load() {
				if fromClient {
					b.dropped.Add(int64(n))
				}
			} else if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// The fail-over stub end to end on a real paxos cluster (the Grid Services thesis, Fig.
// III.1): the leader's machine vanishes with a request outstanding at it
// (no TCP error reaches the client, and the client's attempt timeout is
// longer than the test); the survivors elect a leader and notify the
// client over WatchLeader, and the client resubmits the request, same id,
// to the new leader, where it completes, once.
func TestFailoverStubOnPaxos(t *testing.T) {
	nsPaxos := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv",
		Params: map[string]string{"heartbeat": "10ms", "election_timeout": "100ms"}}
	cfg, ls := mkCluster(t, 3, config.Memory, nsPaxos)
	var gls []net.Listener
	for i := range cfg.Nodes {
		gl := listen(t)
		gls = append(gls, gl)
		cfg.Nodes[i].GRPC = gl.Addr().String()
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var nodes []*Node
	for i, n := range cfg.Nodes {
		nodes = append(nodes, startNode(t, cfg, n.ID, ls[i], Options{GRPCListener: gls[i],
			GRPC: func(b gateway.Backend, pw string, log *slog.Logger) ClientServer {
				return grpcserver.New(b, grpcserver.Options{Password: pw, Logger: log, RequestTimeout: time.Hour})
			}}))
	}
	if r := do(t, nodes[0], "default", req("set", "k", "v")); r.IsErr() {
		t.Fatalf("set: %v", r)
	}
	var leader automaton.NodeID
	eventually(t, "every node names one leader", func() bool {
		ids := map[automaton.NodeID]bool{}
		for _, n := range nodes {
			id, _, _ := n.Leader("default")
			ids[id] = true
			leader = id
		}
		return len(ids) == 1 && leader != ""
	})
	// Node.WatchLeader names it with its gRPC address.
	h, _, err := nodes[0].WatchLeader("default")
	if err != nil || h.ID != leader || h.From != nodes[0].ID() {
		t.Fatalf("WatchLeader: %+v %v", h, err)
	}
	li := -1
	var addrs []string
	var bh *blackhole
	for i, n := range cfg.Nodes {
		if automaton.NodeID(n.ID) == leader {
			if h.GRPC != n.GRPC {
				t.Fatalf("leader's gRPC address %q, want %q", h.GRPC, n.GRPC)
			}
			li, bh = i, newBlackhole(t, n.GRPC)
			addrs = append(addrs, bh.ln.Addr().String())
			continue
		}
		addrs = append(addrs, n.GRPC)
	}

	changes := make(chan client.LeaderChange, 16)
	c, err := client.NewGRPC(addrs, client.Options{Timeout: time.Hour,
		OnLeaderChange: func(lc client.LeaderChange) { changes <- lc }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Set(ctx, "warm", []byte("up")); err != nil {
		t.Fatal(err)
	}
	if lc := <-changes; lc.Leader != string(leader) {
		t.Fatalf("first notification %+v, want %s", lc, leader)
	}
	// The client learns which address is the leader from the leader's own
	// stream (its address here is the proxy's, which no event names).
	eventually(t, "the client knows the leader's address", func() bool {
		id, addr, err := c.Leader(ctx, "")
		return err == nil && id == string(leader) && addr == addrs[li]
	})

	bh.frozen.Store(true) // the leader's machine vanishes, for the client
	type out struct {
		n   int64
		err error
		at  time.Time
	}
	done := make(chan out, 1)
	go func() { n, err := c.Incr(ctx, "x"); done <- out{n, err, time.Now()} }()
	eventually(t, "the incr reached the vanished leader", func() bool { return bh.dropped.Load() > 0 })
	killed := time.Now()
	go nodes[li].Close() // and for its peers (Close waits for the frozen gRPC stream)
	var lc client.LeaderChange
	select {
	case lc = <-changes:
	case <-ctx.Done():
		t.Fatal("no fail-over notification")
	}
	o := <-done
	acked := o.at
	if o.err != nil || o.n != 1 {
		t.Fatalf("incr across the fail-over: %d %v", o.n, o.err)
	}
	if lc.Previous != string(leader) || lc.Leader == string(leader) || lc.Leader == "" {
		t.Fatalf("fail-over notification %+v (old leader %s)", lc, leader)
	}
	t.Logf("leader %s vanished; %s notified the client after %v; the outstanding incr was acknowledged after %v",
		leader, lc.From, lc.At.Sub(killed).Round(time.Millisecond), acked.Sub(killed).Round(time.Millisecond))
	// It took effect once.
	for i, n := range nodes {
		if i != li {
			if r := do(t, n, "default", req("get", "x")); string(r.Bytes) != "1" {
				t.Fatalf("%s reads x = %v, want 1", n.ID(), r)
			}
		}
	}
}
