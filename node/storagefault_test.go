package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/storage"
)

// faultNode is a node of a storage-fault test, with its WAL and Run's result.
type faultNode struct {
	*Node
	errc chan error
}

// runFaultNode starts node id on listeners l with engine e (nil: the
// cluster's), and closes it when the test ends unless the test did.
func runFaultNode(t *testing.T, cfg *config.Cluster, id string, l lns, e storage.Engine, lg *slog.Logger) *faultNode {
	t.Helper()
	n, err := New(cfg, id, Options{Storage: e, Logger: lg, PeerListener: l.peer, ClientListener: l.client, MetricsListener: l.metrics})
	if err != nil {
		t.Fatal(err)
	}
	fn := &faultNode{n, make(chan error, 1)}
	go func() { fn.errc <- n.Run(context.Background()) }()
	select {
	case <-n.Ready():
	case err := <-fn.errc:
		t.Fatalf("node %s: %v", id, err)
	}
	t.Cleanup(func() { n.Close() })
	return fn
}

// relisten opens listeners on node id's configured addresses again (a
// restart on the same addresses).
func relisten(t *testing.T, cfg *config.Cluster, id string) lns {
	t.Helper()
	return listenAgain(t, cfg, id, 100, 10*time.Millisecond, false)
}

// listenAgain is relisten, trying each address tries times wait apart;
// then it fails the test, or skips it when skip (the port is another
// process's).
func listenAgain(t *testing.T, cfg *config.Cluster, id string, tries int, wait time.Duration, skip bool) lns {
	t.Helper()
	self, err := cfg.Node(id)
	if err != nil {
		t.Fatal(err)
	}
	var out [3]net.Listener
	for i, addr := range []string{self.Peer, self.Client, self.Metrics} {
		for try := 0; ; try++ {
			if out[i], err = net.Listen("tcp", addr); err == nil {
				break
			}
			if try == tries {
				for _, l := range out[:i] {
					l.Close()
				}
				if skip {
					t.Skipf("listen on %s again: %v (taken by another process)", addr, err)
				}
				t.Fatalf("listen on %s again: %v", addr, err)
			}
			time.Sleep(wait)
		}
	}
	return lns{out[0], out[1], out[2]}
}

