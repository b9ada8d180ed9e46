package grpcserver

import (
	"context"
	"errors"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// fanoutProto is a protocol whose clients fan out (automaton.FanoutProtocol);
// only its registration is used.
type fanoutProto struct{}

func (fanoutProto) Name() string       { return "grpcservertest-fanout" }
func (fanoutProto) ClientFanout() bool { return true }
func (fanoutProto) IdempotentRetry() bool {
	return true
}
func (fanoutProto) New(automaton.Config) (automaton.Automaton, error) {
	return nil, errors.New("grpcservertest-fanout runs nowhere")
}

func init() { automaton.Register(fanoutProto{}) }

// leaderBackend serves "default" (paxos, with a leader the test sets) and
// "fan" (a fanout protocol without a leader). A fanout request for key
// "silent" is answered Silent; it records each request's Fanout flag.
type leaderBackend struct {
	*gatewaytest.MemBackend
	mu      sync.Mutex
	hint    gateway.LeaderHint
	changed chan struct{}
	fanouts []bool
}

func newLeaderBackend() *leaderBackend {
	return &leaderBackend{
		MemBackend: gatewaytest.New(
			config.Namespace{Name: "default", Protocol: "paxos", Service: "kv"},
			config.Namespace{Name: "fan", Protocol: "grpcservertest-fanout", Service: "kv"}),
		changed: make(chan struct{}),
	}
}

func (b *leaderBackend) setLeader(id, client, grpcAddr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hint = gateway.LeaderHint{From: "n1", ID: automaton.NodeID(id), Client: client, GRPC: grpcAddr}
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *leaderBackend) HasLeader(ns string) bool { return ns == "default" }

func (b *leaderBackend) WatchLeader(ns string) (gateway.LeaderHint, <-chan struct{}, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hint, b.changed, nil
}

func (b *leaderBackend) Do(ctx context.Context, ns string, req automaton.Request) (automaton.Response, error) {
	b.mu.Lock()
	b.fanouts = append(b.fanouts, req.Fanout)
	b.mu.Unlock()
	if req.Fanout && req.Op.Key == "silent" {
		return automaton.Response{ID: req.ID, Silent: true}, nil
	}
	return b.MemBackend.Do(ctx, ns, req)
}

// WatchLeader sends the current leader at once, then each change (not a
// repeat of the same leader), and refuses namespaces without a leader.
func TestWatchLeaderStream(t *testing.T) {
	b := newLeaderBackend()
	b.setLeader("n1", "10.0.0.1:6381", "10.0.0.1:7401")
	_, c := start(t, b, Options{})
	cctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	st, err := c.WatchLeader(cctx, &synodpb.WatchLeaderRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := func(id, client, grpcAddr string) {
		t.Helper()
		ev, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetNamespace() != "default" || ev.GetNodeId() != id || ev.GetClientAddr() != client || ev.GetGrpcAddr() != grpcAddr || ev.GetFrom() != "n1" {
			t.Fatalf("event %v, want leader %q at %q / %q from n1", ev, id, client, grpcAddr)
		}
	}
	want("n1", "10.0.0.1:6381", "10.0.0.1:7401")
	b.setLeader("n1", "10.0.0.1:6381", "10.0.0.1:7401") // same leader: no event
	b.setLeader("", "", "")
	want("", "", "")
	b.setLeader("n2", "10.0.0.2:6381", "")
	want("n2", "10.0.0.2:6381", "")
	cancel()
	if _, err := st.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("after cancel: %v", err)
	}

	for _, c2 := range []struct {
		ns   string
		code codes.Code
	}{{"fan", codes.FailedPrecondition}, {"nope", codes.NotFound}} {
		st, err := c.WatchLeader(ctx(t), &synodpb.WatchLeaderRequest{Namespace: c2.ns})
		if err == nil {
			_, err = st.Recv()
		}
		if status.Code(err) != c2.code {
			t.Errorf("WatchLeader(%q): %v, want %v", c2.ns, err, c2.code)
		}
	}
	// A backend that cannot watch: UNIMPLEMENTED.
	_, plain := start(t, gatewaytest.KV(), Options{})
	st, err = plain.WatchLeader(ctx(t), &synodpb.WatchLeaderRequest{})
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("WatchLeader on a backend without leaders: %v", err)
	}
}

// A stream open when the server closes ends with UNAVAILABLE (Close does
// not hang on it), and the password guards streams too.
func TestWatchLeaderCloseAndPassword(t *testing.T) {
	b := newLeaderBackend()
	b.setLeader("n1", "a", "b")
	s, c := start(t, b, Options{Password: "pw"})
	st, err := c.WatchLeader(ctx(t), &synodpb.WatchLeaderRequest{})
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without the password: %v", err)
	}
	st, err = c.WatchLeader(metadata.AppendToOutgoingContext(ctx(t), synodpb.PasswordKey, "pw"), &synodpb.WatchLeaderRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := st.Recv(); err != nil || ev.GetNodeId() != "n1" {
		t.Fatalf("first event: %v %v", ev, err)
	}
	s.Close()
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("after Close: %v", err)
	}
}

// Request.fanout reaches the backend; a Silent answer comes back as
// Response.silent without a result; Namespaces reports client_fanout and
// has_leader.
func TestFanoutAndSilent(t *testing.T) {
	b := newLeaderBackend()
	_, c := start(t, b, Options{})
	r, err := c.Do(ctx(t), &synodpb.Request{Namespace: "fan", ClientId: 5, Seq: 1, Op: op("get", "silent"), Fanout: true})
	if err != nil || !r.GetSilent() || r.GetResult() != nil {
		t.Fatalf("silent answer: %v %v", r, err)
	}
	r, err = c.Do(ctx(t), &synodpb.Request{Namespace: "fan", ClientId: 5, Seq: 2, Op: op("set", "k", "v"), Fanout: true})
	if err != nil || r.GetSilent() || r.GetResult().GetOk() == nil {
		t.Fatalf("answer: %v %v", r, err)
	}
	r, err = c.Do(ctx(t), &synodpb.Request{Namespace: "fan", ClientId: 5, Seq: 3, Op: op("get", "silent")})
	if err != nil || r.GetSilent() || r.GetResult().GetNil() == nil {
		t.Fatalf("not fanout: %v %v", r, err)
	}
	b.mu.Lock()
	if got := b.fanouts; len(got) != 3 || !got[0] || !got[1] || got[2] {
		t.Errorf("backend saw fanout flags %v, want [true true false]", got)
	}
	b.mu.Unlock()
	nss, err := c.Namespaces(ctx(t), &synodpb.NamespacesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]bool{}
	for _, n := range nss.GetNamespaces() {
		got[n.GetName()] = [2]bool{n.GetClientFanout(), n.GetHasLeader()}
	}
	if got["default"] != [2]bool{false, true} || got["fan"] != [2]bool{true, false} {
		t.Errorf("namespaces (client_fanout, has_leader): %v", got)
	}
}
