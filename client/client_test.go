package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/resp"
)

type node struct {
	b    *gatewaytest.MemBackend
	s    *gateway.Server
	addr string
	done chan error
}

func startAt(t *testing.T, addr string, b *gatewaytest.MemBackend, opts gateway.ServerOptions) *node {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{b: b, s: gateway.NewServer(b, opts), addr: l.Addr().String(), done: make(chan error, 1)}
	go func() { n.done <- n.s.Serve(l) }()
	t.Cleanup(n.stop)
	return n
}

func start(t *testing.T, b *gatewaytest.MemBackend, opts gateway.ServerOptions) *node {
	return startAt(t, "127.0.0.1:0", b, opts)
}

func (n *node) stop() {
	if n.done == nil {
		return
	}
	n.s.Close()
	<-n.done
	n.done = nil
}

func newClient(t *testing.T, addrs []string, opts Options) *Client {
	t.Helper()
	c, err := New(addrs, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// deadAddr returns an address nothing listens on.
func deadAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().String()
	l.Close()
	return a
}

func TestOperations(t *testing.T) {
	n := start(t, gatewaytest.KV(), gateway.ServerOptions{})
	c := newClient(t, []string{n.addr}, Options{})
	ctx := context.Background()
	if _, found, err := c.Get(ctx, "k"); found || err != nil {
		t.Fatalf("Get missing: %v %v", found, err)
	}
	if err := c.Set(ctx, "k", []byte("v\x00\r\n")); err != nil {
		t.Fatal(err)
	}
	if v, found, err := c.Get(ctx, "k"); !found || err != nil || string(v) != "v\x00\r\n" {
		t.Fatalf("Get: %q %v %v", v, found, err)
	}
	if ok, err := c.SetNX(ctx, "k", []byte("x")); ok || err != nil {
		t.Fatalf("SetNX existing: %v %v", ok, err)
	}
	if ok, err := c.SetNX(ctx, "new", []byte("x")); !ok || err != nil {
		t.Fatalf("SetNX new: %v %v", ok, err)
	}
	if n, err := c.Exists(ctx, "k", "new", "nope"); n != 2 || err != nil {
		t.Fatalf("Exists: %d %v", n, err)
	}
	if v, err := c.Incr(ctx, "ctr"); v != 1 || err != nil {
		t.Fatalf("Incr: %d %v", v, err)
	}
	if v, err := c.IncrBy(ctx, "ctr", -11); v != -10 || err != nil {
		t.Fatalf("IncrBy: %d %v", v, err)
	}
	if v, err := c.Append(ctx, "new", []byte("yz")); v != 3 || err != nil {
		t.Fatalf("Append: %d %v", v, err)
	}
	if v, err := c.Del(ctx, "k", "new", "nope"); v != 2 || err != nil {
		t.Fatalf("Del: %d %v", v, err)
	}
	if _, err := c.Incr(ctx, "ctr2"); err != nil {
		t.Fatal(err)
	}
	c.Set(ctx, "text", []byte("abc"))
	_, err := c.Incr(ctx, "text")
	var e *Error
	if !errors.As(err, &e) || e.Code() != "ERR" || e.Msg != "ERR value is not an integer or out of range" || errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("Incr of text: %v", err)
	}
	r, err := c.Do(ctx, "MGET", "text", "nope")
	if err != nil || r.String() != "1) \"abc\"\n2) (nil)" {
		t.Fatalf("Do MGET: %s %v", r, err)
	}
	if _, err := c.Do(ctx, "SYNOD", "NS", "other"); err == nil || !strings.Contains(err.Error(), "use Options") {
		t.Fatalf("Do SYNOD NS other: %v", err)
	}
	if r, err := c.Do(ctx, "SYNOD", "NS"); err != nil || string(r.Str) != "default" {
		t.Fatalf("Do SYNOD NS: %s %v", r, err)
	}
}

