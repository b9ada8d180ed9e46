package seed002fastsim

import (
	"context"
	"github.com/synod-dev/synod/config"
	"testing"
	"time"

	"github.com/synod-dev/synod/bench"
	"github.com/synod-dev/synod/protocol/fastpaxos"
)

func TestConflictRates(t *testing.T) {
	before := map[string]fastpaxos.Stats{"n1": {FastLearned: 10, Collisions: 1, Recovered: 2}, "n2": {FastLearned: 10}}
	after := map[string]fastpaxos.Stats{"n1": {FastLearned: 90, ClassicLearned: 20, Collisions: 21, Recovered: 27}, "n2": {FastLearned: 95, CaughtUp: 15}}
	c, r := conflictRates(before, after)
	if c != 0.2 || r != 0.25 {
		t.Fatalf("conflict %v recovered %v, want 0.2 (20 of 100 at the leader n1) and 0.25", c, r)
	}
}

// The in-process live cluster serves the Go client's fanned-out writes with
// fsync on, and the Recorder sees every node learn on the fast path.
func TestLiveNodesFastPath(t *testing.T) {
	name := "seed002fastsim-" + t.Name()
	rec := fastpaxos.NewRecorder(name)
	defer fastpaxos.DropRecorder(name)
	ga, _, stop, err := liveNodes(context.Background(), "fastpaxos", 4, t.TempDir(), map[string]string{"observe": name}, config.Fsync)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	cfg := bench.Config{Addrs: ga, Ops: 50, Clients: 1, Keys: 10, ValueSize: 64, Dist: "uniform", Seed: 1, OpTimeout: 10 * time.Second,
		NewTarget: bench.GRPCFactory(bench.GRPCOptions{Addrs: ga, Timeout: 10 * time.Second}), TargetName: bench.TargetGRPC}
	if err := warmUp(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	rep, err := bench.Run(context.Background(), cfg, nil)
	if err != nil || rep.All.Count != 50 || rep.All.Errors != 0 {
		t.Fatalf("bench: %v, %+v", err, rep.All)
	}
	st := rec.Nodes()
	if len(st) != 4 {
		t.Fatalf("%d nodes recorded", len(st))
	}
	for id, s := range st {
		if s.FastLearned < 50 {
			t.Errorf("%s learned %d instances on the fast path, want at least 50 (one client: no collisions)", id, s.FastLearned)
		}
	}
}
