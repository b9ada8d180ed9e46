package esds

import (
	"testing"
	"time"

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