func TestOptionsPrepareConnections(t *testing.T) {
	b := gatewaytest.New(
		config.Namespace{Name: "a", Protocol: "p", Service: "kv"},
		config.Namespace{Name: "b", Protocol: "p", Service: "kv"},
	)
	n := start(t, b, gateway.ServerOptions{Password: "pw"})
	ctx := context.Background()
	c := newClient(t, []string{n.addr}, Options{Namespace: "b", ReadMode: automaton.ReadRegular, Password: "pw"})
	if _, _, err := c.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	log := b.Log()
	if len(log) != 1 || log[0].NS != "b" || log[0].Req.Opts.Read != automaton.ReadRegular {
		t.Fatalf("backend saw %+v", log)
	}
	for _, o := range []struct {
		opts Options
		want string
	}{
		{Options{Password: "wrong"}, "WRONGPASS"},
		{Options{}, "NOAUTH"},
		{Options{Password: "pw", Namespace: "zzz"}, "unknown namespace 'zzz' (namespaces: a, b)"},
	} {
		c := newClient(t, []string{n.addr, n.addr}, o.opts)
		_, _, err := c.Get(ctx, "k")
		if err == nil || !strings.Contains(err.Error(), o.want) {
			t.Errorf("%+v: %v, want %q", o.opts, err, o.want)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	n := start(t, gatewaytest.KV(), gateway.ServerOptions{})
	c := newClient(t, []string{n.addr}, Options{PoolSize: 4})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				if _, err := c.Incr(ctx, "ctr"); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	v, _, err := c.Get(ctx, "ctr")
	if err != nil || string(v) != "1600" {
		t.Fatalf("counter = %q, %v; want 1600", v, err)
	}
}

func TestFailoverToNextAddress(t *testing.T) {
	n1, n2 := start(t, gatewaytest.KV(), gateway.ServerOptions{}), start(t, gatewaytest.KV(), gateway.ServerOptions{})
	ctx := context.Background()
	// A dead first address: the write was never sent, so it goes to the next.
	c := newClient(t, []string{deadAddr(t), n1.addr}, Options{})
	if err := c.Set(ctx, "k", []byte("1")); err != nil {
		t.Fatalf("Set with a dead first address: %v", err)
	}
	if len(n1.b.Log()) != 1 {
		t.Fatalf("n1 saw %d requests", len(n1.b.Log()))
	}
	// The node that answered stays preferred.
	c.Set(ctx, "k", []byte("2"))
	if len(n1.b.Log()) != 2 {
		t.Fatalf("second request did not go to n1")
	}
	// A stopped node: idle connections to it are found dead before reuse,
	// so even a write moves on cleanly.
	c2 := newClient(t, []string{n1.addr, n2.addr}, Options{})
	if _, _, err := c2.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	n1.stop()
	if _, err := c2.Incr(ctx, "x"); err != nil {
		t.Fatalf("Incr after the preferred node stopped: %v", err)
	}
	if log := n2.b.Log(); len(log) != 1 || log[0].Req.Op.Kind != "incr" {
		t.Fatalf("n2 saw %+v", log)
	}
	// Every address down.
	c3 := newClient(t, []string{deadAddr(t), deadAddr(t)}, Options{Timeout: time.Second})
	_, _, err := c3.Get(ctx, "k")
	if err == nil || !strings.Contains(err.Error(), "failed at every address") || strings.Count(err.Error(), "connection refused") != 2 {
		t.Fatalf("all down: %v", err)
	}
}

// hangUp is a fake node that reads one command and closes the connection
// without answering: the client cannot know whether it was executed.
func hangUp(t *testing.T) (addr string, seen func() []string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var cmds []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			args, err := resp.NewReader(bufio.NewReader(nc), resp.Limits{}).ReadCommand()
			if err == nil {
				mu.Lock()
				cmds = append(cmds, fmt.Sprintf("%s", args))
				mu.Unlock()
			}
			nc.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return l.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), cmds...)
	}
}

