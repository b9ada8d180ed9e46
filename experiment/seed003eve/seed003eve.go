// Package seed003eve reproduces the Eve figures the Eve/Adam thesis cites (§2.2.4:
// "a 12.5x speedup over sequential execution using 16 core machines with
// 10ms requests ... 10x for 1ms requests and 3.3x for 0.1ms requests")
// and asks the questions around them, on protocol/eve:
//
//   - seed003-eve-speedup: throughput against the number of cores, as a
//     speedup over the same replicas with one core, for 0.1, 1 and 10 ms
//     requests: in the simulator (1 to 16 virtual cores per replica; the
//     executor's modelled makespan) and live (1 and 2 cores: the eve.exec
//     executor's worker pool on this machine's real cores, one replica's
//     execution of whole batches, without the protocol's messages);
//   - seed003-eve-merkle: the cost of the Merkle tree: simulated throughput
//     with a per-write hashing cost measured on this machine against a
//     zero-cost tree (the seed's Adam figure: 22x real against 30x fake, on
//     a different system);
//   - seed003-eve-rollback: how often verifiers roll back against the
//     workload's conflict rate (fewer keys, more conflicts) and the mixer's
//     accuracy (the service's declaration, or shardedkv-loose's, which
//     declares set a read);
//   - seed003-eve-vs-paxos: Eve against Synod's Multi-Paxos, whose replicas
//     execute sequentially, on the same workload and request cost.
//
// Simulated cells are deterministic (seeded), three nodes co-locating
// execution replicas and verifiers, no faults, 64 closed-loop clients
// without think time over many keys (except in the rollback experiment);
// invariants and replica convergence are checked, histories are not (the
// conformance suite does that). Durability is the simulator's disk model
// (records fsynced before the answers that depend on them); figures say
// "sim". Multi-Paxos's sequential execution is the simulator's CPU model
// charging each Apply the request cost at every replica; in
// seed003-eve-vs-paxos Eve's execution is charged the same way (sim
// Config.EffectCPU: the batch's makespan on `cores` holds the node's
// processor, its other inputs queue), so both sides pay for execution on
// the node's CPU.
package seed003eve

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/protocol/eve"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/sim"
)

func init() {
	for _, k := range []string{kSpeedup, kMerkle, kRollback, kVsPaxos} {
		experiment.Register(&Eve{kind: k, Ops: 1000, Clients: 64, Batch: 64, SimSeed: 1})
	}
}

// Experiment kinds.
const (
	kSpeedup  = "speedup"
	kMerkle   = "merkle"
	kRollback = "rollback"
	kVsPaxos  = "vs-paxos"
)

// Metrics.
const (
	mTput     = "throughput"
	mSpeedup  = "speedup"
	mRollback = "rollback_pct"
	mMixer    = "mixer_batches"
	mTransfer = "transfers"
	mBatch    = "batch_size"
	mExecMs   = "exec_ms_per_batch"
	mSlotMs   = "ms_per_batch"
)

// Eve is one of the four experiments.
type Eve struct {
	kind    string
	Ops     int
	Clients int
	Batch   int
	SimSeed int64
	Live    bool

	hashCost time.Duration // measured on the first real-tree cell
}

func (e *Eve) Name() string { return "seed003-eve-" + e.kind }

func (e *Eve) Description() string {
	switch e.kind {
	case kSpeedup:
		return "Eve's speedup over sequential execution against cores (sim 1..16 virtual cores, live 1..2 real ones) for 0.1, 1 and 10 ms requests (seed 003 §2.2.4: 3.3x, 10x, 12.5x on 16 cores)."
	case kMerkle:
		return "The Merkle tree's cost: simulated throughput with the per-write hashing cost measured here against a zero-cost tree, 0.1 and 1 ms requests (seed 003 §6: Adam's 22x real vs 30x fake tree on 16 cores)."
	case kRollback:
		return "Rollbacks against the conflict rate (keys) and the mixer's accuracy (declared vs loose conflict keys), 16 cores, 1 ms requests (seed 003 §2.2.1: the mixer makes divergence rare)."
	}
	return "Eve (1 and 16 cores) against Multi-Paxos with sequential execution, 1 ms requests, same workload, same CPU accounting (an execution holds the node's processor as Paxos's Apply calls do)."
}