// retryVia submits r to n, again with the same id while the cluster elects
// a leader (errors, error results), and fails the test after 10 s.
func retryVia(t *testing.T, n *Node, r automaton.Request) service.Result {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := n.Do(ctx, "default", r)
		cancel()
		if err == nil && !resp.Result.IsErr() {
			return resp.Result
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s via %s: %v %v", r.Op, n.ID(), err, resp.Result)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A 3-node Multi-Paxos cluster in which n2's fsync fails (issue 19 item 3):
// n2 does not retry it; from then on it acknowledges nothing (no response,
// no peer message leaves it), refuses requests with the storage error and
// reports it in INFO, /healthz and /metrics, while n1 and n3 keep serving.
// Restarted on the same data directory, n2 re-reads what is durable and
// rejoins: with n1 stopped, n2 and n3 alone form the quorum that serves every
// acknowledged write and a new one.
func TestStorageFsyncFailureStopsAcknowledging(t *testing.T) {
	nsPaxos := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv",
		Params: map[string]string{"heartbeat": "10ms", "election_timeout": "100ms"}}
	cfg, ls := mkCluster(t, 3, config.Fsync, nsPaxos)
	fs := &storage.FaultFS{}
	wal, err := storage.OpenWAL(cfg.NodeDataDir("n2"), storage.WALOptions{Sync: true, FS: fs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	logs := &countLog{}
	n1 := runFaultNode(t, cfg, "n1", ls[0], nil, nil)
	n2 := runFaultNode(t, cfg, "n2", ls[1], wal, slog.New(logs))
	n3 := runFaultNode(t, cfg, "n3", ls[2], nil, nil)

	acked := map[string]string{}
	put := func(n *Node, k, v string) { retryVia(t, n, req("set", k, v)); acked[k] = v }
	for i := 0; i < 10; i++ {
		put(n1.Node, fmt.Sprintf("k%d", i), "before")
	}
	eventually(t, "n2 persists", func() bool { c, _ := n2.Counters("default"); return c.Persists > 0 })

	fs.FailSync(syscall.EIO)
	for i := 10; n2.StorageErr() == nil; i++ {
		put(n1.Node, fmt.Sprintf("k%d", i), "during")
		if i > 200 {
			t.Fatal("n2 never committed after its fsync started failing")
		}
	}
	// Whatever was being released when the failure hit has left by now
	// (releases happen under rmu); nothing may leave after this.
	l2 := n2.loop("default")
	l2.rmu.Lock()
	l2.rmu.Unlock()
	before, _ := n2.Counters("default")
	fs.FailSync(nil) // the disk "recovers": n2 must not believe it

	// The others keep serving (electing a new leader if n2 led).
	for i := 0; i < 20; i++ {
		put([]*Node{n1.Node, n3.Node}[i%2], fmt.Sprintf("k%d", i), fmt.Sprintf("after%d", i))
	}
	// n2 refuses, saying why.
	_, err = n2.Do(context.Background(), "default", req("set", "x", "y"))
	var se *StorageError
	if !errors.As(err, &se) || !errors.Is(err, syscall.EIO) ||
		!strings.HasPrefix(err.Error(), "node n2 storage failed: fdatasync ") || !strings.HasSuffix(err.Error(), "; restart required") {
		t.Fatalf("request to the failed node: %v", err)
	}
	if _, err := n2.Do(context.Background(), "default", req("get", "k1")); !errors.As(err, &se) {
		t.Fatalf("a read on the failed node: %v, want the storage error", err)
	}
	after, _ := n2.Counters("default")
	if after.MessagesOut != before.MessagesOut || after.Responses != before.Responses {
		t.Fatalf("the failed node released outputs: messages out %d -> %d, responses %d -> %d",
			before.MessagesOut, after.MessagesOut, before.Responses, after.Responses)
	}
	if info := n2.Info()["synod"]; info["storage_status"] != "failed" || !strings.Contains(info["storage_error"], "restart required") {
		t.Fatalf("INFO synod: %v", info)
	}
	if code, body := httpGet(t, n2.MetricsAddr(), "/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "storage failed") {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if _, body := httpGet(t, n2.MetricsAddr(), "/metrics"); !strings.Contains(body, `synod_storage_failed{node="n2"} 1`) {
		t.Fatal("/metrics does not report the failure")
	}
	if code, _ := httpGet(t, n1.MetricsAddr(), "/healthz"); code != http.StatusOK {
		t.Fatalf("healthy n1: /healthz %d", code)
	}

	// Restart n2 on its data directory (the operating system's files).
	n2.Close()
	if err := <-n2.errc; !errors.As(err, &se) {
		t.Fatalf("Run of the failed node returned %v", err)
	}
	if got := logs.count("storage failed"); got != 1 {
		t.Fatalf("the failure was logged %d times, want once", got)
	}
	n2 = runFaultNode(t, cfg, "n2", relisten(t, cfg, "n2"), nil, nil)
	if err := n2.StorageErr(); err != nil {
		t.Fatalf("restarted node: %v", err)
	}
	n1.Close()
	put(n2.Node, "rejoined", "yes")
	for k, v := range acked {
		if got := string(retryVia(t, n2.Node, req("get", k)).Bytes); got != v {
			t.Fatalf("after the restart %s = %q, want %q", k, got, v)
		}
	}
	if c, _ := n2.Counters("default"); c.Persists == 0 || c.Responses == 0 {
		t.Fatalf("restarted n2 took no part: %+v", c)
	}
}

func httpGet(t *testing.T, addr net.Addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr.String() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// countLog is a slog handler that keeps the messages of error records.
type countLog struct {
	mu   sync.Mutex
	msgs []string
}

func (c *countLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (c *countLog) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	c.msgs = append(c.msgs, r.Message)
	c.mu.Unlock()
	return nil
}
func (c *countLog) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *countLog) WithGroup(string) slog.Handler      { return c }

func (c *countLog) count(prefix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.msgs {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}
