package seed003adam

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/sim"
)

// adamProtocol is protocol/adam's registered name.
const adamProtocol = "adam"

// Metrics of the simulated cells besides mTput and mSpeedup.
const (
	mLatency   = "latency_ms"    // mean latency of the requests answered in the steady window
	mAll       = "tput_all"      // completed / simulated time, warm-up included (what the first version printed)
	mModel     = "model_speedup" // the unit-slice model's speedup (seed003-adam-model)
	mModelTput = "model_tput"    // the unit-slice model's req/s
)

// simRun is one simulation of protocol/adam calling a three-node paxos
// namespace (the co-simulated callee, sim/callee.go) whose answers come
// `remote` later: the seed's remote computation.
type simRun struct {
	strategy                string
	groups, threads, cores  int
	nodes, verifiers        int // execution replicas + verifiers (verifiers=0: co-located)
	clients, ops, batch     int
	local, remote, hashCost time.Duration
	merkle                  string
	timeout                 time.Duration // adam's timeout (0: its default)
	seed                    int64
}

// args are the `synod-lab sim` arguments of the run: the command that replays
// a cell.
func (r simRun) args() []string {
	a := []string{"--protocol", adamProtocol, "--nodes", strconv.Itoa(r.nodes + r.verifiers),
		"--clients", strconv.Itoa(r.clients), "--ops", strconv.Itoa(r.ops), "--faults", "none", "--keys", "100000",
		"--mix", "set:1", "--think", "constant:0s", "--latency", "constant:100us", "--timeout", "60s",
		"--seeds", strconv.FormatInt(r.seed, 10),
		"--param", "strategy=" + r.strategy, "--param", "groups=" + strconv.Itoa(r.groups),
		"--param", "threads=" + strconv.Itoa(r.threads), "--param", "cores=" + strconv.Itoa(r.cores),
		"--param", "batch=" + strconv.Itoa(r.batch), "--param", "verifiers=" + strconv.Itoa(r.verifiers),
		"--param", "local_cost=" + r.local.String(), "--param", "merkle=" + r.merkle,
		"--param", "hash_cost=" + r.hashCost.String(), "--param", "callee=" + sim.DefaultCalleeNamespace,
		"--callee-protocol", "paxos", "--callee-nodes", "3", "--callee-delay", "constant:" + r.remote.String()}
	if r.timeout > 0 {
		a = append(a, "--param", "timeout="+r.timeout.String())
	}
	return a
}

// run simulates and measures the steady state: throughput and mean latency
// over the answers between the 10th and the 90th percentile of answer
// times. That leaves out the warm-up (the callee's first election, about
// 0.85 s of simulated time, during which no nested call is answered, and
// the first batches filling the pipeline) and the drain (the last clients
// alone once the operations run out).
func (r simRun) run(out *experiment.Outcome) error {
	if _, err := automaton.Lookup(adamProtocol); err != nil {
		return experiment.Unavailable("protocol %s is not registered in this binary", adamProtocol)
	}
	cfg, seeds, err := sim.ParseArgs(r.args())
	if err != nil {
		return err
	}
	cfg.Seed = seeds[0]
	cfg.NoCheck = true // figures, not verdicts: the conformance suite checks histories
	res, err := sim.Run(cfg)
	if err != nil {
		return err
	}
	if res.Invariant != "" || res.Divergence != "" {
		return fmt.Errorf("the simulation failed: invariant %q, divergence %q", res.Invariant, res.Divergence)
	}
	tput, lat, ok := steady(res.History)
	if !ok {
		return fmt.Errorf("%d of %d operations answered: too few for a steady window", res.Completed, res.Ops)
	}
	out.Metrics[mTput], out.Metrics[mLatency] = tput, lat
	out.Metrics[mAll] = float64(res.Completed) / res.SimTime.Seconds()
	return nil
}

// steady returns the throughput (req/s) and mean latency (ms) of the
// answers between the 10th and 90th percentile of answer times.
func steady(h *history.History) (tput, latMS float64, ok bool) {
	var ops []history.Op
	for _, op := range h.Ops {
		if op.Outcome == history.OK {
			ops = append(ops, op)
		}
	}
	if len(ops) < 20 {
		return 0, 0, false
	}
	slices.SortFunc(ops, func(a, b history.Op) int { return int(a.Return - b.Return) })
	from, to := len(ops)/10, len(ops)*9/10
	span := time.Duration(ops[to].Return - ops[from].Return)
	if span <= 0 {
		return 0, 0, false
	}
	var sum time.Duration
	for _, op := range ops[from+1 : to+1] {
		sum += time.Duration(op.Return - op.Call)
	}
	n := to - from
	return float64(n) / span.Seconds(), float64(sum) / float64(time.Millisecond) / float64(n), true
}
