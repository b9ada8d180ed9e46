package grpcserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/service"

	_ "github.com/synod-dev/synod/protocol/abd" // Namespaces reports abd's properties
)

func start(t *testing.T, b gateway.Backend, opts Options) (*Server, synodpb.SynodClient) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(b, opts)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	cc, err := grpc.NewClient("passthrough:///"+l.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v after Close", err)
		}
	})
	return s, synodpb.NewSynodClient(cc)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func op(kind, key string, args ...string) *synodpb.Op {
	o := &synodpb.Op{Kind: kind, Key: key}
	for _, a := range args {
		o.Args = append(o.Args, []byte(a))
	}
	return o
}

func twoNamespaces() *gatewaytest.MemBackend {
	return gatewaytest.New(
		config.Namespace{Name: "default", Protocol: "abd", Service: "kv"},
		config.Namespace{Name: "hits", Protocol: "memory", Service: "counter"},
	)
}

func TestDoMapsEverything(t *testing.T) {
	b := twoNamespaces()
	_, c := start(t, b, Options{})
	x := ctx(t)

	// Results of every type, with the request's identity and options.
	steps := []struct {
		req  *synodpb.Request
		want service.Result
	}{
		{&synodpb.Request{ClientId: 7, Seq: 1, Op: op("set", "k", "v")}, service.OK()},
		{&synodpb.Request{ClientId: 7, Seq: 2, Op: op("get", "k"), Read: synodpb.ReadMode_READ_MODE_REGULAR}, service.Bytes([]byte("v"))},
		{&synodpb.Request{ClientId: 7, Seq: 3, Op: op("get", "nope")}, service.Nil()},
		{&synodpb.Request{ClientId: 7, Seq: 4, Op: op("incr", "k", "1")}, service.Errorf("ERR value is not an integer or out of range")},
		{&synodpb.Request{ClientId: 7, Seq: 5, Namespace: "hits", Op: op("add", "", "5"),
			OpId: "mine", Prev: []string{"0000000000000007-1", "x"}, Strict: true}, service.Int(5)},
	}
	for _, s := range steps {
		resp, err := c.Do(x, s.req)
		if err != nil {
			t.Fatalf("%v: %v", s.req, err)
		}
		got, err := synodpb.ToResult(resp.GetResult())
		if err != nil || !got.Equal(s.want) {
			t.Errorf("%v: result %v (%v), want %v", s.req.Op, got, err, s.want)
		}
		wantID := s.req.OpId
		if wantID == "" {
			wantID = fmt.Sprintf("%016x-%d", s.req.ClientId, s.req.Seq)
		}
		if resp.GetOpId() != wantID {
			t.Errorf("%v: op id %q, want %q", s.req.Op, resp.GetOpId(), wantID)
		}
	}
	log := b.Log()
	if len(log) != len(steps) {
		t.Fatalf("backend saw %d requests, want %d", len(log), len(steps))
	}
	for i, rec := range log {
		in := steps[i].req
		ns := in.Namespace
		if ns == "" {
			ns = "default"
		}
		r := rec.Req
		if rec.NS != ns || r.ID != (automaton.RequestID{Client: 7, Seq: in.Seq}) || r.Op.Kind != in.Op.Kind || r.Op.Key != in.Op.Key {
			t.Errorf("request %d reached the backend as %s %+v", i, rec.NS, r)
		}
		if r.Opts.Read != automaton.ReadMode(in.Read) || r.Opts.Strict != in.Strict || !slices.Equal(r.Opts.Prev, in.Prev) {
			t.Errorf("request %d options %+v, want read %v strict %v prev %v", i, r.Opts, in.Read, in.Strict, in.Prev)
		}
	}
	if r := log[4].Req; r.Opts.OpID != "mine" || !r.Opts.Strict || r.Opts.Read != automaton.ReadDefault {
		t.Errorf("ESDS options: %+v", r.Opts)
	}

	// client_id 0: the server picks a fresh identity per request.
	var ids []automaton.RequestID
	for range 2 {
		resp, err := c.Do(x, &synodpb.Request{Op: op("get", "k")})
		if err != nil {
			t.Fatal(err)
		}
		r := b.Log()[len(b.Log())-1].Req
		if r.ID.Client == 0 || r.ID.Seq != 1 || resp.GetOpId() != gateway.AssignedOpID(r.ID) {
			t.Errorf("anonymous request: id %v op id %q", r.ID, resp.GetOpId())
		}
		ids = append(ids, r.ID)
	}
	if ids[0] == ids[1] {
		t.Errorf("two anonymous requests share id %v", ids[0])
	}
}