func (e *Eve) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&e.Ops, "ops", e.Ops, "operations per simulated cell (--quick: 300)")
	fs.IntVar(&e.Clients, "clients", e.Clients, "closed-loop clients (the load: more clients fill larger batches)")
	fs.IntVar(&e.Batch, "batch", e.Batch, "Eve's batch_max: requests per batch (raise --clients and --ops with it)")
	fs.Int64Var(&e.SimSeed, "seed", e.SimSeed, "simulation seed")
	if e.kind == kSpeedup {
		fs.BoolVar(&e.Live, "live", true, "also run the live cluster cells (cores=1 and 2 from the cluster file, nodes pinned to 1 or 2 CPUs)")
	}
}

var costs = []string{"100us", "1ms", "10ms"}

func coreList(quick bool) []int {
	if quick {
		return []int{1, 16}
	}
	return []int{1, 2, 4, 8, 16}
}

func (e *Eve) Cells(o experiment.Options) ([]experiment.Cell, error) {
	var cells []experiment.Cell
	switch e.kind {
	case kSpeedup:
		for _, c := range costs {
			for _, n := range coreList(o.Quick) {
				cells = append(cells, experiment.NewCell("mode", "sim", "cost", c, "cores", strconv.Itoa(n)))
			}
		}
		if e.Live {
			// A live cluster (cluster.go): one execution replica pinned to
			// 1 or 2 CPUs, and three co-located ones on both CPUs.
			lc := []string{"1ms", "10ms"}
			if o.Quick {
				lc = lc[:1]
			}
			for _, c := range lc {
				for _, cpus := range []string{"1", "2"} {
					for _, n := range []string{"1", "2"} {
						cells = append(cells, experiment.NewCell("mode", "cluster", "layout", "exec1", "cost", c, "cpus", cpus, "cores", n))
					}
				}
			}
			for _, n := range []string{"1", "2"} {
				cells = append(cells, experiment.NewCell("mode", "cluster", "layout", "colocated", "cost", "1ms", "cpus", "2", "cores", n))
			}
		}
	case kMerkle:
		for _, c := range []string{"100us", "1ms"} {
			for _, t := range []string{"real", "zero"} {
				for _, n := range coreList(o.Quick) {
					cells = append(cells, experiment.NewCell("cost", c, "tree", t, "cores", strconv.Itoa(n)))
				}
			}
		}
	case kRollback:
		for _, d := range []string{"service", "loose"} {
			for _, k := range []string{"1024", "64", "8", "2"} {
				cells = append(cells, experiment.NewCell("conflicts", d, "keys", k))
			}
		}
	case kVsPaxos:
		// cost=0s: the protocol alone (its ordering, persistence and
		// rounds), so that the execution's share is measured (claims).
		for _, p := range []string{"paxos", "eve-1", "eve-16"} {
			for _, c := range []string{"0s", "1ms"} {
				cells = append(cells, experiment.NewCell("system", p, "cost", c))
			}
		}
	}
	return cells, nil
}

func (e *Eve) ops(quick bool) int {
	if quick {
		return 300
	}
	return e.Ops
}

func (e *Eve) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	out := experiment.Outcome{Metrics: map[string]float64{}, Labels: map[string]string{}}
	quick := env.Quick
	switch e.kind {
	case kSpeedup:
		cost, _ := time.ParseDuration(c.Get("cost"))
		cores, _ := strconv.Atoi(c.Get("cores"))
		if c.Get("mode") == "cluster" {
			return e.clusterCell(ctx, env, c, out)
		}
		return e.simCell(out, simRun{cost: cost, cores: cores, keys: 100000}, quick, env.Rep)
	case kMerkle:
		cores, _ := strconv.Atoi(c.Get("cores"))
		h := time.Duration(0)
		if c.Get("tree") == "real" {
			if e.hashCost == 0 {
				e.hashCost = medianHashCost() // once per run: one figure for every cell
			}
			h = e.hashCost
			out.Labels["hash_cost"] = h.String()
		}
		cost, _ := time.ParseDuration(c.Get("cost"))
		return e.simCell(out, simRun{cost: cost, cores: cores, keys: 100000, hash: h}, quick, env.Rep)
	case kRollback:
		keys, _ := strconv.Atoi(c.Get("keys"))
		return e.simCell(out, simRun{cost: time.Millisecond, cores: 16, keys: keys, loose: c.Get("conflicts") == "loose"}, quick, env.Rep)
	}
	// Like for like: Eve's execution holds the node's processor as
	// Paxos's Apply calls do (sim Config.EffectCPU against ApplyCost).
	cost, _ := time.ParseDuration(c.Get("cost"))
	r := simRun{cost: cost, cores: 1, keys: 100000, charged: true}
	switch c.Get("system") {
	case "paxos":
		r.paxos = true
	case "eve-16":
		r.cores = 16
	}
	return e.simCell(out, r, quick, env.Rep)
}

