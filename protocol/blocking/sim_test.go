package blocking_test

import (
	"testing"
	"time"

	"github.com/synod-dev/synod/check"
	"github.com/synod-dev/synod/history"
	_ "github.com/synod-dev/synod/protocol/blocking"
	"github.com/synod-dev/synod/sim"
)

// maxWriteGap is the longest virtual time between two successful write
// completions while some write was outstanding: an upper bound on the
// unavailability for writes that the faults caused.
func maxWriteGap(h *history.History) time.Duration {
	var gap, last int64
	for _, op := range h.Sorted() {
		if op.Kind != "set" && op.Kind != "del" || op.Outcome != history.OK {
			continue
		}
		if last != 0 && op.Return-last > gap && op.Call < last {
			gap = op.Return - last
		}
		if op.Return > last {
			last = op.Return
		}
	}
	return time.Duration(gap)
}

// The blocking protocol (global lock) is sequentially consistent under every
// fault the simulator injects: crashes, pauses, partitions, loss,
// duplication, reordering, slow links and disks.
func TestSimSequentialUnderFaults(t *testing.T) {
	for _, c := range []struct {
		nodes, clients, seeds int
	}{{3, 6, 12}, {5, 8, 5}} {
		var worst time.Duration
		ops, done := 0, 0
		for seed := int64(1); seed <= int64(c.seeds); seed++ {
			cfg := sim.Config{Protocol: "blocking", Nodes: c.nodes, Clients: c.clients, Ops: 150, Seed: seed, Faults: "all"}
			r, err := sim.Run(cfg)
			if err != nil {
				t.Fatalf("%v\nreplay: %s", err, cfg.Command())
			}
			if r.Check.Result != check.Ok {
				t.Errorf("seed %d: %s\nreplay: %s", seed, r.Check, cfg.Command())
			}
			if r.Completed < r.Ops*3/4 {
				t.Errorf("seed %d: only %d of %d operations completed\nreplay: %s", seed, r.Completed, r.Ops, cfg.Command())
			}
			ops += r.Ops
			done += r.Completed
			worst = max(worst, maxWriteGap(r.History))
		}
		t.Logf("N=%d: %d seeds, %d ops, %d completed; longest write gap %v (heartbeat 20ms, fail_timeout 300ms, lease 500ms)",
			c.nodes, c.seeds, ops, done, worst)
	}
}

// The deliberately broken variant is caught by the sequential checker.
func TestSimBrokenNoAckCaught(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		cfg := sim.Config{Protocol: "blocking-broken-noack", Nodes: 3, Clients: 6, Ops: 150, Seed: seed, Latency: "uniform:1ms:20ms"}
		r, err := sim.Run(cfg)
		if err != nil {
			t.Fatalf("%v\nreplay: %s", err, cfg.Command())
		}
		if r.Violation {
			t.Logf("caught at seed %d: %.300s…\nreplay: %s", seed, r.Check, cfg.Command())
			return
		}
	}
	t.Error("blocking-broken-noack: no violation in seeds 1-20")
}

// Local reads are not linearizable: a simulated history of the correct
// protocol that Porcupine rejects and the sequential checker accepts.
func TestLinearizableRejectsSequentialAccepts(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		// Mostly reads, so that readers often read at a node the commit of a
		// write that has already returned has not reached yet.
		cfg := sim.Config{Protocol: "blocking", Nodes: 3, Clients: 6, Ops: 200, Seed: seed, Keys: 1,
			Mix: "get:20,set:2", Latency: "uniform:1ms:30ms"}
		r, err := sim.Run(cfg)
		if err != nil {
			t.Fatalf("%v\nreplay: %s", err, cfg.Command())
		}
		if r.Check.Result != check.Ok {
			t.Fatalf("seed %d: %s\nreplay: %s", seed, r.Check, cfg.Command())
		}
		lin, err := check.Linearizable(r.History, check.Options{IgnoreDelCount: true})
		if err != nil {
			t.Fatal(err)
		}
		if lin.Result == check.Illegal {
			t.Logf("seed %d: sequentially consistent, and Porcupine says: %.300s…\nreplay: %s", seed, lin, cfg.Command())
			return
		}
	}
	t.Error("no seed in 1-30 produced a non-linearizable history (local reads should)")
}

// With lock=per-key, every key's sub-history is sequentially consistent; the
// whole history need not be (sequential consistency is not local), and the
// test shows such a run when it finds one.
func TestSimPerKey(t *testing.T) {
	whole := 0
	for seed := int64(1); seed <= 8; seed++ {
		cfg := sim.Config{Protocol: "blocking", Nodes: 3, Clients: 6, Ops: 150, Seed: seed, Faults: "all",
			Params: map[string]string{"lock": "per-key"}}
		r, err := sim.Run(cfg)
		if err != nil {
			t.Fatalf("%v\nreplay: %s", err, cfg.Command())
		}
		if r.Check.Result == check.Illegal {
			whole++
		}
		byKey := map[string]*history.History{}
		for _, op := range r.History.Ops {
			if byKey[op.Key] == nil {
				byKey[op.Key] = &history.History{}
			}
			byKey[op.Key].Ops = append(byKey[op.Key].Ops, op)
		}
		for k, h := range byKey {
			rep, err := check.Sequential(h, check.Options{IgnoreDelCount: true, Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Result != check.Ok {
				t.Errorf("seed %d key %s: %s\nreplay: %s", seed, k, rep, cfg.Command())
			}
		}
	}
	t.Logf("per-key: %d of 8 whole histories not sequentially consistent (every key alone is)", whole)
}
