package adam

import (
	"slices"
	"testing"
	"time"

	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/protocol/eve"
	_ "github.com/synod-dev/synod/protocol/paxos" // the callee
	_ "github.com/synod-dev/synod/protocol/pbpaxos"
	_ "github.com/synod-dev/synod/protocol/unreplicated"
	"github.com/synod-dev/synod/sim"
)

// simRun runs one simulation of adam calling paxos and returns the nodes'
// summed counters and the result.
func simRun(t *testing.T, args ...string) (eve.Stats, *sim.Result) {
	t.Helper()
	rec := eve.NewRecorder(t.Name())
	defer eve.DropRecorder(t.Name())
	cfg, seeds, err := sim.ParseArgs(append([]string{"--protocol", Name, "--param", "observe=" + t.Name(),
		"--callee-protocol", "paxos", "--callee-nodes", "3"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed = seeds[0]
	r, err := sim.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Invariant != "" || r.Violation || r.Divergence != "" {
		t.Fatalf("run failed: invariant %q, violation %v, divergence %q", r.Invariant, r.Violation, r.Divergence)
	}
	return rec.Total(), r
}

// steady is the throughput of a run after its first tenth of answers
// (the callee's first election is over by then).
func steady(r *sim.Result) float64 {
	var ret []int64
	for _, op := range r.History.Ops {
		if op.Outcome == history.OK {
			ret = append(ret, op.Return)
		}
	}
	slices.Sort(ret)
	from := len(ret) / 10
	return float64(len(ret)-from) / time.Duration(ret[len(ret)-1]-ret[from]).Seconds()
}

// The strategies differ as the seed's do (§3.3, §6, Fig 6.1: 8-core
// replicas, 10 ms local and 10 ms remote per request, 3 groups of 8
// threads): naive < single-threaded pipelining < multi-threaded walls <
// multi-threaded pipelining. The figures (steady throughput, req/s) are
// printed with -v.
func TestStrategies(t *testing.T) {
	thr := map[string]float64{}
	for _, s := range []string{Naive, SPM, Walls, PPM} {
		_, r := simRun(t, "--nodes", "3", "--clients", "48", "--ops", "144", "--faults", "none", "--keys", "100000",
			"--mix", "set:1", "--latency", "constant:100us", "--callee-delay", "constant:10ms",
			"--param", "strategy="+s, "--param", "local_cost=10ms", "--param", "timeout=10s", "--param", "batch=48", "--seeds", "1")
		if r.Completed != 144 {
			t.Fatalf("%s completed %d of 144", s, r.Completed)
		}
		thr[s] = steady(r)
	}
	t.Logf("steady throughput, req/s: naive %.0f, spm %.0f, walls %.0f, ppm %.0f (seed: 45, about 2x, just over 300, 582)",
		thr[Naive], thr[SPM], thr[Walls], thr[PPM])
	if !(thr[SPM] > 1.5*thr[Naive] && thr[Walls] > 2*thr[SPM] && thr[PPM] > 1.4*thr[Walls]) {
		t.Fatalf("strategies out of order: %v", thr)
	}
}

// An incomplete conflict declaration makes replicas order a resume and a
// begin of one key differently: the verifiers roll walls back or repair
// the outvoted replica by state transfer (suspended requests included),
// and the histories stay linearizable with every nested copy the same
// (the simulator's checks).
func TestDivergenceRollsBack(t *testing.T) {
	st, _ := simRun(t, "--nodes", "3", "--clients", "6", "--ops", "150", "--faults", "none", "--keys", "2",
		"--param", "conflicts=loose", "--param", "groups=2", "--param", "threads=1", "--seeds", "1")
	if st.Rollbacks+st.Transfers == 0 {
		t.Fatalf("no rollback or transfer with a diverging declaration: %+v", st)
	}
	st, _ = simRun(t, "--nodes", "3", "--clients", "6", "--ops", "150", "--faults", "none", "--keys", "2",
		"--param", "groups=2", "--param", "threads=1", "--seeds", "1")
	if st.Rollbacks != 0 || st.Transfers != 0 {
		t.Fatalf("rollbacks or transfers without divergence: %+v", st)
	}
}

// Adam calling a pbpaxos namespace (issue 31 item 2), the standard
// scenario's flags: faults in both namespaces, ppm with 2 groups of 2
// threads; the callee's history, the same-bytes and same-answer checks
// pass.
func TestPBPaxosCallee(t *testing.T) { testCallee(t, "pbpaxos") }

// TestUnreplicatedCallee: the same with an unreplicated callee (its one
// server crashes too; its deduplication table is durable with its state,
// protocol/unreplicated/nested.go).
func TestUnreplicatedCallee(t *testing.T) { testCallee(t, "unreplicated") }

func testCallee(t *testing.T, callee string) {
	cfg, seeds, err := sim.ParseArgs([]string{"--protocol", Name, "--callee-protocol", callee, "--callee-nodes", "3",
		"--nodes", "3", "--clients", "6", "--ops", "150", "--faults", "all", "--callee-faults", "all",
		"--param", "groups=2", "--param", "threads=2", "--seeds", "1-2"})
	if err != nil {
		t.Fatal(err)
	}
	calleeFaults := 0
	for _, seed := range seeds {
		cfg.Seed = seed
		r, err := sim.Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.Invariant != "" || r.Violation || r.Divergence != "" {
			t.Fatalf("seed %d: invariant %q, violation %v, divergence %q\n  replay: %s", seed, r.Invariant, r.Violation, r.Divergence, cfg.Command())
		}
		if r.Callee == nil || r.Callee.Ops == 0 || r.Completed < r.Ops/2 {
			t.Fatalf("seed %d: %d of %d completed, callee %+v", seed, r.Completed, r.Ops, r.Callee)
		}
		calleeFaults += r.Callee.Stats.Crashes + r.Callee.Stats.Partitions + r.Callee.Stats.Pauses
	}
	if calleeFaults == 0 {
		t.Fatalf("no crash, partition or pause in the %s callee", callee)
	}
}
