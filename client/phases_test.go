package client

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/gateway/grpcserver"
	"github.com/synod-dev/synod/protocol/abd"
)

// A stream's window (phases.go): the phases queued while a message is in
// flight (phaseWindow, one) stay queued, and leave together, in one
// message, once it has all its replies; a message holds one namespace.
func TestPhaseStreamWindow(t *testing.T) {
	if phaseWindow != 1 {
		t.Fatalf("this test follows a window of one message, not %d", phaseWindow)
	}
	ps := &pstream{kick: make(chan struct{}, 1), pending: map[uint64]*pcall{}}
	notify := make(chan *pcall, 64)
	queue := func(ns string, k int) {
		for range k {
			if err := ps.enqueue(&pcall{ns: ns, phase: &synodpb.Phase{Key: "k"}, notify: notify}); err != nil {
				t.Fatal(err)
			}
		}
	}
	take := func() *synodpb.PhaseRequest {
		ps.mu.Lock()
		defer ps.mu.Unlock()
		return ps.message()
	}
	queue("", 3)
	queue("other", 1)
	m1 := take()
	if len(m1.GetPhases()) != 3 || m1.GetNamespace() != "" {
		t.Fatalf("first message %v, want the 3 phases of the default namespace", m1)
	}
	queue("", 5)
	if m := take(); m != nil {
		t.Fatalf("a second message %v while one is in flight", m)
	}
	reply := func(m *synodpb.PhaseRequest, k int) ([]*pcall, bool) {
		var rs []*synodpb.PhaseReply
		for _, p := range m.GetPhases()[:k] {
			rs = append(rs, &synodpb.PhaseReply{Id: p.GetId()})
		}
		return ps.answered(rs)
	}
	if done, wake := reply(m1, 2); len(done) != 2 || wake {
		t.Fatalf("2 of 3 replies: %d done, wake %v; want 2 done and the window still full", len(done), wake)
	}
	if m := take(); m != nil {
		t.Fatalf("a message %v before the first one's last reply", m)
	}
	if done, wake := ps.answered([]*synodpb.PhaseReply{{Id: m1.GetPhases()[2].GetId()}, {Id: m1.GetPhases()[2].GetId()}}); len(done) != 1 || !wake {
		t.Fatalf("the last reply (and a duplicate): %d done, wake %v; want 1 done and the writer woken", len(done), wake)
	}
	// The other namespace's phase was queued first: its own message.
	m := take()
	if len(m.GetPhases()) != 1 || m.GetNamespace() != "other" {
		t.Fatalf("after the first message's replies: %v, want the phase of namespace other", m)
	}
	if m := take(); m != nil {
		t.Fatalf("a message %v while one is in flight", m)
	}
	if done, wake := reply(m, 1); len(done) != 1 || !wake {
		t.Fatalf("its reply: %d done, wake %v; want 1 done and the writer woken", len(done), wake)
	}
	m = take()
	if len(m.GetPhases()) != 5 || m.GetNamespace() != "" {
		t.Fatalf("after the first message's replies: %v, want the 5 queued phases in one message", m)
	}
}

// phaseCounter serves the gRPC API of a backend and counts the Phases and
// Pipeline streams opened; without Phases it answers Phases as an older
// node does (UNIMPLEMENTED).
type phaseCounter struct {
	*grpcserver.Server
	noPhases          bool
	phases, pipelines atomic.Int32
}

func (p *phaseCounter) Phases(s synodpb.Synod_PhasesServer) error {
	if p.noPhases {
		return status.Error(codes.Unimplemented, "method Phases not implemented")
	}
	p.phases.Add(1)
	return p.Server.Phases(s)
}

func (p *phaseCounter) Pipeline(s synodpb.Synod_PipelineServer) error {
	p.pipelines.Add(1)
	return p.Server.Pipeline(s)
}

func startCounter(t *testing.T, noPhases bool) (*phaseCounter, *gatewaytest.AutomatonBackend, string) {
	t.Helper()
	b := gatewaytest.MustAutomaton(t, "abd", "kv")
	p := &phaseCounter{Server: grpcserver.New(b, grpcserver.Options{}), noPhases: noPhases}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	synodpb.RegisterSynodServer(gs, p)
	done := make(chan struct{})
	go func() { gs.Serve(l); close(done) }()
	t.Cleanup(func() { p.Server.Close(); gs.Stop(); <-done })
	return p, b, l.Addr().String()
}

