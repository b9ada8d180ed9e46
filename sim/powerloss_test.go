package sim

import (
	"strings"
	"testing"

	_ "github.com/synod-dev/synod/protocol/unreplicated"
)

// powerLossArgs are the conformance suite's "power loss" flags.
var powerLossArgs = []string{"--nodes", "3", "--clients", "8", "--ops", "1800", "--keys", "3", "--faults", "crash,loss",
	"--think", "constant:20ms", "--fsync", "uniform:1ms:10ms", "--power-loss", "300ms,1500ms",
	"--liveness", "2400ms", "--liveness-bound", "2s"}

func runPowerLoss(t *testing.T, proto string, seed string, extra ...string) *Result {
	t.Helper()
	cfg, seeds, err := ParseArgs(append(append([]string{"--protocol", proto, "--seeds", seed}, powerLossArgs...), extra...))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed = seeds[0]
	r, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPowerLossLosesUnsyncedWrites: a power loss crashes every node at
// once and each loses the records it had not synced. A server that answers
// a write before its record is synced (unreplicated-broken-answerfirst)
// loses acknowledged writes, which the history check sees (seeds 1 and 4
// of the conformance scenario; 8 of seeds 1-20 fail); the correct protocol
// keeps them, and serves again after the power comes back.
func TestPowerLossLosesUnsyncedWrites(t *testing.T) {
	for _, seed := range []string{"1", "4"} {
		bad := runPowerLoss(t, "unreplicated-broken-answerfirst", seed, "--no-invariants")
		if !bad.Violation {
			t.Errorf("seed %s: the broken variant's acknowledged writes survived the power loss", seed)
		}
		good := runPowerLoss(t, "unreplicated", seed)
		if good.Violation || good.Liveness != "" || good.Invariant != "" {
			t.Errorf("seed %s: unreplicated failed: violation %v, liveness %q, invariant %q", seed, good.Violation, good.Liveness, good.Invariant)
		}
		if good.Stats.PowerLosses != 2 || good.Stats.Crashes < 6 {
			t.Errorf("seed %s: %d power losses, %d crashes; want 2 and at least 6 (3 nodes each time)", seed, good.Stats.PowerLosses, good.Stats.Crashes)
		}
	}
}

// TestPowerLossReplays: the replay command names the power losses, and
// replaying it gives the same trace digest; a run without them differs.
func TestPowerLossReplays(t *testing.T) {
	cfg, _, err := ParseArgs(append([]string{"--protocol", "unreplicated"}, powerLossArgs...))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed = 3
	cfg.Ops = 300
	r1, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := cfg.Command()
	if !strings.Contains(cmd, "--power-loss 300ms,1.5s") {
		t.Fatalf("replay command %q does not name the power losses", cmd)
	}
	again, seeds, err := ParseArgs(strings.Fields(cmd)[2:])
	if err != nil {
		t.Fatal(err)
	}
	again.Seed = seeds[0]
	r2, err := Run(again)
	if err != nil {
		t.Fatal(err)
	}
	if r1.Digest != r2.Digest {
		t.Fatalf("replay digest %s, first run %s", r2.Digest, r1.Digest)
	}
	cfg.PowerLoss = nil
	r3, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r3.Digest == r1.Digest {
		t.Fatal("the power losses did not change the run")
	}
}

func TestParsePowerLoss(t *testing.T) {
	for _, bad := range []string{"x", "0s", "-1s", "1s,,2s"} {
		if _, err := ParsePowerLoss(bad); err == nil {
			t.Errorf("ParsePowerLoss(%q) accepted", bad)
		}
	}
	ts, err := ParsePowerLoss("300ms, 2s")
	if err != nil || len(ts) != 2 || PowerLossSpec(ts) != "300ms,2s" {
		t.Fatalf("ParsePowerLoss: %v %v (%s)", ts, err, PowerLossSpec(ts))
	}
}
