package eve

import (
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/automaton/cpuwork"
	"github.com/synod-dev/synod/service"
)

// Execution of a batch (the Eve/Adam thesis §2.2.2), outside the automaton's step.

// execJob is an execution's payload: the batch, the state it runs on (owned
// by the executor until the result returns) and how to run it.
type execJob struct {
	Slot       uint64
	State      service.State
	Svc        service.Service
	Entries    []entry
	Skip       []bool
	Sequential bool
	Cores      int
	ExecCost   time.Duration
	HashCost   time.Duration
	Cost       func(service.Op) time.Duration // per operation, when set (else ExecCost)
	WorkPerMs  int                            // live: cpuwork iterations per ms of cost (0: the runtime's calibration)
	Corrupt    bool
}

// execResult is an execution's result: per-request results, the state's
// hash, and the modelled time (the makespan on Cores virtual cores).
type execResult struct {
	Results  []service.Result
	Root     [32]byte
	Makespan time.Duration
	Batches  int // parallel batches the mixer made
}

// Cost implements the simulator's CostedResult.
func (r *execResult) Cost() time.Duration { return r.Makespan }

// ExecKind is the executor kind eve registers.
const ExecKind = "eve.exec"

func init() {
	automaton.RegisterExecutor(ExecKind, func(env automaton.ExecEnv) (automaton.Executor, error) {
		return &executor{env: env}, nil
	})
}

// executor runs batches for one replica incarnation: in simulation
// deterministically from env.Rand with a modelled makespan (runJob), live
// on a pool of real goroutines (runLive).
type executor struct{ env automaton.ExecEnv }

// Execute implements automaton.Executor.
func (x *executor) Execute(payload any) (any, error) {
	job, ok := payload.(*execJob)
	if !ok {
		return nil, fmt.Errorf("eve: executor payload %T", payload)
	}
	if x.env.Simulated {
		return runJob(job, x.env.Rand), nil
	}
	rate := float64(job.WorkPerMs)
	if rate <= 0 {
		rate = x.env.WorkPerMs
	}
	return runLive(job, rate), nil
}

// Close implements automaton.Executor: workers live only during Execute.
func (x *executor) Close() error { return nil }

// startEffect hands the job to the runtime; its state belongs to the
// executor until EffectDone.
func (a *Eve) startEffect(id uint64, job *execJob) {
	a.Emit(automaton.Effect{ID: automaton.EffectID(id), Kind: ExecKind, Payload: job})
}

// onOther handles inputs beyond the contract's four: an execution's end.
func (a *Eve) onOther(in automaton.Input) {
	d, ok := in.(automaton.EffectDone)
	if !ok || a.ex == nil || a.ex.cur == nil || a.ex.cur.id != uint64(d.ID) {
		return
	}
	res, ok := d.Result.(*execResult)
	if d.Err != nil || !ok {
		x := a.ex.cur // the executor failed: run the batch again
		a.execute(x.b, x.seq, x.dec)
		return
	}
	a.onExecuted(uint64(d.ID), res)
}

// runJob executes a job deterministically from rnd: the mixer's parallel
// batches run one after the other, the requests of one in an order drawn
// from rnd (different replicas interleave them differently, which is what
// a real thread pool does); a sequential job runs in batch order.
func runJob(job *execJob, rnd *rand.Rand) *execResult {
	res := &execResult{Results: make([]service.Result, len(job.Entries))}
	var idx []int
	for i := range job.Entries {
		if !job.Skip[i] {
			idx = append(idx, i)
		}
	}
	groups := [][]int{idx}
	if !job.Sequential {
		groups = mix(len(idx), func(k int) ([]service.Lock, bool) {
			return service.ConflictKeysOf(job.Svc, job.Entries[idx[k]].Req.Op)
		})
		for _, g := range groups {
			for j := range g {
				g[j] = idx[g[j]]
			}
		}
	}
	writes := 0
	for _, g := range groups {
		order := g
		if !job.Sequential {
			order = make([]int, len(g))
			for j, p := range rnd.Perm(len(g)) {
				order[j] = g[p]
			}
		}
		for _, i := range order {
			req := job.Entries[i].Req
			res.Results[i] = service.ApplyEnv(job.State, req.Op, req.Env)
			if !job.Svc.IsRead(req.Op) {
				writes++
			}
		}
		if job.Cost != nil {
			costs := make([]time.Duration, len(g))
			for j, i := range g {
				costs[j] = job.costOf(i)
			}
			res.Makespan += listMakespan(costs, job.cores())
		} else {
			res.Makespan += makespan(len(g), job.cores(), job.ExecCost)
		}
	}
	res.Batches = len(groups)
	if job.Corrupt && len(idx) > 0 {
		job.State.Apply(service.Op{Kind: "set", Key: "eve-commission-fault", Args: [][]byte{[]byte("x")}})
		r := &res.Results[idx[0]]
		*r = service.Bytes([]byte("commission-fault")) // a value nobody wrote
	}
	res.Makespan += time.Duration(writes) * job.HashCost
	res.Root = service.StateHash(job.State)
	return res
}