// simRun is one simulated cell's configuration.
type simRun struct {
	cost  time.Duration
	cores int
	keys  int
	hash  time.Duration
	loose bool
	paxos bool
	// charged: the execution's makespan holds the node's processor
	// (sim Config.EffectCPU), as Paxos's ApplyCost does.
	charged bool
}

func (e *Eve) simCell(out experiment.Outcome, r simRun, quick bool, rep int) (experiment.Outcome, error) {
	name := fmt.Sprintf("seed003eve-%p", &out)
	rec := eve.NewRecorder(name)
	defer eve.DropRecorder(name)
	args := []string{"--nodes", "3", "--clients", strconv.Itoa(e.Clients), "--ops", strconv.Itoa(e.ops(quick)),
		"--faults", "none", "--keys", strconv.Itoa(r.keys), "--think", "constant:0s", "--timeout", "60s",
		"--seeds", strconv.FormatInt(e.SimSeed+int64(rep), 10)} // each run of a cell its own seed
	if r.paxos {
		args = append(args, "--protocol", "paxos")
	} else {
		// The verifiers' patience covers a whole batch run sequentially.
		tick := max(100*time.Millisecond, 3*time.Duration(e.Batch)*r.cost)
		args = append(args, "--protocol", eve.Name, "--param", "observe="+name,
			"--param", "cores="+strconv.Itoa(r.cores), "--param", "exec_cost="+r.cost.String(),
			"--param", "hash_cost="+r.hash.String(), "--param", "timeout="+tick.String(),
			"--param", "batch_max="+strconv.Itoa(e.Batch))
		if r.loose {
			args = append(args, "--param", "conflicts=loose")
		}
	}
	cfg, seeds, err := sim.ParseArgs(args)
	if err != nil {
		return out, err
	}
	cfg.Seed = seeds[0]
	// Figures, not verdicts: the conformance suite checks histories; 64
	// clients on a few keys would make the linearizability search slow.
	cfg.NoCheck = true
	if r.paxos && r.cost > 0 {
		cfg.ApplyCost = "constant:" + r.cost.String() // every replica executes each request, in order
	} else if r.charged {
		cfg.EffectCPU = true
	}
	res, err := sim.Run(cfg)
	if err != nil {
		return out, err
	}
	if res.Invariant != "" || res.Divergence != "" {
		return out, fmt.Errorf("the simulation failed: invariant %q, divergence %q", res.Invariant, res.Divergence)
	}
	out.Metrics[mTput] = float64(res.Completed) / res.SimTime.Seconds()
	out.Labels["mode"] = "sim"
	if !r.paxos {
		st := rec.Total()
		decided := st.Commits + st.Rollbacks
		if decided > 0 {
			out.Metrics[mRollback] = 100 * float64(st.Rollbacks) / float64(decided)
		}
		if st.Executions > 0 {
			out.Metrics[mMixer] = float64(st.ParallelBatches) / float64(st.Executions)
		}
		out.Metrics[mTransfer] = float64(st.Transfers)
		if st.Executions > 0 {
			// Where a slot's time goes: its batch, its execution (the
			// makespan on `cores`), the rest (verification round,
			// persistence, waiting for requests). 3 replicas execute each.
			out.Metrics[mBatch] = float64(st.Requests) / float64(st.Executions)
			out.Metrics[mExecMs] = st.ExecTime.Seconds() * 1000 / float64(st.Executions)
			out.Metrics[mSlotMs] = res.SimTime.Seconds() * 1000 / (float64(st.Executions) / 3)
		}
	}
	return out, nil
}

