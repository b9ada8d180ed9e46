package sim

import (
	"testing"
	"time"

	_ "github.com/synod-dev/synod/protocol/esds"
)

func esdsConfig(proto, svc string, seed int64) Config {
	return Config{Protocol: proto, Service: svc, Nodes: 3, Clients: 4, Ops: 120, Seed: seed, Faults: "all",
		StrictFrac: 0.3, PrevProb: 0.5, RequestTimeout: 3 * time.Second}
}

func TestESDSSimNoViolations(t *testing.T) {
	for _, proto := range []string{"esds", "esds-unopt"} {
		for _, svc := range []string{"string", "counter", "kv"} {
			for seed := int64(1); seed <= 10; seed++ {
				cfg := esdsConfig(proto, svc, seed)
				if proto == "esds-unopt" {
					cfg.Ops = 60
				}
				r, err := Run(cfg)
				if err != nil {
					t.Fatalf("%v\nreplay: %s", err, cfg.Command())
				}
				if r.ESDS == nil {
					t.Fatalf("%s: no ESDS report", proto)
				}
				if r.Violation {
					t.Fatalf("seed %d: %s\nreplay: %s", seed, r.ESDS.Detail(), cfg.Command())
				}
				if r.ESDS.Strict == 0 || r.ESDS.NonStrict == 0 || r.ESDS.Ordered < r.Completed {
					t.Fatalf("seed %d: too little checked: %s (completed %d)\nreplay: %s", seed, r.ESDS.Detail(), r.Completed, cfg.Command())
				}
			}
		}
	}
}

// The ESDS checker catches the broken variants by itself (invariants off:
// esds-broken-maxlabel trips an invariant first otherwise).
func TestESDSSimCatchesBrokenVariants(t *testing.T) {
	for _, proto := range []string{"esds-broken-earlystrict", "esds-broken-maxlabel"} {
		caught := 0
		for seed := int64(1); seed <= 8 && caught == 0; seed++ {
			cfg := esdsConfig(proto, "string", seed)
			cfg.NoInvariants = true
			r, err := Run(cfg)
			if err != nil {
				t.Fatalf("%v\nreplay: %s", err, cfg.Command())
			}
			if r.Violation {
				caught++
				t.Logf("%s caught at seed %d: %s", proto, seed, r.ESDS.Detail())
			}
		}
		if caught == 0 {
			t.Fatalf("%s: no violation found in 8 seeds", proto)
		}
	}
}

// The same seed replays byte for byte, settle phase included.
func TestESDSSimReplays(t *testing.T) {
	cfg := esdsConfig("esds", "counter", 5)
	a, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != b.Digest || a.ESDS.Inconsistent != b.ESDS.Inconsistent {
		t.Fatalf("replay differs: %s vs %s\nreplay: %s", a.Digest, b.Digest, cfg.Command())
	}
}

// Local reads (protocol/esds reads=local): no violation, reads answered
// outside the order and reads' values checked against their prev sets;
// the broken variant that answers without its prev is caught.
func TestESDSSimLocalReads(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		cfg := esdsConfig("esds", "kv", seed)
		cfg.Params = map[string]string{"reads": "local"}
		r, err := Run(cfg)
		if err != nil {
			t.Fatalf("%v\nreplay: %s", err, cfg.Command())
		}
		if r.Violation {
			t.Fatalf("seed %d: %s\nreplay: %s", seed, r.ESDS.Detail(), cfg.Command())
		}
		if r.ESDS.LocalReads == 0 || r.ESDS.ReadsChecked == 0 {
			t.Fatalf("seed %d: %d local reads, %d reads checked: the run exercises nothing\nreplay: %s", seed, r.ESDS.LocalReads, r.ESDS.ReadsChecked, cfg.Command())
		}
	}
	caught := 0
	for seed := int64(1); seed <= 12 && caught == 0; seed++ {
		cfg := esdsConfig("esds-broken-localread", "kv", seed)
		cfg.Ops = 300
		r, err := Run(cfg)
		if err != nil {
			t.Fatalf("%v\nreplay: %s", err, cfg.Command())
		}
		if r.Violation {
			caught++
			t.Logf("caught at seed %d: %s", seed, r.ESDS.Detail())
		}
	}
	if caught == 0 {
		t.Fatal("esds-broken-localread: no violation found in 12 seeds")
	}
}
