package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/gateway/grpcserver"
	"github.com/synod-dev/synod/service"

	_ "github.com/synod-dev/synod/protocol/esds" // declares the request options the tests send
)

// dedupProto stands for a protocol with a replicated deduplication table:
// the gRPC client may retry its writes at another node.
type dedupProto struct{}

func (dedupProto) Name() string { return "test-grpc-dedup" }
func (dedupProto) New(automaton.Config) (automaton.Automaton, error) {
	return nil, errors.New("test only")
}
func (dedupProto) IdempotentRetry() bool { return true }

// RequestOptions declares an assigned option, to show that a retry carries
// the value assigned from its (unchanged) request id.
func (dedupProto) RequestOptions() []automaton.OptionSpec {
	return []automaton.OptionSpec{{Name: "tag", Type: automaton.OptString,
		Assign: func(id automaton.RequestID) []string { return []string{fmt.Sprintf("t%d-%d", id.Client, id.Seq)} }}}
}

// atomicProto stands for a protocol that applies atomic groups.
type atomicProto struct{}

func (atomicProto) Name() string { return "test-grpc-atomic" }
func (atomicProto) New(automaton.Config) (automaton.Automaton, error) {
	return nil, errors.New("test only")
}
func (atomicProto) IdempotentRetry() bool { return false }
func (atomicProto) Transactions() automaton.TxnSupport {
	return automaton.TxnSupport{Atomic: true}
}

func init() {
	automaton.Register(dedupProto{})
	automaton.Register(atomicProto{})
}

// groupBackend is a MemBackend that also answers atomic groups, applying a
// group's operations in order under one lock to a KV state of its own, as
// a protocol that honours groups would; abort, when set, answers every
// group with that error instead.
type groupBackend struct {
	*gatewaytest.MemBackend

	mu     sync.Mutex
	state  service.State
	groups []automaton.Request
	abort  string
}

func newGroupBackend(nss ...config.Namespace) *groupBackend {
	kv, err := service.Lookup("kv")
	if err != nil {
		panic(err)
	}
	return &groupBackend{MemBackend: gatewaytest.New(nss...), state: kv.NewState()}
}

