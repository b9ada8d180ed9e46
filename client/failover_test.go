package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/gateway/grpcserver"
)

// fanoutProto stands for a protocol whose clients fan out
// (automaton.FanoutProtocol), with a replicated dedup table.
type fanoutProto struct{}

func (fanoutProto) Name() string       { return "test-grpc-fanout" }
func (fanoutProto) ClientFanout() bool { return true }
func (fanoutProto) New(automaton.Config) (automaton.Automaton, error) {
	return nil, errors.New("test only")
}
func (fanoutProto) IdempotentRetry() bool { return true }

func init() { automaton.Register(fanoutProto{}) }

// fakeCluster is a leader hint shared by fake nodes, which the test moves.
type fakeCluster struct {
	mu      sync.Mutex
	leader  automaton.NodeID
	grpc    map[automaton.NodeID]string
	changed chan struct{}
}

func (fc *fakeCluster) setLeader(id automaton.NodeID) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.leader = id
	close(fc.changed)
	fc.changed = make(chan struct{})
}

// fakeNode is one node of a fakeCluster: a MemBackend (its own state) whose
// namespaces all have the cluster's leader. hang makes every request wait
// until release is closed (then it fails: the node went away) or its
// context ends; silent answers fanout requests Silent.
type fakeNode struct {
	*gatewaytest.MemBackend
	id      automaton.NodeID
	fc      *fakeCluster
	mu      sync.Mutex
	hang    bool
	silent  int // answer this many fanout requests Silent, then serve
	release chan struct{}
	gate    chan struct{} // when set, serving waits until it is closed
	seen    []automaton.Request
}

func (n *fakeNode) HasLeader(string) bool { return true }

func (n *fakeNode) WatchLeader(string) (gateway.LeaderHint, <-chan struct{}, error) {
	n.fc.mu.Lock()
	defer n.fc.mu.Unlock()
	return gateway.LeaderHint{From: n.id, ID: n.fc.leader, GRPC: n.fc.grpc[n.fc.leader]}, n.fc.changed, nil
}

func (n *fakeNode) Do(ctx context.Context, ns string, req automaton.Request) (automaton.Response, error) {
	n.mu.Lock()
	n.seen = append(n.seen, req)
	hang, release, silent, gate := n.hang, n.release, req.Fanout && n.silent > 0, n.gate
	if silent {
		n.silent--
	}
	n.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return automaton.Response{}, ctx.Err()
		}
	}
	if hang {
		select {
		case <-release:
			return automaton.Response{}, errors.New("node failed")
		case <-ctx.Done():
			return automaton.Response{}, ctx.Err()
		}
	}
	if silent {
		return automaton.Response{ID: req.ID, Silent: true}, nil
	}
	return n.MemBackend.Do(ctx, ns, req)
}

func (n *fakeNode) requests() []automaton.Request {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]automaton.Request(nil), n.seen...)
}

// startFakeCluster starts n fake nodes n1..nN serving namespaces
// "default" (protocol dedup: writes may be resubmitted) and "once"
// (unreplicated: they may not), led by n1.
func startFakeCluster(t *testing.T, size int, proto string) (*fakeCluster, []*fakeNode, []string) {
	t.Helper()
	fc := &fakeCluster{grpc: map[automaton.NodeID]string{}, changed: make(chan struct{})}
	var nodes []*fakeNode
	var addrs []string
	for i := range size {
		id := automaton.NodeID([]string{"n1", "n2", "n3", "n4"}[i])
		n := &fakeNode{id: id, fc: fc, release: make(chan struct{}), MemBackend: gatewaytest.New(
			config.Namespace{Name: "default", Protocol: proto, Service: "kv"},
			config.Namespace{Name: "once", Protocol: "test-grpc-atomic", Service: "kv"})}
		g := startGRPCOver(t, n, n.MemBackend, grpcserver.Options{RequestTimeout: 1 << 40}) // only a notification ends a hung request
		fc.grpc[id] = g.addr
		nodes = append(nodes, n)
		addrs = append(addrs, g.addr)
	}
	fc.setLeader("n1")
	return fc, nodes, addrs
}

// changes records OnLeaderChange calls.
type changes struct {
	mu  sync.Mutex
	got []LeaderChange
	ch  chan LeaderChange
}

func newChanges() *changes { return &changes{ch: make(chan LeaderChange, 16)} }

func (c *changes) note(lc LeaderChange) {
	c.mu.Lock()
	c.got = append(c.got, lc)
	c.mu.Unlock()
	c.ch <- lc
}

