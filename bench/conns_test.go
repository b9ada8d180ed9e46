package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synod-dev/synod/service"
)

func TestParseConnSpec(t *testing.T) {
	for _, c := range []struct {
		in    string
		spec  ConnSpec
		conns int // for 256 clients
	}{
		{"per-client", PerClient, 256},
		{"", PerClient, 256},
		{"1", ConnSpec{Shared: 1}, 1},
		{"16", ConnSpec{Shared: 16}, 16},
		{"1000", ConnSpec{Shared: 1000}, 256},
		{"pipeline:16", ConnSpec{Depth: 16}, 16},
		{"pipeline:100", ConnSpec{Depth: 100}, 3},
		{"pipeline:1", ConnSpec{Depth: 1}, 256},
	} {
		s, err := ParseConnSpec(c.in)
		if err != nil || s != c.spec {
			t.Errorf("ParseConnSpec(%q) = %+v, %v; want %+v", c.in, s, err, c.spec)
			continue
		}
		if got := s.Conns(256); got != c.conns {
			t.Errorf("%q: Conns(256) = %d, want %d", c.in, got, c.conns)
		}
		if back, err := ParseConnSpec(s.String()); err != nil || back != s {
			t.Errorf("%q: String %q does not parse back (%+v, %v)", c.in, s.String(), back, err)
		}
	}
	for _, bad := range []string{"0", "-1", "x", "pipeline:", "pipeline:0", "pipeline:x", "per-conn"} {
		if _, err := ParseConnSpec(bad); err == nil {
			t.Errorf("ParseConnSpec(%q) accepted", bad)
		}
	}
}

// countTarget is a concurrency-safe fake target that counts its uses.
type countTarget struct {
	id     int
	addr   string
	ops    atomic.Int64
	fail   atomic.Bool
	closed atomic.Bool
}

func (c *countTarget) Do(context.Context, service.Op) (service.Result, error) {
	c.ops.Add(1)
	if c.fail.Load() {
		return service.Result{}, errors.New("connection lost")
	}
	return service.OK(), nil
}

func (c *countTarget) Close() error { c.closed.Store(true); return nil }