func (g *groupBackend) Do(ctx context.Context, ns string, req automaton.Request) (automaton.Response, error) {
	if len(req.Ops) == 0 {
		return g.MemBackend.Do(ctx, ns, req)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.groups = append(g.groups, req)
	if g.abort != "" {
		return automaton.Response{ID: req.ID, Result: service.Errorf("%s", g.abort)}, nil
	}
	return automaton.Response{ID: req.ID, Result: service.OK(), Results: automaton.ApplyGroup(g.state, req.Ops, req.Env)}, nil
}

type gnode struct {
	addr string
	b    *gatewaytest.MemBackend
	s    *grpcserver.Server
	done chan error
	once sync.Once
}

// tryAgainBackend answers every request "TRYAGAIN no quorum".
type tryAgainBackend struct {
	*gatewaytest.MemBackend
	calls atomic.Int64
}

func (b *tryAgainBackend) Do(ctx context.Context, ns string, req automaton.Request) (automaton.Response, error) {
	b.calls.Add(1)
	return automaton.Response{ID: req.ID, Result: service.Errorf("TRYAGAIN no quorum")}, nil
}

func startGRPC(t testing.TB, b *gatewaytest.MemBackend, opts grpcserver.Options) *gnode {
	t.Helper()
	return startGRPCOver(t, b, b, opts)
}

// startGRPCOver serves backend; mem is the backend whose log tests read.
func startGRPCOver(t testing.TB, backend gateway.Backend, b *gatewaytest.MemBackend, opts grpcserver.Options) *gnode {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &gnode{addr: l.Addr().String(), b: b, s: grpcserver.New(backend, opts), done: make(chan error, 1)}
	go func() { n.done <- n.s.Serve(l) }()
	t.Cleanup(n.stop)
	return n
}

func (n *gnode) stop() {
	n.once.Do(func() {
		n.s.Close()
		<-n.done
	})
}

func newGRPC(t testing.TB, addrs []string, opts Options) *GRPC {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Second
	}
	c, err := NewGRPC(addrs, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func tctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func kvNS(protocol string) *gatewaytest.MemBackend {
	return gatewaytest.New(
		config.Namespace{Name: "default", Protocol: protocol, Service: "kv"},
		config.Namespace{Name: "hits", Protocol: protocol, Service: "counter"},
	)
}

// assigned is the op id ESDS assigns to a request that carries none.
func assigned(id automaton.RequestID) string { return fmt.Sprintf("%016x-%d", id.Client, id.Seq) }

func TestGRPCTypedMethodsAndOptions(t *testing.T) {
	n := startGRPC(t, kvNS("esds"), grpcserver.Options{})
	c := newGRPC(t, []string{n.addr}, Options{ReadMode: automaton.ReadRegular})
	x := tctx(t)

	if err := c.Set(x, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := c.Get(x, "k"); err != nil || !ok || string(v) != "v" {
		t.Fatalf("Get = %q %v %v", v, ok, err)
	}
	if _, ok, err := c.Get(x, "missing"); err != nil || ok {
		t.Fatalf("Get(missing) found=%v err=%v", ok, err)
	}
	if ok, err := c.SetNX(x, "k", []byte("w")); err != nil || ok {
		t.Fatalf("SetNX on an existing key = %v %v", ok, err)
	}
	if ok, err := c.SetNX(x, "new", []byte("w")); err != nil || !ok {
		t.Fatalf("SetNX on a new key = %v %v", ok, err)
	}
	if v, err := c.IncrBy(x, "n", 5); err != nil || v != 5 {
		t.Fatalf("IncrBy = %d %v", v, err)
	}
	if v, err := c.Incr(x, "n"); err != nil || v != 6 {
		t.Fatalf("Incr = %d %v", v, err)
	}
	if v, err := c.Append(x, "k", []byte("xy")); err != nil || v != 3 {
		t.Fatalf("Append = %d %v", v, err)
	}
	if v, err := c.Exists(x, "k", "n", "nope"); err != nil || v != 2 {
		t.Fatalf("Exists = %d %v", v, err)
	}
	if v, err := c.Del(x, "k", "nope"); err != nil || v != 1 {
		t.Fatalf("Del = %d %v", v, err)
	}
	// A service-level error is a *Error with its code.
	_, err := c.Incr(x, "new")
	var e *Error
	if !errors.As(err, &e) || e.Code() != "ERR" || !strings.Contains(e.Msg, "not an integer") || errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("Incr of a non-integer: %v", err)
	}

	// One client id; sequence numbers 1, 2, 3, ... (typed methods send one
	// request per key). The client's read mode reaches every request, and
	// each gets ESDS's assigned op id.
	log := n.b.Log()
	for i, r := range log {
		if r.Req.ID.Client != c.ClientID() || r.Req.ID.Seq != uint64(i+1) {
			t.Errorf("request %d has id %v, want %x:%d", i, r.Req.ID, c.ClientID(), i+1)
		}
		if r.Req.Opts.Read != automaton.ReadRegular || r.Req.Opts.String(automaton.OptOpID) != assigned(r.Req.ID) || len(r.Req.Opts.Ext) != 1 {
			t.Errorf("request %d options %+v", i, r.Req.Opts)
		}
	}

	// DoOp: another namespace, explicit read mode and ESDS options, op id echoed.
	res, id, err := c.DoOp(x, "hits", service.Op{Kind: "add", Args: [][]byte{[]byte("3")}},
		OpOptions{Read: automaton.ReadLocal, OpID: "a1", Prev: []string{"p1", "p2"}, Strict: true})
	if err != nil || !res.Equal(service.Int(3)) || id != "a1" {
		t.Fatalf("DoOp add = %v %q %v", res, id, err)
	}
	r := n.b.Log()[len(n.b.Log())-1]
	if r.NS != "hits" || r.Req.Opts.Read != automaton.ReadLocal || r.Req.Opts.String(automaton.OptOpID) != "a1" ||
		!slices.Equal(r.Req.Opts.Get(automaton.OptPrev), []string{"p1", "p2"}) || !r.Req.Opts.Bool(automaton.OptStrict) {
		t.Fatalf("DoOp reached the backend as %s %+v", r.NS, r.Req.Opts)
	}
	res, id, err = c.DoOp(x, "hits", service.Op{Kind: "read"}, OpOptions{Prev: []string{"a1"}})
	r = n.b.Log()[len(n.b.Log())-1]
	if err != nil || !res.Equal(service.Int(3)) || id != assigned(r.Req.ID) || r.Req.Opts.Bool(automaton.OptStrict) || r.Req.Opts.Read != automaton.ReadRegular {
		t.Fatalf("DoOp read = %v %q %v; backend saw %+v", res, id, err, r.Req.Opts)
	}
	// The same options through Ext, by name: a bool as "on", a list.
	res, id, err = c.DoOp(x, "hits", service.Op{Kind: "read"},
		OpOptions{Ext: map[string][]string{automaton.OptOpID: {"a2"}, automaton.OptPrev: {"a1", "x"}, automaton.OptStrict: {"on"}}})
	r = n.b.Log()[len(n.b.Log())-1]
	if err != nil || !res.Equal(service.Int(3)) || id != "a2" || !slices.Equal(r.Req.Opts.Get(automaton.OptPrev), []string{"a1", "x"}) ||
		!slices.Equal(r.Req.Opts.Get(automaton.OptStrict), []string{"1"}) {
		t.Fatalf("DoOp with Ext = %v %q %v; backend saw %+v", res, id, err, r.Req.Opts)
	}
	// A result error from DoOp is the result, not an error.
	res, _, err = c.DoOp(x, "", service.Op{Kind: "incr", Key: "new", Args: [][]byte{[]byte("1")}}, OpOptions{})
	if err != nil || res.Type != service.ResultErr {
		t.Fatalf("DoOp incr of a non-integer: %v %v", res, err)
	}
	nss, err := c.Namespaces(x)
	if err != nil || len(nss) != 2 || nss[1].GetService() != "counter" {
		t.Fatalf("Namespaces = %v %v", nss, err)
	}
}

func TestGRPCErrorCodesAuthAndLimits(t *testing.T) {
	n := startGRPC(t, kvNS("esds"), grpcserver.Options{Password: "pw"})
	x := tctx(t)

	bad := newGRPC(t, []string{n.addr}, Options{Password: "nope"})
	if err := bad.Set(x, "k", []byte("v")); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("wrong password: %v", err)
	}
	none := newGRPC(t, []string{n.addr}, Options{})
	if _, _, err := none.Get(x, "k"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no password: %v", err)
	}
	c := newGRPC(t, []string{n.addr}, Options{Password: "pw"})
	if _, _, err := c.DoOp(x, "nope", service.Op{Kind: "get", Key: "k"}, OpOptions{}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown namespace: %v", err)
	}
	if _, _, err := c.DoOp(x, "", service.Op{Kind: "frob", Key: "k"}, OpOptions{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("unknown op: %v", err)
	}
	if _, _, err := c.DoOp(x, "", service.Op{Kind: "get", Key: "k"}, OpOptions{OpID: "0000000000000001-1"}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("reserved op id: %v", err)
	}
	if _, _, err := c.DoOp(x, "", service.Op{Kind: "get", Key: "k"}, OpOptions{Ext: map[string][]string{"color": {"red"}}}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"color"`) {
		t.Fatalf("unknown option: %v", err)
	}
	// A shorthand and the same Ext entry: refused before sending.
	_, _, err := c.DoOp(x, "", service.Op{Kind: "get", Key: "k"}, OpOptions{Strict: true, Ext: map[string][]string{automaton.OptStrict: {"off"}}})
	if err == nil || status.Code(err) != codes.Unknown || !strings.Contains(err.Error(), "option strict set twice") {
		t.Fatalf("shorthand and Ext entry: %v", err)
	}
	// The largest value goes both ways; a message over the limit is refused
	// before it is sent.
	big := bytes.Repeat([]byte{7}, service.MaxValueSize)
	if err := c.Set(x, "big", big); err != nil {
		t.Fatalf("Set of %d bytes: %v", len(big), err)
	}
	if v, ok, err := c.Get(x, "big"); err != nil || !ok || !bytes.Equal(v, big) {
		t.Fatalf("Get of the big value: %v", err)
	}
	if err := c.Set(x, "bigger", make([]byte, synodpb.MaxMessageSize)); status.Code(err) != codes.ResourceExhausted || errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("oversized Set: %v", err)
	}
	if got := len(n.b.Log()); got != 2 {
		t.Errorf("backend saw %d requests, want 2 (the big set and get)", got)
	}
}

func TestGRPCFailOver(t *testing.T) {
	x := tctx(t)
	t.Run("dead address first", func(t *testing.T) {
		n := startGRPC(t, kvNS("memory"), grpcserver.Options{})
		c := newGRPC(t, []string{deadAddr(t), n.addr}, Options{})
		if err := c.Set(x, "k", []byte("v")); err != nil {
			t.Fatalf("write with the first node down: %v (it was never sent there)", err)
		}
	})

	// Node a accepts connections but fails requests after receiving them.
	failing := func(t *testing.T, protocol string) (a, b *gnode, c *GRPC) {
		a = startGRPC(t, kvNS(protocol), grpcserver.Options{})
		b = startGRPC(t, kvNS(protocol), grpcserver.Options{})
		a.b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
			return errors.New("replica lost its disk")
		})
		return a, b, newGRPC(t, []string{a.addr, b.addr}, Options{})
	}
	t.Run("reads fail over", func(t *testing.T) {
		_, b, c := failing(t, "memory")
		b.b.Do(x, "default", automaton.Request{ID: automaton.RequestID{Client: 1, Seq: 1}, Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}})
		if v, ok, err := c.Get(x, "k"); err != nil || !ok || string(v) != "v" {
			t.Fatalf("Get = %q %v %v", v, ok, err)
		}
	})
	t.Run("writes without dedup report unknown outcome", func(t *testing.T) {
		_, b, c := failing(t, "memory")
		err := c.Set(x, "k", []byte("v"))
		if !errors.Is(err, ErrUnknownOutcome) || status.Code(err) != codes.Unavailable {
			t.Fatalf("Set = %v, want ErrUnknownOutcome with UNAVAILABLE", err)
		}
		if len(b.b.Log()) != 0 {
			t.Fatalf("the write was retried at the second node: %v", b.b.Log())
		}
	})
	t.Run("writes with dedup retry with the same id", func(t *testing.T) {
		a, b, c := failing(t, "test-grpc-dedup")
		var seen []automaton.Request
		var mu sync.Mutex
		a.b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
			mu.Lock()
			seen = append(seen, req)
			mu.Unlock()
			return errors.New("replica lost its disk")
		})
		if err := c.Set(x, "k", []byte("v")); err != nil {
			t.Fatalf("Set = %v", err)
		}
		log := b.b.Log()
		if len(seen) != 1 || len(log) != 1 || log[0].Req.ID != seen[0].ID ||
			log[0].Req.Opts.String("tag") != fmt.Sprintf("t%d-%d", seen[0].ID.Client, seen[0].ID.Seq) ||
			seen[0].Opts.String("tag") != log[0].Req.Opts.String("tag") {
			t.Fatalf("first attempt %v, retry %v: want one retry with the same request id and assigned option", seen, log)
		}
		// The client now prefers b.
		c.Set(x, "k2", []byte("v"))
		if len(seen) != 1 {
			t.Errorf("the client went back to the failing node")
		}
	})
	t.Run("TRYAGAIN results", func(t *testing.T) {
		ta := &tryAgainBackend{MemBackend: kvNS("memory")}
		a := startGRPCOver(t, ta, ta.MemBackend, grpcserver.Options{})
		b := startGRPC(t, kvNS("memory"), grpcserver.Options{})
		c := newGRPC(t, []string{a.addr, b.addr}, Options{})
		err := c.Set(x, "k", []byte("v"))
		var e *Error
		if !errors.As(err, &e) || e.Code() != "TRYAGAIN" || !errors.Is(err, ErrUnknownOutcome) {
			t.Fatalf("write answered TRYAGAIN: %v", err)
		}
		if _, ok, err := c.Get(x, "k"); err != nil || ok {
			t.Fatalf("read answered TRYAGAIN at the first node: %v %v (want a retry at the second)", ok, err)
		}
		if ta.calls.Load() != 2 || len(b.b.Log()) != 1 {
			t.Fatalf("first node saw %d requests, second %d; want 2 and 1 (the read's retry)", ta.calls.Load(), len(b.b.Log()))
		}
	})
	t.Run("node stopped between requests", func(t *testing.T) {
		a := startGRPC(t, kvNS("memory"), grpcserver.Options{})
		b := startGRPC(t, kvNS("memory"), grpcserver.Options{})
		c := newGRPC(t, []string{a.addr, b.addr}, Options{})
		if err := c.Set(x, "k", []byte("1")); err != nil || len(a.b.Log()) != 1 {
			t.Fatalf("first write: %v", err)
		}
		a.stop()
		if err := c.Set(x, "k", []byte("2")); err != nil {
			t.Fatalf("write after the first node stopped: %v (the connection was gone before it was sent)", err)
		}
		if len(b.b.Log()) != 1 {
			t.Fatalf("second node saw %d requests", len(b.b.Log()))
		}
	})
	t.Run("node stops during a write", func(t *testing.T) {
		a := startGRPC(t, kvNS("memory"), grpcserver.Options{})
		b := startGRPC(t, kvNS("memory"), grpcserver.Options{})
		entered := make(chan struct{})
		a.b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
			close(entered)
			<-ctx.Done()
			return ctx.Err()
		})
		c := newGRPC(t, []string{a.addr, b.addr}, Options{})
		go func() { <-entered; a.stop() }()
		if err := c.Set(x, "k", []byte("v")); !errors.Is(err, ErrUnknownOutcome) {
			t.Fatalf("write cut short by shutdown: %v, want ErrUnknownOutcome", err)
		}
		if len(b.b.Log()) != 0 {
			t.Fatal("the write was retried elsewhere")
		}
	})
	t.Run("node restarts at the same address", func(t *testing.T) {
		mem := kvNS("memory")
		a := startGRPC(t, mem, grpcserver.Options{})
		c := newGRPC(t, []string{a.addr}, Options{Timeout: 2 * time.Second})
		if err := c.Set(x, "k", []byte("1")); err != nil {
			t.Fatal(err)
		}
		a.stop()
		if err := c.Set(x, "k", []byte("2")); err == nil || errors.Is(err, ErrUnknownOutcome) {
			t.Fatalf("write while the only node is down: %v, want a plain failure (never sent)", err)
		}
		l, err := net.Listen("tcp", a.addr)
		if err != nil {
			t.Skipf("cannot listen on %s again: %v", a.addr, err)
		}
		s := grpcserver.New(mem, grpcserver.Options{})
		go s.Serve(l)
		defer s.Close()
		t0 := time.Now()
		if err := c.Set(x, "k", []byte("3")); err != nil {
			t.Fatalf("write after the node came back: %v", err)
		}
		if d := time.Since(t0); d > time.Second {
			t.Errorf("reconnecting took %v: the client waited for gRPC's backoff", d)
		}
	})
	t.Run("all down", func(t *testing.T) {
		c := newGRPC(t, []string{deadAddr(t), deadAddr(t)}, Options{})
		err := c.Set(x, "k", []byte("v"))
		if err == nil || errors.Is(err, ErrUnknownOutcome) || !strings.Contains(err.Error(), "every address") {
			t.Fatalf("Set with every node down: %v", err)
		}
	})
}

func TestGRPCGroups(t *testing.T) {
	b := newGroupBackend(
		config.Namespace{Name: "default", Protocol: "test-grpc-atomic", Service: "kv"},
		config.Namespace{Name: "ev", Protocol: "esds", Service: "kv"},
	)
	n := startGRPCOver(t, b, b.MemBackend, grpcserver.Options{})
	c := newGRPC(t, []string{n.addr}, Options{})
	x := tctx(t)
	op := func(kind, key string, args ...string) service.Op {
		o := service.Op{Kind: kind, Key: key}
		for _, a := range args {
			o.Args = append(o.Args, []byte(a))
		}
		return o
	}

	res, err := c.DoGroup(x, "", []service.Op{op("set", "k", "1"), op("incr", "k", "2"), op("append", "k", "x"), op("incr", "k", "1"), op("get", "k")}, OpOptions{})
	want := []service.Result{service.OK(), service.Int(3), service.Int(2), service.Errorf("ERR value is not an integer or out of range"), service.Bytes([]byte("3x"))}
	if err != nil || len(res) != len(want) {
		t.Fatalf("DoGroup = %v, %v; want %v", res, err, want)
	}
	for i := range want {
		if !res[i].Equal(want[i]) {
			t.Errorf("result %d: %v, want %v", i, res[i], want[i])
		}
	}
	b.mu.Lock()
	if len(b.groups) != 1 || len(b.groups[0].Ops) != 5 || b.groups[0].ID.Client != c.ClientID() {
		t.Errorf("backend received groups %+v", b.groups)
	}
	b.abort = "EXECABORT transaction aborted"
	b.mu.Unlock()

	// A group refused or aborted as a whole is an error.
	_, err = c.DoGroup(x, "", []service.Op{op("set", "k", "1")}, OpOptions{})
	var e *Error
	if !errors.As(err, &e) || e.Code() != "EXECABORT" || errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("aborted group: %v", err)
	}
	// A protocol without atomic groups: FAILED_PRECONDITION, nothing sent on.
	_, err = c.DoGroup(x, "ev", []service.Op{op("set", "k", "1"), op("get", "k")}, OpOptions{})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), fmt.Sprintf(automaton.ErrNoAtomic, "esds")) {
		t.Fatalf("group on esds: %v", err)
	}
	if _, err := c.DoGroup(x, "", nil, OpOptions{}); err == nil {
		t.Fatal("empty group accepted")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.groups) != 2 || len(b.MemBackend.Log()) != 0 {
		t.Errorf("backend received %d groups and %d single requests, want 2 and 0", len(b.groups), len(b.MemBackend.Log()))
	}
}