// Fig. III.1: a request outstanding at a leader that hangs (no TCP error,
// no answer) is resubmitted, same request id, to the leader a notification
// names, and completes there; the hung attempt is abandoned.
func TestFailoverResubmitsOnNotification(t *testing.T) {
	fc, nodes, addrs := startFakeCluster(t, 3, "test-grpc-dedup")
	seen := newChanges()
	// The attempt timeout is far beyond the test's: only the notification
	// can complete the request in time.
	c := newGRPC(t, addrs, Options{Timeout: 1 << 40, OnLeaderChange: seen.note})
	ctx := tctx(t)
	if err := c.Set(ctx, "warm", []byte("up")); err != nil {
		t.Fatal(err)
	}
	if lc := <-seen.ch; lc.Leader != "n1" || lc.Previous != "" || lc.Addr != addrs[0] {
		t.Fatalf("first notification: %+v", lc)
	}
	// Wait until every node has reported, so the client knows which
	// address is which node.
	waitFor(t, "every stream reported its node", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.nodeIDs[0] == "n1" && c.nodeIDs[1] == "n2" && c.nodeIDs[2] == "n3"
	})
	nodes[0].mu.Lock()
	nodes[0].hang = true
	nodes[0].mu.Unlock()
	type out struct {
		n   int64
		err error
	}
	done := make(chan out, 1)
	go func() { n, err := c.Incr(ctx, "x"); done <- out{n, err} }()
	waitFor(t, "the incr reached the leader", func() bool { return len(nodes[0].requests()) == 2 })
	fc.setLeader("n3")
	o := <-done
	if o.err != nil || o.n != 1 {
		t.Fatalf("incr after fail-over: %d %v", o.n, o.err)
	}
	if lc := <-seen.ch; lc.Leader != "n3" || lc.Previous != "n1" || lc.Addr != addrs[2] || lc.At.IsZero() {
		t.Fatalf("fail-over notification: %+v", lc)
	}
	old, resub := nodes[0].requests()[1], nodes[2].requests()
	if len(resub) != 1 || resub[0].ID != old.ID || resub[0].Op.Kind != "incr" {
		t.Fatalf("resubmitted %v, want the same request id as %v", resub, old.ID)
	}
	if n := len(nodes[1].requests()); n != 0 {
		t.Errorf("n2 (not the leader) saw %d requests", n)
	}
	// Later requests go to the new leader directly.
	if err := c.Set(ctx, "after", []byte("v")); err != nil || len(nodes[2].requests()) != 2 {
		t.Fatalf("set after fail-over: %v; n3 saw %d requests", err, len(nodes[2].requests()))
	}
}

// A write of a namespace without idempotent_retry is not resubmitted on a
// notification: its outcome is reported unknown when its node fails. A
// read of the same namespace is resubmitted.
func TestFailoverNoResubmitWithoutDedup(t *testing.T) {
	fc, nodes, addrs := startFakeCluster(t, 2, "test-grpc-dedup")
	c := newGRPC(t, addrs, Options{Timeout: 1 << 40, Namespace: "once"})
	ctx := tctx(t)
	if _, _, err := c.Get(ctx, "warm"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the client knows n1 leads", func() bool {
		idx, _ := c.leader("once").target()
		return idx == 0
	})
	nodes[0].mu.Lock()
	nodes[0].hang = true
	nodes[0].mu.Unlock()
	errc := make(chan error, 1)
	go func() { errc <- c.Set(ctx, "k", []byte("v")) }()
	waitFor(t, "the set reached the leader", func() bool { return len(nodes[0].requests()) == 2 })
	fc.setLeader("n2")
	waitFor(t, "the client knows n2 leads", func() bool {
		idx, _ := c.leader("once").target()
		return idx == 1
	})
	select {
	case err := <-errc:
		t.Fatalf("the set ended before its node failed: %v", err)
	default:
	}
	close(nodes[0].release)
	if err := <-errc; !errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("set whose node failed: %v, want ErrUnknownOutcome", err)
	}
	if n := len(nodes[1].requests()); n != 0 {
		t.Fatalf("the write was resubmitted to n2 (%d requests)", n)
	}
	// A read goes to the new leader.
	nodes[0].mu.Lock()
	nodes[0].release = make(chan struct{})
	nodes[0].mu.Unlock()
	if _, _, err := c.Get(ctx, "k"); err != nil || len(nodes[1].requests()) != 1 {
		t.Fatalf("get after fail-over: %v (n2 saw %d)", err, len(nodes[1].requests()))
	}
}