// medianHashCost is the median of five HashCostPerWrite measurements (the
// machine is shared: single ones vary).
func medianHashCost() time.Duration {
	var ds []time.Duration
	for i := 0; i < 5; i++ {
		ds = append(ds, HashCostPerWrite())
	}
	slices.Sort(ds)
	return max(ds[2], time.Nanosecond)
}

// HashCostPerWrite measures, on this machine, what one write adds to a
// batch's Merkle hashing in the sharded KV: batches of 64 writes over a
// 10,000-key state, each followed by StateHash.
func HashCostPerWrite() time.Duration {
	st := service.NewShardedState(service.DefaultShards)
	for i := 0; i < 10000; i++ {
		st.Apply(service.Op{Kind: "set", Key: "k" + strconv.Itoa(i), Args: [][]byte{[]byte("v")}})
	}
	st.StateHash()
	const rounds, per = 50, 64
	start := time.Now()
	for r := 0; r < rounds; r++ {
		for i := 0; i < per; i++ {
			st.Apply(service.Op{Kind: "set", Key: "k" + strconv.Itoa((r*per+i)*7%10000), Args: [][]byte{[]byte(strconv.Itoa(r))}})
		}
		st.StateHash()
	}
	withHash := time.Since(start)
	start = time.Now()
	for r := 0; r < rounds; r++ {
		for i := 0; i < per; i++ {
			st.Apply(service.Op{Kind: "set", Key: "k" + strconv.Itoa((r*per+i)*7%10000), Args: [][]byte{[]byte(strconv.Itoa(r))}})
		}
	}
	without := time.Since(start)
	return max(withHash-without, 0) / (rounds * per)
}

// Derive adds the speedup over the one-core cell of the same group.
func (e *Eve) Derive(figs experiment.Figures) {
	base := func(key string) string {
		switch e.kind {
		case kSpeedup, kMerkle:
			i := strings.LastIndex(key, "cores=") // cores is every cell's last parameter
			if i < 0 {
				return ""
			}
			return key[:i] + "cores=1"
		case kVsPaxos:
			return "system=paxos," + key[strings.Index(key, "cost="):]
		}
		return ""
	}
	for k := range figs {
		b := base(k)
		if e.kind == kMerkle {
			// Over the real tree on one core, at the same request cost.
			b = experiment.NewCell("cost", strings.TrimPrefix(strings.Split(k, ",")[0], "cost="), "tree", "real", "cores", "1").Key
		}
		if b == "" {
			continue
		}
		t, ok1 := figs.Get(k, mTput)
		t0, ok2 := figs.Get(b, mTput)
		if ok1 && ok2 && t0 > 0 {
			figs.Set(k, mSpeedup, t/t0)
		}
	}
}

func (e *Eve) Seed() experiment.SeedFigures {
	v := experiment.Figures{}
	notes := map[string]string{}
	switch e.kind {
	case kSpeedup:
		for c, s := range map[string]float64{"100us": 3.3, "1ms": 10, "10ms": 12.5} {
			v.Set(experiment.NewCell("mode", "sim", "cost", c, "cores", "16").Key, mSpeedup, s)
		}
		return experiment.SeedFigures{Source: "seed 003 §2.2.4 (Eve, Kapritsos et al. OSDI 2012, 16-core machines)", Values: v}
	case kMerkle:
		v.Set(experiment.NewCell("cost", "1ms", "tree", "real", "cores", "16").Key, mSpeedup, 972.0/45)
		v.Set(experiment.NewCell("cost", "1ms", "tree", "zero", "cores", "16").Key, mSpeedup, 1371.0/45)
		notes[experiment.NewCell("cost", "1ms", "tree", "real", "cores", "16").Key] = "Adam, not Eve: 20 ms requests with nested calls, 3 groups x 16 threads (max 32x)"
		return experiment.SeedFigures{Source: "seed 003 §6 Fig 6.3 (Adam, unreplicated, 16 cores: 972 and 1371 req/s over 45)", Values: v, Notes: notes}
	case kRollback:
		notes[experiment.NewCell("conflicts", "service", "keys", "2").Key] = "the mixer \"greatly reduced the likelihood that replicas would diverge\" (no figure)"
		return experiment.SeedFigures{Source: "seed 003 §2.2.1 (qualitative)", Notes: notes}
	}
	notes[experiment.NewCell("system", "eve-16", "cost", "1ms").Key] = "Eve outperforms Remus (passive replication) by 4.7x; no Paxos figure"
	return experiment.SeedFigures{Source: "seed 003 §2.2.4 (qualitative)", Notes: notes}
}