// costOf is the modelled execution time of entry i (Cost, else ExecCost).
func (j *execJob) costOf(i int) time.Duration {
	if j.Cost != nil {
		return j.Cost(j.Entries[i].Req.Op)
	}
	return j.ExecCost
}

func (j *execJob) cores() int {
	if j.Sequential {
		return 1
	}
	return max(j.Cores, 1)
}

// makespan is the time n requests of equal cost take on c cores (list
// scheduling: ceil(n/c) rounds).
func makespan(n, c int, cost time.Duration) time.Duration {
	return time.Duration((n+c-1)/c) * cost
}

// listMakespan is the time jobs of the given costs take on c cores, each
// started in order on the core that frees first (list scheduling).
func listMakespan(costs []time.Duration, c int) time.Duration {
	free := make([]time.Duration, min(max(c, 1), max(len(costs), 1)))
	for _, d := range costs {
		k := 0
		for j := range free {
			if free[j] < free[k] {
				k = j
			}
		}
		free[k] += d
	}
	return slices.Max(free)
}

// runLive executes a job on job.Cores goroutines: the requests of each of
// the mixer's parallel batches are spread over the workers, each doing a
// request's modelled work (cpuwork iterations for its cost at workPerMs,
// package doc, Request work) and applying it; the sharded KV lets them
// apply at once. Any other service that declares its conflicts
// (service.Conflicter or service.Lockable: a user's type too) runs the same
// way, its Applies taken one at a time under a lock, since its state need
// not be safe for concurrent use: the requests' work runs in parallel, and
// the order in which non-conflicting requests apply is the threads' (it
// does not matter when the declaration is right; when it is wrong,
// replicas diverge and the verifiers roll back, as for the sharded KV). A
// service that declares nothing runs sequentially. The makespan it
// reports is the wall time the runtime measured (experiments read it; the
// automaton does not).
func runLive(job *execJob, workPerMs float64) *execResult {
	start := time.Now()
	_, sharded := job.State.(*service.ShardedState)
	_, declared := service.ConflictKeysOf(job.Svc, service.Op{})
	if !(sharded || declared) || job.Sequential || job.cores() == 1 {
		res := runJob(job, rand.New(rand.NewSource(1)))
		for i := range res.Results {
			work(job.costOf(i), workPerMs)
		}
		res.Makespan = time.Since(start)
		return res
	}
	res := &execResult{Results: make([]service.Result, len(job.Entries))}
	var idx []int
	for i := range job.Entries {
		if !job.Skip[i] {
			idx = append(idx, i)
		}
	}
	groups := mix(len(idx), func(k int) ([]service.Lock, bool) {
		return service.ConflictKeysOf(job.Svc, job.Entries[idx[k]].Req.Op)
	})
	var applyMu sync.Mutex // held around Apply unless the state is the sharded KV
	for _, g := range groups {
		queue := make(chan int, len(g))
		for _, k := range g {
			queue <- idx[k]
		}
		close(queue)
		var wg sync.WaitGroup
		for w := 0; w < min(job.cores(), len(g)); w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range queue {
					work(job.costOf(i), workPerMs)
					req := job.Entries[i].Req
					if !sharded {
						applyMu.Lock()
					}
					res.Results[i] = service.ApplyEnv(job.State, req.Op, req.Env)
					if !sharded {
						applyMu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
	}
	res.Batches = len(groups)
	res.Root = service.StateHash(job.State)
	res.Makespan = time.Since(start)
	return res
}

// work does a request's modelled computation live: the cpuwork iterations
// that make d of CPU at perMs iterations per millisecond (a fixed amount of
// CPU work, not a wall-clock wait: package doc, Request work).
func work(d time.Duration, perMs float64) {
	if n := cpuwork.Iterations(d, perMs); n > 0 {
		cpuwork.Sink(cpuwork.Work(n))
	}
}

// RunBatchLive executes ops as one batch through the live executor, as an
// execution replica would (the mixer, then each parallel batch on cores
// goroutines, cost's CPU work per request at workPerMs cpuwork iterations
// per millisecond, the Merkle hash at the end), on st, and returns the
// batch's results and wall time (experiments).
func RunBatchLive(svc service.Service, st service.State, ops []service.Op, cores int, cost time.Duration, workPerMs float64) ([]service.Result, time.Duration) {
	job := &execJob{State: st, Svc: svc, Entries: make([]entry, len(ops)), Skip: make([]bool, len(ops)), Cores: cores, ExecCost: cost}
	for i, op := range ops {
		job.Entries[i].Req.Op = op
	}
	res := runLive(job, workPerMs)
	return res.Results, res.Makespan
}