func TestShareConns(t *testing.T) {
	var mu sync.Mutex
	var opened []*countTarget
	open := func(_ context.Context, addr string, client int) (Target, error) {
		mu.Lock()
		defer mu.Unlock()
		ct := &countTarget{id: len(opened), addr: addr}
		opened = append(opened, ct)
		return ct, nil
	}
	f := ShareConns(4, open)
	ctx := context.Background()
	addrs := []string{"a", "b"}
	var hs []Target
	for i := 0; i < 10; i++ {
		h, err := f(ctx, addrs[i%2], i)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		h.Do(ctx, service.Op{Kind: "get", Key: "k"})
	}
	if len(opened) != 4 {
		t.Fatalf("10 clients over 4 shared connections opened %d", len(opened))
	}
	for j, ct := range opened {
		// Clients j, j+4, j+8 share connection j, opened with client j's address.
		want := int64(len(seq(j, 10, 4)))
		if ct.ops.Load() != want || ct.addr != addrs[j%2] {
			t.Errorf("connection %d: %d ops at %s, want %d at %s", j, ct.ops.Load(), ct.addr, want, addrs[j%2])
		}
	}
	// A failure breaks connection 1 for its clients 1, 5, 9.
	opened[1].fail.Store(true)
	if _, err := hs[5].Do(ctx, service.Op{Kind: "get"}); err == nil {
		t.Fatal("failure not passed on")
	}
	hs[5].Close()
	if opened[1].closed.Load() {
		t.Fatal("connection closed while clients 1 and 9 still hold it")
	}
	h5, err := f(ctx, "b", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(opened) != 5 {
		t.Fatalf("reconnecting after the failure did not open a replacement (%d opened)", len(opened))
	}
	h5.Do(ctx, service.Op{Kind: "get"})
	if opened[4].ops.Load() != 1 {
		t.Fatal("the reconnected client does not use the replacement")
	}
	h1, _ := f(ctx, "b", 9) // client 9 reconnects too: shares the replacement
	if len(opened) != 5 {
		t.Fatal("a second client reconnecting opened another replacement")
	}
	hs[1].Close()
	hs[9].Close()
	hs[9].Close() // twice: counted once
	if !opened[1].closed.Load() {
		t.Fatal("broken connection not closed with its last handle")
	}
	h5.Close()
	if opened[4].closed.Load() {
		t.Fatal("replacement closed while client 9's new handle holds it")
	}
	h1.Close()
	if !opened[4].closed.Load() {
		t.Fatal("replacement not closed with its last handle")
	}
}

func seq(from, to, step int) []int {
	var out []int
	for i := from; i < to; i += step {
		out = append(out, i)
	}
	return out
}

func TestWithConns(t *testing.T) {
	plain := func(context.Context, string, int) (Target, error) { return &countTarget{}, nil }
	if _, err := WithConns(ConnSpec{Depth: 4}, 8, plain, nil); err == nil {
		t.Error("pipelining accepted for a target without a pipelined connection")
	}
	f, err := WithConns(PerClient, 8, plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := f(context.Background(), "x", 0)
	b, _ := f(context.Background(), "x", 0)
	if a == b {
		t.Error("per-client connections shared")
	}
}

// TestPipelinedRedis: many clients on one pipelined connection each get
// their own reply, and the run opens clients/depth connections.
func TestPipelinedRedis(t *testing.T) {
	s := newFakeServer(t)
	ctx := context.Background()
	p, err := NewPipelinedRedis(ctx, s.addr(), RedisOptions{Namespace: "ns1", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				k := fmt.Sprintf("k%d-%d", g, i)
				v := []byte("v" + k)
				if r, err := p.Do(ctx, service.Op{Kind: "set", Key: k, Args: [][]byte{v}}); err != nil || r.Type != service.ResultOK {
					errs <- fmt.Errorf("set %s: %v %v", k, r, err)
					return
				}
				v[0] = 'X' // the buffer is the caller's again
				r, err := p.Do(ctx, service.Op{Kind: "get", Key: k})
				if err != nil || string(r.Bytes) != "v"+k {
					errs <- fmt.Errorf("get %s: %q %v", k, r.Bytes, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(s.setup); n != 1 || len(s.setup[0]) != 1 || s.setup[0][0] != "SYNOD NS ns1" {
		t.Errorf("connections and setup: %q", s.setup)
	}
	p.Close()
	if _, err := p.Do(ctx, service.Op{Kind: "get", Key: "k"}); err == nil {
		t.Error("Do after Close succeeded")
	}
}

// TestPipelinedRedisFailure: a dropped connection fails every command
// outstanding on it, and the run reconnects.
func TestPipelinedRedisFailure(t *testing.T) {
	s := newFakeServer(t)
	s.inject = func(name string, n int) string {
		if name == "SET" && n == 3 {
			return "close"
		}
		return ""
	}
	cfg := DefaultConfig()
	cfg.Addrs = []string{s.addr()}
	cfg.Clients = 8
	cfg.Ops = 200
	cfg.Keys = 10
	cfg.NewTarget = ShareConns(ConnSpec{Depth: 4}.Conns(cfg.Clients), PipelinedRedisFactory(RedisOptions{Timeout: 5 * time.Second}))
	rep, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.All.Errors == 0 || rep.Reconnects == 0 {
		t.Errorf("a dropped pipelined connection: %d errors, %d reconnects", rep.All.Errors, rep.Reconnects)
	}
	if got := rep.All.Count + rep.All.Errors; got != 200 {
		t.Errorf("%d operations accounted for, want 200", got)
	}
	if n := len(s.setup); n < 3 {
		t.Errorf("%d connections: want 2 pipelined connections and at least one replacement", n)
	}
}
