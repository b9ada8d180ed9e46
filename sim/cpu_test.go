package sim

import (
	"testing"
	"time"

	"github.com/synod-dev/synod/history"
	_ "github.com/synod-dev/synod/protocol/esds"
)

// cpuConfig: one open-loop stream of non-strict counter adds, spread over
// the nodes, each costing 30 ms at the replica that takes it.
func cpuConfig(nodes int, rate float64, ops int) Config {
	return Config{Protocol: "esds", Service: "counter", Mix: "add:1", Nodes: nodes, Clients: ops, Ops: ops,
		Seed: 3, StickyClients: true, Rate: rate, OpCost: "constant:30ms", RequestTimeout: time.Hour,
		Latency: "constant:1ms", ClientLatency: "constant:100us", Fsync: "constant:0s"}
}

func span(h *history.History) (time.Duration, time.Duration) {
	first, last := int64(-1), int64(0)
	for _, o := range h.Ops {
		if first < 0 || o.Call < first {
			first = o.Call
		}
		last = max(last, o.Return)
	}
	return time.Duration(first), time.Duration(last)
}

func TestCPUModelQueuesAndLimitsThroughput(t *testing.T) {
	// 60 operations at 100/s on one replica that needs 30 ms each: the
	// replica is the bottleneck (about 33/s) and requests queue.
	cfg := cpuConfig(1, 100, 60)
	r, err := Run(cfg)
	if err != nil {
		t.Fatalf("%v\nreplay: %s", err, cfg.Command())
	}
	if r.Violation || r.Completed != 60 {
		t.Fatalf("completed %d, violation %v", r.Completed, r.Violation)
	}
	first, last := span(r.History)
	tput := 60 / (last - first).Seconds()
	if tput < 30 || tput > 34 {
		t.Errorf("throughput %.1f ops/s, want about 33 (one replica, 30 ms per operation)", tput)
	}
	if r.Stats.CPUQueued == 0 || r.Stats.Backlogged != 0 {
		t.Errorf("stats %+v: want queued inputs and no backlog", r.Stats)
	}
	if len(r.ReplicaTimes) != 60 {
		t.Fatalf("%d replica times, want 60", len(r.ReplicaTimes))
	}
	for _, d := range r.ReplicaTimes {
		if d != 30*time.Millisecond {
			t.Fatalf("replica time %v, want the 30 ms step (queueing is not the replica's)", d)
		}
	}
	// The last operation waited behind the others: its client latency is far
	// above the replica time.
	lastOp := r.History.Ops[len(r.History.Ops)-1]
	if lat := time.Duration(lastOp.Return - lastOp.Call); lat < 500*time.Millisecond {
		t.Errorf("last operation's latency %v: no queueing", lat)
	}

	// Three replicas share the load: about three times the throughput.
	cfg3 := cpuConfig(3, 100, 60)
	r3, err := Run(cfg3)
	if err != nil {
		t.Fatalf("%v\nreplay: %s", err, cfg3.Command())
	}
	f3, l3 := span(r3.History)
	if tput3 := 60 / (l3 - f3).Seconds(); tput3 < 2*tput {
		t.Errorf("3 replicas: %.1f ops/s, 1 replica %.1f: want at least twice", tput3, tput)
	}
	// The same three replicas on one processor: back to about one replica's
	// throughput.
	cfg3.CPUs = 1
	r1, err := Run(cfg3)
	if err != nil {
		t.Fatal(err)
	}
	f1, l1 := span(r1.History)
	if tput1 := 60 / (l1 - f1).Seconds(); tput1 > 1.2*tput {
		t.Errorf("3 replicas on 1 CPU: %.1f ops/s, want about one replica's %.1f", tput1, tput)
	}
}

func TestCPUModelDeterministicAndOffByDefault(t *testing.T) {
	cfg := cpuConfig(3, 200, 80)
	cfg.ApplyCost, cfg.MsgCost, cfg.OpCost = "uniform:50us:150us", "uniform:100us:1ms", "uniform:10ms:20ms"
	cfg.StrictFrac = 0.3
	a, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Run(cfg)
	if a.Digest != b.Digest {
		t.Fatalf("same seed, digests %s and %s\nreplay: %s", a.Digest, b.Digest, cfg.Command())
	}
	if a.Violation {
		t.Fatalf("%s", a.ESDS.Detail())
	}
	off := cfg
	off.ApplyCost, off.MsgCost, off.OpCost = "", "", ""
	c, _ := Run(off)
	if c.Digest == a.Digest || c.Stats.CPUQueued != 0 {
		t.Fatalf("CPU model off changed nothing (queued %d)", c.Stats.CPUQueued)
	}
	for _, bad := range []Config{{OpCost: "fast"}, {CPUs: 2}, {Rate: -1}} {
		x := cpuConfig(2, 10, 10)
		x.OpCost, x.CPUs, x.Rate = bad.OpCost, bad.CPUs, bad.Rate
		if bad.CPUs > 0 {
			x.OpCost = ""
		}
		if _, err := Run(x); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestOpenLoopArrivalsAtFixedRate(t *testing.T) {
	cfg := cpuConfig(2, 50, 20)
	cfg.OpCost = ""
	r, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Arrivals every 20 ms from time 0, alternating between the nodes.
	for i, o := range r.History.Ops {
		_ = i
		if o.Call%int64(20*time.Millisecond) != 0 {
			t.Fatalf("operation invoked at %v, not on the 20 ms grid", time.Duration(o.Call))
		}
	}
	if r.Completed != 20 {
		t.Fatalf("completed %d", r.Completed)
	}
}