func TestInvalidRequests(t *testing.T) {
	b := twoNamespaces()
	_, c := start(t, b, Options{})
	x := ctx(t)
	for _, tc := range []struct {
		req  *synodpb.Request
		code codes.Code
		msg  string
	}{
		{&synodpb.Request{Namespace: "nope", Op: op("get", "k")}, codes.NotFound, `unknown namespace "nope" (namespaces: default, hits)`},
		{&synodpb.Request{}, codes.InvalidArgument, "request has no op"},
		{&synodpb.Request{Op: op("frob", "k")}, codes.InvalidArgument, `unknown kv operation "frob"`},
		{&synodpb.Request{Op: op("GET", "k")}, codes.InvalidArgument, `unknown kv operation "GET"`},
		{&synodpb.Request{Op: op("set", "k")}, codes.InvalidArgument, "wrong number of arguments"},
		{&synodpb.Request{Namespace: "hits", Op: op("get", "k")}, codes.InvalidArgument, "counter"},
		{&synodpb.Request{Op: op("get", "k"), Read: synodpb.ReadMode(42)}, codes.InvalidArgument, "unknown read mode 42"},
		{&synodpb.Request{Op: op("get", "k"), OpId: "00000000000000ff-3"}, codes.InvalidArgument, "reserved"},
		{&synodpb.Request{Op: op("get", "k"), OpId: "a b"}, codes.InvalidArgument, "printable"},
		{&synodpb.Request{Op: op("get", "k"), Prev: []string{""}}, codes.InvalidArgument, "prev: op id is empty"},
		{&synodpb.Request{Op: op("get", "k"), Prev: make([]string, gateway.MaxPrevIDs+1)}, codes.InvalidArgument, "prev set too large"},
		{&synodpb.Request{ClientId: 5, Op: op("get", "k")}, codes.InvalidArgument, "seq must be at least 1"},
		{&synodpb.Request{Op: op("set", "k", strings.Repeat("v", service.MaxValueSize+1))}, codes.InvalidArgument, "value too large"},
		{&synodpb.Request{Op: op("set", "k", strings.Repeat("v", synodpb.MaxMessageSize))}, codes.ResourceExhausted, ""},
	} {
		_, err := c.Do(x, tc.req)
		st := status.Convert(err)
		if st.Code() != tc.code || !strings.Contains(st.Message(), tc.msg) {
			t.Errorf("%.80v: got %v %q, want %v containing %q", tc.req, st.Code(), st.Message(), tc.code, tc.msg)
		}
	}
	if n := len(b.Log()); n != 0 {
		t.Errorf("%d refused requests reached the backend", n)
	}
	// The largest value fits, both ways.
	big := bytes.Repeat([]byte("x"), service.MaxValueSize)
	if _, err := c.Do(x, &synodpb.Request{Op: &synodpb.Op{Kind: "set", Key: "big", Args: [][]byte{big}}}); err != nil {
		t.Fatalf("set of a %d-byte value: %v", len(big), err)
	}
	resp, err := c.Do(x, &synodpb.Request{Op: op("get", "big")})
	if err != nil || !bytes.Equal(resp.GetResult().GetBytes(), big) {
		t.Fatalf("get of the big value: %v", err)
	}
}