// Fanout: every node gets the request, marked, with one id; silent answers
// are skipped and the answering node's result returned. A round in which
// every node is silent is repeated with the same id. NoFanout sends to
// one node, unmarked.
func TestFanout(t *testing.T) {
	_, nodes, addrs := startFakeCluster(t, 3, "test-grpc-fanout")
	nodes[0].silent, nodes[1].silent = 1<<30, 1<<30
	c := newGRPC(t, addrs, Options{})
	ctx := tctx(t)
	// n3 answers only once n1 and n2 hold their copies: the client may
	// stop sending once it has its answer.
	gate := make(chan struct{})
	nodes[2].gate = gate
	go func() {
		for len(nodes[0].requests()) == 0 || len(nodes[1].requests()) == 0 {
			time.Sleep(time.Millisecond)
		}
		close(gate)
	}()
	if err := c.Set(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	nodes[2].mu.Lock()
	nodes[2].gate = nil
	nodes[2].mu.Unlock()
	var ids []automaton.RequestID
	for i, n := range nodes {
		rs := n.requests()
		if len(rs) != 1 || !rs[0].Fanout {
			t.Fatalf("n%d saw %v, want one fanout request", i+1, rs)
		}
		ids = append(ids, rs[0].ID)
	}
	if ids[0] != ids[1] || ids[1] != ids[2] {
		t.Fatalf("fanout ids differ: %v", ids)
	}
	// Every node silent once: the client repeats the round.
	nodes[2].mu.Lock()
	nodes[2].silent = 1
	nodes[2].mu.Unlock()
	v, found, err := c.Get(ctx, "k")
	if err != nil || !found || string(v) != "v" {
		t.Fatalf("get after a silent round: %q %v %v", v, found, err)
	}
	rs := nodes[2].requests()
	if len(rs) != 3 || rs[1].ID != rs[2].ID {
		t.Fatalf("n3 saw %v, want the get twice with one id", rs)
	}
	// Every node silent always: the read gives up after fanoutRounds.
	nodes[2].mu.Lock()
	nodes[2].silent = 1 << 30
	nodes[2].mu.Unlock()
	if _, _, err := c.Get(ctx, "k"); err == nil {
		t.Fatal("get answered with every node silent")
	}
	if n := len(nodes[2].requests()); n != 3+fanoutRounds {
		t.Fatalf("n3 saw %d requests, want %d", n, 3+fanoutRounds)
	}

	one := newGRPC(t, addrs, Options{NoFanout: true})
	var before []int
	for _, n := range nodes {
		before = append(before, len(n.requests()))
	}
	if err := one.Set(ctx, "k2", []byte("v")); err != nil {
		t.Fatal(err)
	}
	sent := 0
	for i, n := range nodes {
		rs := n.requests()
		for _, r := range rs[before[i]:] {
			sent++
			if r.Fanout {
				t.Errorf("NoFanout: n%d got a fanout request", i+1)
			}
		}
	}
	if sent != 1 {
		t.Fatalf("NoFanout: %d requests sent, want 1", sent)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx := tctx(t)
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out: %s", what)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// A request to a known leader makes its first attempt on the calling
// goroutine: no attempt goroutine to hand the call to and the result back
// from (fails on main 0fae8db: every attempt ran on a goroutine of its
// own). The fail-over on a notification is TestFailoverResubmitsOnNotification's.
func TestFailoverFirstAttemptOnCaller(t *testing.T) {
	_, _, addrs := startFakeCluster(t, 3, "test-grpc-dedup")
	seen := newChanges()
	c := newGRPC(t, addrs, Options{OnLeaderChange: seen.note})
	ctx := tctx(t)
	if err := c.Set(ctx, "warm", []byte("up")); err != nil {
		t.Fatal(err)
	}
	<-seen.ch // the leader is known
	var mu sync.Mutex
	var on []string
	testHookAttempt = func() {
		mu.Lock()
		on = append(on, goid())
		mu.Unlock()
	}
	defer func() { testHookAttempt = nil }()
	me := goid()
	for range 10 {
		if _, _, err := c.Get(ctx, "warm"); err != nil {
			t.Fatal(err)
		}
		if err := c.Set(ctx, "k", []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(on) != 20 {
		t.Fatalf("%d attempts for 20 requests", len(on))
	}
	for _, g := range on {
		if g != me {
			t.Fatalf("an attempt ran on goroutine %s, the caller is %s", g, me)
		}
	}
}
