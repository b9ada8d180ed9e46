package esds

import (
	"slices"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/sim"
)

// prefixSim runs stability=prefix in simulation (3 replicas, crashes, power
// loss, a lossy network, strict operations and prev sets; batch 3 so that
// messages end between an operation's positions) with the invariants and
// the ESDS checker, and returns the first seed's failure ("" if none).
func prefixSim(t *testing.T, seeds int64, batch string) string {
	t.Helper()
	for seed := int64(1); seed <= seeds; seed++ {
		cfg := sim.Config{Protocol: "esds", Service: "kv", Nodes: 3, Clients: 8, Ops: 400, Keys: 20, Seed: seed,
			Faults: "all", StrictFrac: 0.3, PrevProb: 0.3, RequestTimeout: 3 * time.Second,
			Params: map[string]string{"batch": batch, "stability": "prefix"}}
		res, err := sim.Run(cfg)
		if err != nil {
			t.Fatalf("%v\nreplay: %s", err, cfg.Command())
		}
		if res.Violation || res.Invariant != "" {
			why := res.Invariant
			if res.ESDS != nil {
				why += " " + res.ESDS.Detail()
			}
			return why + "\nreplay: " + cfg.Command()
		}
	}
	return ""
}

// TestStablePrefixSim: stability=prefix keeps every invariant and eventual
// serializability under faults.
func TestStablePrefixSim(t *testing.T) {
	if bad := prefixSim(t, 8, "3"); bad != "" {
		t.Fatal(bad)
	}
}

// TestBrokenStampCaught: a stamp that claims more than the stable prefix
// at the position it stands for is caught by the invariants or the ESDS
// checker: the label of the last operation applied to the stable state
// (Fig. 4.5 applies every operation up to max-stable_r, not all of them in
// ⋂ done), or the stable prefix at sending on a message that ends before
// the positions that prefix rests on.
func TestBrokenStampCaught(t *testing.T) {
	for _, v := range []int{1, 2} {
		brokenStamp = v
		bad := prefixSim(t, 30, "3")
		brokenStamp = 0
		if bad == "" {
			t.Errorf("brokenStamp=%d: 30 seeds passed", v)
			continue
		}
		t.Logf("brokenStamp=%d caught: %s", v, bad)
	}
}

// BenchmarkSimStability reports seeded, simulated figures per operation
// for stability=positions and prefix, drain off and 5ms: peer messages,
// records and fsyncs, and the virtual latency of strict operations (answered
// once stable at every member: what stability detection costs a client) and
// of the others (3 replicas, 32 clients, 4,000 operations over 1,000 keys,
// a fifth strict, no faults, seeds 1-3; the simulator charges no CPU, so
// the non-strict latencies are the network's and the disk's).
//
//	go test ./protocol/esds -run '^$' -bench SimStability -benchtime 1x
func BenchmarkSimStability(b *testing.B) {
	for _, stability := range []string{"positions", "prefix"} {
		for _, drain := range []string{"off", "5ms"} {
			b.Run("stability="+stability+",drain="+drain, func(b *testing.B) {
				for range b.N {
					simStability(b, stability, drain)
				}
			})
		}
	}
}

func simStability(b *testing.B, stability, drain string) {
	var ops, msgs, persists, fsyncs int
	var strict, other []float64
	for seed := int64(1); seed <= 3; seed++ {
		cfg := sim.Config{Protocol: "esds", Service: "kv", Nodes: 3, Clients: 32, Ops: 4000, Keys: 1000, Seed: seed,
			Faults: "none", StrictFrac: 0.2, Params: map[string]string{"stability": stability, "drain": drain}}
		res, err := sim.Run(cfg)
		if err != nil || res.Violation || res.Invariant != "" {
			b.Fatalf("%v %s\nreplay: %s", err, res.Invariant, cfg.Command())
		}
		ops += res.Completed
		msgs += res.Stats.MsgsSent
		persists += res.Stats.Persists
		fsyncs += res.Stats.Fsyncs
		for _, o := range res.History.Ops {
			if o.Outcome != history.OK {
				continue
			}
			ms := float64(o.Return-o.Call) / 1e6
			if len(o.Opts[automaton.OptStrict]) > 0 {
				strict = append(strict, ms)
			} else {
				other = append(other, ms)
			}
		}
	}
	slices.Sort(strict)
	slices.Sort(other)
	n := float64(ops)
	b.ReportMetric(float64(msgs)/n, "msgs/op")
	b.ReportMetric(float64(persists)/n, "records/op")
	b.ReportMetric(float64(fsyncs)/n, "fsyncs/op")
	if len(strict) > 0 {
		b.ReportMetric(strict[len(strict)/2], "strict-p50-ms")
		b.ReportMetric(strict[len(strict)*99/100], "strict-p99-ms")
	}
	b.ReportMetric(other[len(other)/2], "p50-ms")
	b.ReportMetric(other[len(other)*99/100], "p99-ms")
	b.ReportMetric(float64(len(strict)), "strict-ops")
}
