package eve

import (
	"testing"

	"github.com/synod-dev/synod/sim"
)

// simStats runs one simulation and sums the nodes' last counters.
func simStats(t *testing.T, args ...string) (Stats, *sim.Result) {
	t.Helper()
	rec := NewRecorder(t.Name())
	defer DropRecorder(t.Name())
	cfg, seeds, err := sim.ParseArgs(append([]string{"--protocol", Name, "--param", "observe=" + t.Name()}, args...))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed = seeds[0]
	r, err := sim.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Total(), r
}

// An incomplete conflict declaration makes replicas interleave conflicting
// requests differently: the verifiers roll batches back, every replica
// re-executes them sequentially, and the history stays linearizable.
func TestDivergenceRollsBack(t *testing.T) {
	st, r := simStats(t, "--nodes", "3", "--clients", "6", "--ops", "300", "--faults", "none", "--keys", "2",
		"--param", "conflicts=loose", "--param", "cores=4", "--seeds", "1")
	if r.Invariant != "" || r.Violation || r.Divergence != "" {
		t.Fatalf("run failed: invariant %q, violation %v, divergence %q", r.Invariant, r.Violation, r.Divergence)
	}
	if st.Rollbacks == 0 {
		t.Fatalf("no rollback with a diverging declaration: %+v", st)
	}
	// With the service's own declaration, nothing diverges.
	st, _ = simStats(t, "--nodes", "3", "--clients", "6", "--ops", "300", "--faults", "none", "--keys", "2",
		"--param", "cores=4", "--seeds", "1")
	if st.Rollbacks != 0 || st.Transfers != 0 {
		t.Fatalf("rollbacks or transfers without divergence: %+v", st)
	}
	if st.ParallelBatches >= st.Requests {
		t.Fatalf("the mixer made a batch per request: %+v", st)
	}
}

// A replica with a commission fault is outvoted and repaired by an
// incremental state transfer.
func TestCommissionFaultRepaired(t *testing.T) {
	st, r := simStats(t, "--nodes", "3", "--clients", "4", "--ops", "100", "--faults", "none",
		"--param", "commission=n2", "--seeds", "1")
	if r.Invariant != "" || r.Violation || r.Divergence != "" {
		t.Fatalf("run failed: invariant %q, violation %v, divergence %q", r.Invariant, r.Violation, r.Divergence)
	}
	if st.Transfers == 0 || st.ShardsSent == 0 {
		t.Fatalf("the faulty replica was not repaired by transfer: %+v", st)
	}
}
