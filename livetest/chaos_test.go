package livetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/synod-dev/synod/nemesis"
)

// TestChaos is CI's short nemesis pass (issue 19 item 2): for each
// linearizable or sequential protocol the live node serves, three real
// node processes in network namespaces run 15 s of load under every fault
// kind drawn from a fixed seed; the history must pass the protocol's
// checker and every acknowledged write must be read back afterwards.
// Skipped where namespaces cannot be made (not root, no iproute2). The
// long runs are `synod chaos --protocol P --duration 10m`.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real node processes in network namespaces")
	}
	if why := nemesis.Available(); why != "" {
		t.Skip(why)
	}
	// Each protocol its own seed: each gets a different order of kinds.
	for seed, p := range []string{"abd", "paxos", "blocking", "pbpaxos"} {
		t.Run(p, func(t *testing.T) {
			var log bytes.Buffer
			rep, err := nemesis.Run(context.Background(), nemesis.Options{
				Protocol: p, Duration: 15 * time.Second, Seed: uint64(seed + 1), Binary: synodBin, Log: &log,
			})
			if errors.Is(err, nemesis.ErrUnavailable) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, log.String())
			}
			var out bytes.Buffer
			rep.Print(&out)
			t.Logf("synod chaos --protocol %s --duration 15s --seed %d\n%s", p, seed+1, out.String())
			if rep.Failed() {
				t.Fatalf("fault log:\n%s", log.String())
			}
			if len(rep.Events) < 5 {
				t.Errorf("only %d faults injected in 15 s", len(rep.Events))
			}
			if rep.AckedWrite < 50 || rep.Checked < 100 {
				t.Errorf("too little progress: %d writes acknowledged, %d operations checked", rep.AckedWrite, rep.Checked)
			}
		})
	}
}