func TestBrokenConnectionAfterSend(t *testing.T) {
	ctx := context.Background()
	bad, seen := hangUp(t)
	good := start(t, gatewaytest.KV(), gateway.ServerOptions{})
	c := newClient(t, []string{bad, good.addr}, Options{})
	// A read is retried at the next node.
	if _, found, err := c.Get(ctx, "k"); err != nil || found {
		t.Fatalf("Get: %v %v", found, err)
	}
	c.prefer(0)
	// A write is not: its outcome is unknown.
	_, err := c.Incr(ctx, "k")
	if !errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("Incr over a broken connection: %v, want ErrUnknownOutcome", err)
	}
	for _, r := range good.b.Log() {
		if r.Req.Op.Kind == "incr" {
			t.Fatalf("the write was retried at another node")
		}
	}
	if got := seen(); len(got) != 2 || got[0] != "[GET k]" || got[1] != "[INCR k]" {
		t.Fatalf("hang-up node saw %q", got)
	}
}

func TestTryAgainReply(t *testing.T) {
	ctx := context.Background()
	slow := gatewaytest.KV()
	slow.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		<-ctx.Done()
		return ctx.Err()
	})
	n1 := start(t, slow, gateway.ServerOptions{RequestTimeout: 20 * time.Millisecond})
	n2 := start(t, gatewaytest.KV(), gateway.ServerOptions{})
	c := newClient(t, []string{n1.addr, n2.addr}, Options{})
	err := c.Set(ctx, "k", []byte("v"))
	var e *Error
	if !errors.Is(err, ErrUnknownOutcome) || !errors.As(err, &e) || e.Code() != "TRYAGAIN" {
		t.Fatalf("Set on a timing-out node: %v", err)
	}
	if len(n2.b.Log()) != 0 {
		t.Fatal("the write was retried at another node")
	}
	// Reads move on.
	if _, _, err := c.Get(ctx, "k"); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if len(n2.b.Log()) != 1 {
		t.Fatal("the read was not retried at the next node")
	}
}

func TestContextCancel(t *testing.T) {
	b := gatewaytest.KV()
	release := make(chan struct{})
	b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	defer close(release)
	n := start(t, b, gateway.ServerOptions{})
	c := newClient(t, []string{n.addr}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, _, err := c.Get(ctx, "k")
	if err == nil || time.Since(t0) > 5*time.Second {
		t.Fatalf("Get with a 50ms context returned %v after %v", err, time.Since(t0))
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v does not wrap context.DeadlineExceeded", err)
	}
}

func TestNew(t *testing.T) {
	if _, err := New(nil, Options{}); err == nil {
		t.Error("New without addresses succeeded")
	}
	if _, err := New([]string{"nohostport"}, Options{}); err == nil {
		t.Error("New with a bad address succeeded")
	}
	c, _ := New([]string{"127.0.0.1:1"}, Options{})
	c.Close()
	if _, _, err := c.Get(context.Background(), "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
}

func TestDoRefusesConnectionState(t *testing.T) {
	// Pooled connections are shared: a command that sets per-connection
	// state (including a request option, SYNOD OPT) would leak into other
	// requests. Showing and listing are fine.
	n := start(t, gatewaytest.KV(), gateway.ServerOptions{})
	c := newClient(t, []string{n.addr}, Options{})
	ctx := context.Background()
	for _, cmd := range [][]string{
		{"SELECT", "1"}, {"synod", "ns", "default"}, {"SYNOD", "READ", "local"},
		{"SYNOD", "OPT", "strict", "on"}, {"synod", "opt", "prev", "a", "b"}, {"SYNOD", "OPTRESET"}, {"SYNOD", "OPTRESET", "prev"},
		{"SYNOD", "STRICT", "on"}, {"SYNOD", "OPID", "x"}, {"SYNOD", "PREV"}, {"SYNOD", "PREV", "a"},
	} {
		if _, err := c.Do(ctx, cmd...); err == nil || !strings.Contains(err.Error(), "changes the connection's state") {
			t.Errorf("%v: %v, want refused", cmd, err)
		}
	}
	for _, cmd := range [][]string{{"SYNOD", "OPT"}, {"SYNOD", "OPT", "strict"}, {"SYNOD", "STRICT"}, {"SYNOD", "LASTOPT", "opid"}, {"SYNOD", "NS"}} {
		if _, err := c.Do(ctx, cmd...); err != nil && strings.Contains(err.Error(), "changes the connection's state") {
			t.Errorf("%v refused: %v", cmd, err)
		}
	}
}