// Client-driven ABD sends its phases on Phases streams, never as Pipeline
// calls, to a node that serves Phases; a node that answers Phases
// UNIMPLEMENTED (an older node) is asked through its Pipeline stream and
// its answers count: with the third replica down, no phase completes
// without it.
func TestABDClientPhasesAndOlderNodes(t *testing.T) {
	cur, curB, curAddr := startCounter(t, false)
	old, oldB, oldAddr := startCounter(t, true)
	nodes, _, addrs := abdReplicas(t, 1)
	nodes[0].stop()
	a := newGRPC(t, []string{curAddr, oldAddr, addrs[0]}, Options{}).ABD("")
	ctx := tctx(t)
	for i := range 10 {
		key := fmt.Sprintf("k%d", i%3)
		want := fmt.Sprintf("v%d", i)
		if err := a.Set(ctx, key, []byte(want)); err != nil {
			t.Fatal(err)
		}
		if v, ok, err := a.Get(ctx, key); err != nil || !ok || string(v) != want {
			t.Fatalf("get %s after set %s: %q %v %v", key, want, v, ok, err)
		}
	}
	if n := cur.pipelines.Load(); n != 0 || cur.phases.Load() == 0 {
		t.Errorf("the node with Phases: %d Phases streams, %d Pipeline streams; want phases on Phases only", cur.phases.Load(), n)
	}
	if old.pipelines.Load() == 0 {
		t.Errorf("the older node: no Pipeline stream")
	}
	// 10 puts of 2 phases, 10 gets of 1 (both replicas hold the latest tag:
	// no write-back).
	if len(curB.Log()) < 30 || len(oldB.Log()) < 30 {
		t.Errorf("phases run: %d and %d, want every one of the 30 phases at both live replicas", len(curB.Log()), len(oldB.Log()))
	}
}

// Phases streams go over the direct transport (gconn.phaseStub) even when
// the client's calls use grpc-go's, and client-driven ABD works over them.
func TestABDPhasesDirectUnderGRPCGo(t *testing.T) {
	cur, _, curAddr := startCounter(t, false)
	_, _, addrs := abdReplicas(t, 1) // 2 replicas: every phase needs both
	c := newGRPC(t, append([]string{curAddr}, addrs...), Options{GRPCTransport: TransportGRPCGo})
	a := c.ABD("")
	ctx := tctx(t)
	for i := range 5 {
		want := fmt.Sprintf("v%d", i)
		if err := a.Set(ctx, "k", []byte(want)); err != nil {
			t.Fatal(err)
		}
		if v, ok, err := a.Get(ctx, "k"); err != nil || !ok || string(v) != want {
			t.Fatalf("get k after set %s: %q %v %v", want, v, ok, err)
		}
	}
	if cur.phases.Load() == 0 {
		t.Fatal("no Phases stream at the counting node")
	}
	for _, g := range c.conns {
		if g.cc == nil {
			t.Fatalf("%s: calls not on grpc-go's transport", g.addr)
		}
		ps := g.livePhases()
		if ps == nil {
			t.Fatalf("%s: no live Phases stream", g.addr)
		}
		gs, ok := ps.s.(*grpc.GenericClientStream[synodpb.PhaseRequest, synodpb.PhaseResponse])
		if !ok {
			t.Fatalf("%s: Phases stream is a %T", g.addr, ps.s)
		}
		if _, ok := gs.ClientStream.(*h2stream); !ok {
			t.Errorf("%s: Phases stream over %T, want the direct transport's *h2stream", g.addr, gs.ClientStream)
		}
	}
}

// A query phase's reply is read as protocol/abd's QueryAnswer directly
// (queryAnswer) exactly as result's [tag, value] reads through
// ParseQueryAnswer: a value, a tombstone, a register never written, a tag
// that does not parse; a store's reply, a failure or an error result is
// left to result.
func TestPhaseQueryAnswerAsResult(t *testing.T) {
	query := func(r *synodpb.PhaseReply) *pcall {
		pc := &pcall{reply: r}
		pc.phase = &pc.ph
		pc.ph.Key = "k"
		return pc
	}
	for _, r := range []*synodpb.PhaseReply{
		{Tag: "3:7:client/x", Value: []byte("v"), Present: true},
		{Tag: "3:7:client/x", Present: true}, // present and empty
		{Tag: "2:1:n1"},                      // a tombstone
		{},                                   // never written
	} {
		pc := query(r)
		q, ok, err := pc.queryAnswer()
		res, rerr := pc.result()
		if rerr != nil {
			t.Fatal(rerr)
		}
		want, werr := abd.ParseQueryAnswer(res)
		if !ok || err != nil || werr != nil || q.Tag != want.Tag || q.Tomb != want.Tomb || string(q.Value) != string(want.Value) || q.Present() != want.Present() {
			t.Errorf("reply %v: queryAnswer %+v %v %v, ParseQueryAnswer %+v %v", r, q, ok, err, want, werr)
		}
	}
	if _, ok, err := query(&synodpb.PhaseReply{Tag: "x"}).queryAnswer(); !ok || err == nil {
		t.Errorf("a tag that does not parse: ok %v err %v, want refused", ok, err)
	}
	store := query(&synodpb.PhaseReply{})
	store.ph.Tag = "1:1:client/x"
	for name, pc := range map[string]*pcall{
		"store":  store,
		"failed": {err: errors.New("x"), phase: &synodpb.Phase{}},
		"code":   query(&synodpb.PhaseReply{Code: 14}),
		"error":  query(&synodpb.PhaseReply{Err: "ERR x"}),
	} {
		if _, ok, _ := pc.queryAnswer(); ok {
			t.Errorf("%s: read as a query's answer", name)
		}
	}
}
