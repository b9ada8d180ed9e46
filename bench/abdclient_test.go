package bench

import (
	"context"
	"io"
	"math"
	"math/rand"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/synod-dev/synod/check"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/gateway/grpcserver"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/protocol/abd"
)

// abdReplicas serves n real ABD automata over gRPC, each on its own
// (client-driven phases need no peer), and returns their addresses.
func abdReplicas(t *testing.T, n int) ([]string, []*gatewaytest.AutomatonBackend) {
	t.Helper()
	var addrs []string
	var backs []*gatewaytest.AutomatonBackend
	for range n {
		b := gatewaytest.MustAutomaton(t, "abd", "kv")
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := grpcserver.New(b, grpcserver.Options{})
		done := make(chan error, 1)
		go func() { done <- s.Serve(l) }()
		t.Cleanup(func() { s.Close(); <-done })
		addrs, backs = append(addrs, l.Addr().String()), append(backs, b)
	}
	return addrs, backs
}

// A recorded run of client-driven ABD against three replicas: the history
// is linearizable, and the replicas saw nothing but phases.
func TestABDClientRun(t *testing.T) {
	addrs, backs := abdReplicas(t, 3)
	cfg := DefaultConfig()
	cfg.Addrs = addrs
	cfg.Ops, cfg.Clients, cfg.Keys, cfg.ReadRatio, cfg.Preload = 400, 4, 8, 0.5, true
	cfg.HistoryPath = filepath.Join(t.TempDir(), "h.json")
	cfg.UseABDClient(false)
	rep, err := Run(context.Background(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Config.Target != TargetABDClient || rep.All.Count != 400 || rep.All.Errors != 0 {
		t.Fatalf("target %s, %d operations, %d errors (%v); want %s, 400, 0", rep.Config.Target, rep.All.Count, rep.All.Errors, rep.ErrorSamples, TargetABDClient)
	}
	h, err := history.Load(cfg.HistoryPath)
	if err != nil {
		t.Fatal(err)
	}
	r, err := check.Linearizable(h, check.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Result != check.Ok {
		t.Fatalf("client-driven ABD history: %s", r)
	}
	for i, b := range backs {
		if len(b.Log()) == 0 {
			t.Fatalf("replica %d received nothing", i)
		}
		for _, req := range b.Log() {
			if req.Opts.String(abd.OptPhase) == "" {
				t.Fatalf("replica %d received a request that is not a phase: %v", i, req.Op)
			}
		}
	}
}

func TestUniformSchedule(t *testing.T) {
	const rate, n = 50.0, 100000
	u := newArrivals(ArrivalsUniform, rate, rand.New(rand.NewSource(3)))
	var prev time.Duration
	var sum, sumSq float64
	for i := 0; i < n; i++ {
		at := u.next()
		gap := (at - prev).Seconds()
		prev = at
		if gap < 0 || gap > 2/rate+1e-9 {
			t.Fatalf("gap %v s outside [0, %v]", gap, 2/rate)
		}
		sum += gap
		sumSq += gap * gap
	}
	mean := sum / n
	if math.Abs(mean*rate-1) > 0.01 {
		t.Fatalf("mean gap %v s, want %v ± 1%%", mean, 1/rate)
	}
	// Uniform on [0, 2m]: standard deviation m/sqrt(3) (exponential: m).
	if cv := math.Sqrt(sumSq/n-mean*mean) / mean; math.Abs(cv-1/math.Sqrt(3)) > 0.01 {
		t.Fatalf("gap coefficient of variation %.3f, want %.3f (uniform)", cv, 1/math.Sqrt(3))
	}
	cfg := DefaultConfig()
	cfg.Ops, cfg.Arrivals = 1, "gamma"
	if err := cfg.Validate(); err == nil {
		t.Fatal("arrivals gamma accepted")
	}
}