func TestOutcomeUnknownErrors(t *testing.T) {
	b := gatewaytest.KV()
	s, c := start(t, b, Options{RequestTimeout: 50 * time.Millisecond})
	x := ctx(t)
	b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		switch req.Op.Key {
		case "slow":
			<-ctx.Done()
			return ctx.Err()
		case "broken":
			return errors.New("disk on fire")
		case "down":
			return gateway.ErrShuttingDown
		}
		return nil
	})
	for _, tc := range []struct {
		key  string
		code codes.Code
	}{
		{"slow", codes.DeadlineExceeded},
		{"broken", codes.Unavailable},
		{"down", codes.Unavailable},
	} {
		_, err := c.Do(x, &synodpb.Request{ClientId: 1, Seq: 1, Op: op("set", tc.key, "v")})
		st := status.Convert(err)
		if st.Code() != tc.code || !strings.Contains(st.Message(), "outcome") || !strings.Contains(st.Message(), "unknown") {
			t.Errorf("%s: got %v %q, want %v saying the outcome is unknown", tc.key, st.Code(), st.Message(), tc.code)
		}
	}
	// The caller's cancellation.
	cx, cancel := context.WithCancel(x)
	b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		cancel()
		<-ctx.Done()
		return ctx.Err()
	})
	if _, err := c.Do(cx, &synodpb.Request{Op: op("set", "k", "v")}); status.Code(err) != codes.Canceled {
		t.Errorf("cancelled call: %v", err)
	}
	// Close cancels requests in flight; their callers learn the outcome is unknown.
	entered := make(chan struct{})
	b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		close(entered)
		<-ctx.Done()
		return ctx.Err()
	})
	s.opts.RequestTimeout = time.Minute
	errc := make(chan error, 1)
	go func() {
		_, err := c.Do(x, &synodpb.Request{Op: op("set", "k", "v")})
		errc <- err
	}()
	<-entered
	go s.Close()
	err := <-errc
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "unknown") {
		t.Errorf("request in flight at Close: %v", err)
	}
}

func TestPassword(t *testing.T) {
	b := gatewaytest.KV()
	_, c := start(t, b, Options{Password: "s3cret"})
	x := ctx(t)
	for _, pw := range []string{"", "wrong"} {
		cx := x
		if pw != "" {
			cx = metadata.AppendToOutgoingContext(x, synodpb.PasswordKey, pw)
		}
		if _, err := c.Do(cx, &synodpb.Request{Op: op("set", "k", "v")}); status.Code(err) != codes.Unauthenticated {
			t.Errorf("Do with password %q: %v", pw, err)
		}
		if _, err := c.Namespaces(cx, &synodpb.NamespacesRequest{}); status.Code(err) != codes.Unauthenticated {
			t.Errorf("Namespaces with password %q: %v", pw, err)
		}
	}
	if n := len(b.Log()); n != 0 {
		t.Fatalf("unauthenticated requests reached the backend: %d", n)
	}
	cx := metadata.AppendToOutgoingContext(x, synodpb.PasswordKey, "s3cret")
	if _, err := c.Do(cx, &synodpb.Request{Op: op("set", "k", "v")}); err != nil {
		t.Fatalf("with the password: %v", err)
	}
}

func TestNamespacesAndInfo(t *testing.T) {
	_, c := start(t, twoNamespaces(), Options{})
	x := ctx(t)
	resp, err := c.Namespaces(x, &synodpb.NamespacesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ns := range resp.GetNamespaces() {
		got = append(got, fmt.Sprintf("%s/%s/%s/%s/%v", ns.Name, ns.Protocol, ns.Service, ns.Consistency, ns.IdempotentRetry))
	}
	want := []string{"default/abd/kv/linearizable/false", "hits/memory/counter//false"}
	if !slices.Equal(got, want) {
		t.Errorf("namespaces %v, want %v", got, want)
	}
	info, err := c.Info(x, &synodpb.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Sections["memory"].GetFields()["backend"] != "memory" || info.Sections["grpc"].GetFields()["namespaces"] != "default,hits" {
		t.Errorf("info: %v", info.Sections)
	}
}
