package node

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
)

// A call to another cluster (remote.go) against a real node of that
// cluster (run with -race): copies of one id answered alike and applied
// once; a namespace that does not serve nested requests refuses at once;
// an address nobody listens on gives an error after the timeout that says
// the call did not reach the cluster.
func TestRemoteCall(t *testing.T) {
	cfg, ls := mkCluster(t, 1, config.Memory,
		config.Namespace{Name: "default", Protocol: "paxos", Service: "kv"},
		config.Namespace{Name: "plain", Protocol: "abd", Service: "kv"})
	b := startNode(t, cfg, "n1", ls[0], Options{})
	stop := make(chan struct{})
	defer close(stop)
	rcs, err := newRemotes(&config.Cluster{Remotes: []config.Remote{{Name: "b", Nodes: []string{b.ClientAddr().String()}, Timeout: "5s"}}})
	if err != nil {
		t.Fatal(err)
	}
	rc := rcs["b"]
	defer rc.close()
	incr := func(seq uint64) service.Result {
		t.Helper()
		resp, err, ok := rc.call(stop, "default", automaton.Request{ID: automaton.RequestID{Client: 1<<63 | 5, Seq: seq},
			Op: service.Op{Kind: "incr", Key: "n", Args: [][]byte{[]byte("1")}}, Nested: true})
		if err != nil || !ok {
			t.Fatalf("call %d: %v (ok %v)", seq, err, ok)
		}
		return resp.Result
	}
	for i := 0; i < 3; i++ {
		if r := incr(1); r.Type != service.ResultInt || r.Int != 1 {
			t.Fatalf("copy %d of call 1 answered %v, want 1", i, r)
		}
	}
	if r := incr(2); r.Int != 2 {
		t.Fatalf("call 2 answered %v, want 2", r)
	}

	_, err, _ = rc.call(stop, "plain", automaton.Request{ID: automaton.RequestID{Client: 9, Seq: 1}, Op: service.Op{Kind: "get", Key: "n"}, Nested: true})
	if err == nil || !strings.Contains(err.Error(), "does not serve nested requests") {
		t.Fatalf("call to an abd namespace: %v", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	rcs, _ = newRemotes(&config.Cluster{Remotes: []config.Remote{{Name: "gone", Nodes: []string{dead}, Timeout: "300ms"}}})
	start := time.Now()
	_, err, ok := rcs["gone"].call(stop, "default", automaton.Request{ID: automaton.RequestID{Client: 9, Seq: 1}, Op: service.Op{Kind: "get", Key: "n"}, Nested: true})
	if !ok || err == nil || !strings.Contains(err.Error(), "not executed") || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("call to an unreachable cluster: %v after %v", err, time.Since(start))
	}
}