func (e *Eve) Report() experiment.ReportSpec {
	cols := []experiment.Column{{Metric: mTput, Header: "req/s", Format: "%.0f"}, {Metric: mSpeedup, Header: "speedup", Format: "%.2f"}}
	spec := experiment.ReportSpec{Labels: []string{"mode"}}
	switch e.kind {
	case kSpeedup:
		spec.Plots = []experiment.PlotSpec{
			{File: "speedup-sim", Title: "Eve speedup over one core (simulated cores)", Kind: experiment.Lines, Metric: mSpeedup, YLabel: "speedup", X: "cores", XLabel: "cores", Series: []string{"cost"}, Filter: map[string]string{"mode": "sim"}},
			{File: "speedup-live", Title: "Eve speedup on a live cluster (real CPU work)", Kind: experiment.Bars, Metric: mSpeedup, YLabel: "speedup over cores=1", X: "cores", XLabel: "cores", Series: []string{"layout", "cost", "cpus"}, Filter: map[string]string{"mode": "cluster"}},
		}
		cols = append(cols, experiment.Column{Metric: mBatch, Header: "batch", Format: "%.1f"}, experiment.Column{Metric: mExecMs, Header: "exec ms/batch", Format: "%.2f"},
			experiment.Column{Metric: mSlotMs, Header: "ms/batch", Format: "%.2f"},
			experiment.Column{Metric: mBound, Header: "CPU bound", Format: "%.0f"}, experiment.Column{Metric: mUtil, Header: "% of bound", Format: "%.0f"},
			experiment.Column{Metric: mCPUms, Header: "node CPU ms/req", Format: "%.2f"})
		spec.Notes = []string{"sim: three co-located replicas+verifiers, --clients closed-loop clients, batches of up to --batch requests, one batch in flight, the executor's makespan on C virtual cores",
			"cluster: 3 synod node processes on loopback (durability memory), cores/exec_cost/work_per_ms in the cluster file (request work = calibrated cpuwork iterations), nodes pinned with taskset to cpus CPU(s); exec1: one execution replica + 2 verifiers, colocated: 3 execution replicas; --clients closed-loop SET clients; CPU bound = cpus/(executing replicas x exec_cost); the machine has 2 CPUs, so a speedup above 2 is impossible here",
			"the speedup is bounded by batch/(makespan + one verification round): light requests gain little unless the load fills larger batches (the seed: \"the inability to saturate the system with client requests\"); e.g. --clients 256 --batch 256 --ops 3000"}
	case kMerkle:
		spec.Labels = append(spec.Labels, "hash_cost")
		spec.Plots = []experiment.PlotSpec{{File: "merkle", Title: "Speedup with a real and a zero-cost Merkle tree", Kind: experiment.Lines, Metric: mSpeedup, YLabel: "speedup over real tree, 1 core", X: "cores", XLabel: "cores", Series: []string{"cost", "tree"}}}
	case kRollback:
		cols = []experiment.Column{{Metric: mTput, Header: "req/s", Format: "%.0f"}, {Metric: mRollback, Header: "rollback %", Format: "%.1f"},
			{Metric: mMixer, Header: "mixer batches/batch", Format: "%.2f"}, {Metric: mTransfer, Header: "transfers", Format: "%.0f"}}
		spec.Plots = []experiment.PlotSpec{{File: "rollback", Title: "Rollbacks against conflicts", Kind: experiment.Bars, Metric: mRollback, YLabel: "batches rolled back (%)", X: "keys", XLabel: "keys (fewer: more conflicts)", Series: []string{"conflicts"}}}
	case kVsPaxos:
		spec.Plots = []experiment.PlotSpec{{File: "vs-paxos", Title: "Eve against Multi-Paxos (1 ms requests)", Kind: experiment.Bars, Metric: mTput, YLabel: "req/s", X: "system", XLabel: "system", Series: []string{"cost"}}}
	}
	spec.Columns = cols
	return spec
}
