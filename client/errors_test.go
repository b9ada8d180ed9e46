package client

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/gateway/grpcserver"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// kindBackend answers a request whose key starts with "answer:" with the
// error text after it, as a protocol answers (a result), and runs every
// other request on the memory backend.
type kindBackend struct {
	*gatewaytest.MemBackend
}

func (b kindBackend) Do(ctx context.Context, ns string, req automaton.Request) (automaton.Response, error) {
	if text, ok := strings.CutPrefix(req.Op.Key, "answer:"); ok {
		return automaton.Response{ID: req.ID, Result: service.Errorf("%s", text)}, nil
	}
	return b.MemBackend.Do(ctx, ns, req)
}

// TestTypedErrorsReachClients: a protocol's TRYAGAIN, MOVED, CLUSTERDOWN
// and the service's WRONGTYPE reach go-redis with their Redis code, and
// Client (RESP) and GRPC as errors of their kind (errors.Is); the gRPC
// edge's refusals (invalid operation, unknown namespace, no password)
// reach GRPC as theirs, with their status code kept. It fails if a kind's
// Redis code or gRPC code, or the clients' reading of either, changes.
func TestTypedErrorsReachClients(t *testing.T) {
	mem := kvNS("paxos")
	b := kindBackend{mem}
	resp := startRESPOver(t, b, gateway.ServerOptions{})
	g := startGRPCOver(t, b, mem, grpcserver.Options{})
	ctx := tctx(t)

	rdb := redis.NewClient(&redis.Options{Addr: resp.addr, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	rc := newClient(t, []string{resp.addr}, Options{Timeout: 5 * time.Second})
	gc := newGRPC(t, []string{g.addr}, Options{})

	if err := rc.Set(ctx, "str", []byte("v")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key  string // GET of this key
		code string // the Redis code go-redis sees
		kind synoderr.Kind
	}{
		{"answer:TRYAGAIN no quorum: 1 of 3 replicas answered", "TRYAGAIN", synoderr.TryAgain},
		{"answer:MOVED 3999 127.0.0.1:7001", "MOVED", synoderr.Moved},
		{"answer:CLUSTERDOWN Hash slot 3999 not served", "CLUSTERDOWN", synoderr.ClusterDown},
		{"answer:NOPERM User u has no permissions to access the 'default' namespace", "NOPERM", synoderr.NoPerm},
		{"answer:value is not an integer or out of range", "ERR", synoderr.Generic},
	} {
		err := rdb.Get(ctx, c.key).Err()
		if err == nil || !strings.HasPrefix(err.Error(), c.code+" ") {
			t.Errorf("go-redis GET %s: %v, want a %s error", c.key, err, c.code)
		} else if k := synoderr.Parse(err.Error()).Kind; k != c.kind {
			t.Errorf("go-redis GET %s: %q reads as %v, want %v", c.key, err, k, c.kind)
		}
		if _, _, err := rc.Get(ctx, c.key); !errors.Is(err, c.kind) {
			t.Errorf("Client GET %s: %v, want kind %v", c.key, err, c.kind)
		}
		if _, _, err := gc.Get(ctx, c.key); !errors.Is(err, c.kind) {
			t.Errorf("GRPC GET %s: %v, want kind %v", c.key, err, c.kind)
		}
	}
	// A write answered TRYAGAIN: the kind and the unknown outcome.
	for name, err := range map[string]error{
		"Client": rc.Set(ctx, "answer:TRYAGAIN no quorum", []byte("x")),
		"GRPC":   gc.Set(ctx, "answer:TRYAGAIN no quorum", []byte("x")),
	} {
		if !errors.Is(err, synoderr.TryAgain) || !errors.Is(err, ErrUnknownOutcome) {
			t.Errorf("%s SET answered TRYAGAIN: %v, want kind TryAgain and ErrUnknownOutcome", name, err)
		}
	}

	// The service's own WRONGTYPE.
	if err := rdb.LPush(ctx, "str", "x").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE ") {
		t.Errorf("go-redis LPUSH on a string: %v, want WRONGTYPE", err)
	}
	if _, err := rc.Do(ctx, "LPUSH", "str", "x"); !errors.Is(err, synoderr.WrongType) {
		t.Errorf("Client LPUSH on a string: %v, want kind WrongType", err)
	}
	res, _, err := gc.DoOp(ctx, "", service.Op{Kind: "lpush", Key: "str", Args: [][]byte{[]byte("x")}}, OpOptions{})
	if err != nil || res.AsError() == nil || res.AsError().Kind != synoderr.WrongType {
		t.Errorf("GRPC lpush on a string: %v %v, want a WrongType result", res, err)
	}

	// The gRPC edge's refusals: a status of the kind's code, read back as
	// the kind.
	for _, c := range []struct {
		what string
		ns   string
		op   service.Op
		code codes.Code
		kind synoderr.Kind
	}{
		{"unknown operation", "", service.Op{Kind: "nosuch", Key: "k"}, codes.InvalidArgument, synoderr.Invalid},
		{"unknown namespace", "nope", service.Op{Kind: "get", Key: "k"}, codes.NotFound, synoderr.NotFound},
	} {
		_, _, err := gc.DoOp(ctx, c.ns, c.op, OpOptions{})
		if !errors.Is(err, c.kind) || status.Code(err) != c.code {
			t.Errorf("GRPC %s: %v (code %v), want kind %v, code %v", c.what, err, status.Code(err), c.kind, c.code)
		}
	}

	// Authentication: NOAUTH on RESP, UNAUTHENTICATED on gRPC, both NoAuth.
	aresp := startRESPOver(t, b, gateway.ServerOptions{Password: "secret"})
	ag := startGRPCOver(t, b, mem, grpcserver.Options{Password: "secret"})
	arc := newClient(t, []string{aresp.addr}, Options{Timeout: 5 * time.Second})
	if _, _, err := arc.Get(ctx, "k"); !errors.Is(err, synoderr.NoAuth) {
		t.Errorf("Client GET without the password: %v, want kind NoAuth", err)
	}
	agc := newGRPC(t, []string{ag.addr}, Options{})
	if _, _, err := agc.Get(ctx, "k"); !errors.Is(err, synoderr.NoAuth) || status.Code(err) != codes.Unauthenticated {
		t.Errorf("GRPC GET without the password: %v, want kind NoAuth, code Unauthenticated", err)
	}
}

// startRESPOver serves backend on a RESP gateway at a free loopback port.
func startRESPOver(t *testing.T, backend gateway.Backend, opts gateway.ServerOptions) *node {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{s: gateway.NewServer(backend, opts), addr: l.Addr().String(), done: make(chan error, 1)}
	go func() { n.done <- n.s.Serve(l) }()
	t.Cleanup(n.stop)
	return n
}

// countingKV is the KV service under another name, counting its
// Validate calls.
type countingKV struct {
	service.KV
	n *atomic.Int64
}

func (countingKV) Name() string { return "test-validate-count" }
func (c countingKV) Validate(op service.Op) error {
	c.n.Add(1)
	return c.KV.Validate(op)
}

var validations atomic.Int64

func init() { service.Register(countingKV{n: &validations}) }

// TestValidatedOnce: an operation is validated once on its way in,
// whichever edge it comes through (the RESP plan's check, the gRPC
// server's prepare), and the Backend is not asked to check again; an
// invalid one is refused at the edge and never reaches the Backend.
func TestValidatedOnce(t *testing.T) {
	mem := gatewaytest.New(config.Namespace{Name: "default", Protocol: "paxos", Service: "test-validate-count"})
	resp := startRESPOver(t, mem, gateway.ServerOptions{})
	g := startGRPCOver(t, mem, mem, grpcserver.Options{})
	ctx := tctx(t)
	rc := newClient(t, []string{resp.addr}, Options{Timeout: 5 * time.Second})
	gc := newGRPC(t, []string{g.addr}, Options{})

	check := func(what string, send func() error, wantErr bool, wantLog int) {
		t.Helper()
		before, logBefore := validations.Load(), len(mem.Log())
		err := send()
		if (err != nil) != wantErr {
			t.Fatalf("%s: %v", what, err)
		}
		if got := validations.Load() - before; got != 1 {
			t.Errorf("%s: validated %d times, want once", what, got)
		}
		if got := len(mem.Log()) - logBefore; got != wantLog {
			t.Errorf("%s: %d requests reached the backend, want %d", what, got, wantLog)
		}
	}
	check("RESP SYNOD OP set", func() error { _, err := rc.Do(ctx, "SYNOD", "OP", "set", "k", "v"); return err }, false, 1)
	check("RESP SYNOD OP get", func() error { _, err := rc.Do(ctx, "SYNOD", "OP", "get", "k"); return err }, false, 1)
	check("RESP invalid", func() error { _, err := rc.Do(ctx, "SYNOD", "OP", "set", "k"); return err }, true, 0)
	check("gRPC set", func() error {
		_, _, err := gc.DoOp(ctx, "", service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("w")}}, OpOptions{})
		return err
	}, false, 1)
	check("gRPC invalid", func() error {
		_, _, err := gc.DoOp(ctx, "", service.Op{Kind: "set", Key: "k"}, OpOptions{})
		if !errors.Is(err, synoderr.Invalid) {
			t.Errorf("gRPC invalid: %v, want kind Invalid", err)
		}
		return err
	}, true, 0)
}
