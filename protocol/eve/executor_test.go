package eve

import (
	"fmt"
	"math/rand"
	"runtime"
	"sort"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/automaton/cpuwork"
	"github.com/synod-dev/synod/service"
)

func jobOf(svc service.Service, ops []service.Op, cores int, cost time.Duration) *execJob {
	j := &execJob{State: svc.NewState(), Svc: svc, Entries: make([]entry, len(ops)), Skip: make([]bool, len(ops)), Cores: cores, ExecCost: cost}
	for i, op := range ops {
		j.Entries[i] = entry{Req: automaton.Request{Op: op}}
	}
	return j
}

// The simulated makespan is the mixer's batches on C cores: 64 requests on
// distinct keys take 4 rounds on 16 cores; 64 writes of one key take 64.
func TestSimulatedMakespan(t *testing.T) {
	svc, _ := service.Lookup(service.ShardedKVName)
	var distinct, same []service.Op
	for i := 0; i < 64; i++ {
		distinct = append(distinct, service.Op{Kind: "set", Key: fmt.Sprint("k", i), Args: [][]byte{[]byte("v")}})
		same = append(same, service.Op{Kind: "incr", Key: "k", Args: [][]byte{[]byte("1")}})
	}
	rnd := rand.New(rand.NewSource(1))
	if r := runJob(jobOf(svc, distinct, 16, time.Millisecond), rnd); r.Makespan != 4*time.Millisecond || r.Batches != 1 {
		t.Errorf("distinct keys: makespan %v in %d batches, want 4ms in 1", r.Makespan, r.Batches)
	}
	r := runJob(jobOf(svc, same, 16, time.Millisecond), rnd)
	if r.Makespan != 64*time.Millisecond || r.Batches != 64 {
		t.Errorf("one key: makespan %v in %d batches, want 64ms in 64", r.Makespan, r.Batches)
	}
	if got := r.Results[63]; got.Int != 64 {
		t.Errorf("the last incr answered %v, want 64", got)
	}
	j := jobOf(svc, distinct, 16, time.Millisecond)
	j.Sequential = true
	if r := runJob(j, rnd); r.Makespan != 64*time.Millisecond {
		t.Errorf("sequential re-execution: makespan %v, want 64ms", r.Makespan)
	}
}

// The live worker pool runs non-conflicting requests on several goroutines
// (run with -race) and reaches the state and answers a sequential run does.
func TestLiveExecutorMatchesSequential(t *testing.T) {
	svc, _ := service.Lookup(service.ShardedKVName)
	var ops []service.Op
	for i := 0; i < 200; i++ {
		k := fmt.Sprint("k", i%50)
		switch i % 4 {
		case 0:
			ops = append(ops, service.Op{Kind: "set", Key: k, Args: [][]byte{[]byte(fmt.Sprint(i))}})
		case 1:
			ops = append(ops, service.Op{Kind: "append", Key: k, Args: [][]byte{[]byte("x")}})
		case 2:
			ops = append(ops, service.Op{Kind: "get", Key: k})
		default:
			ops = append(ops, service.Op{Kind: "del", Key: fmt.Sprint("k", (i+7)%50)})
		}
	}
	par, seq := svc.NewState(), svc.NewState()
	pr, _ := RunBatchLive(svc, par, ops, 4, 0, 0)
	sr, _ := RunBatchLive(svc, seq, ops, 1, 0, 0)
	if service.StateHash(par) != service.StateHash(seq) {
		t.Fatal("the parallel run's state differs from the sequential one's")
	}
	for i := range pr {
		if !pr[i].Equal(sr[i]) {
			t.Fatalf("request %d (%v): parallel %v, sequential %v", i, ops[i], pr[i], sr[i])
		}
	}
}

// Live request work is CPU work: goroutines sharing one CPU take turns at
// it. 32 requests of 1 ms on cores=4 with GOMAXPROCS 1 use at least half of
// 32 ms of the process's CPU (a wall-clock busy loop, the old spin, let the
// four goroutines wait out their deadlines together: about 8 ms of CPU).
func TestLiveWorkIsCPUTime(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	svc, _ := service.Lookup(service.ShardedKVName)
	var ops []service.Op
	for i := 0; i < 32; i++ {
		ops = append(ops, service.Op{Kind: "set", Key: fmt.Sprint("k", i), Args: [][]byte{[]byte("v")}})
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Skip(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	rate := cpuwork.Calibrate()
	start := cpu()
	RunBatchLive(svc, svc.NewState(), ops, 4, time.Millisecond, rate)
	if used := cpu() - start; used < 16*time.Millisecond {
		t.Fatalf("32 requests of 1 ms of work on 4 goroutines and one CPU used %v of CPU (want >= 16ms)", used)
	}
}

// tally is a user-like service: a map of counters whose state is not safe
// for concurrent use, declaring its conflicts (service.Conflicter).
type tally struct{}

func (tally) Name() string { return "test-tally" }
func (tally) Validate(op service.Op) error {
	if op.Kind != "add" && op.Kind != "read" {
		return fmt.Errorf("unknown %s", op.Kind)
	}
	return nil
}
func (tally) IsRead(op service.Op) bool { return op.Kind == "read" }
func (tally) NewState() service.State   { return &tallyState{n: map[string]int64{}} }
func (tally) ConflictKeys(op service.Op) []service.Lock {
	return []service.Lock{{Key: op.Key, Write: op.Kind == "add"}}
}

type tallyState struct{ n map[string]int64 }

func (s *tallyState) Apply(op service.Op) service.Result {
	if op.Kind == "add" {
		s.n[op.Key]++
	}
	return service.Int(s.n[op.Key])
}
func (s *tallyState) Snapshot() []byte {
	keys := make([]string, 0, len(s.n))
	for k := range s.n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b []byte
	for _, k := range keys {
		b = fmt.Appendf(b, "%s=%d;", k, s.n[k])
	}
	return b
}
func (s *tallyState) Restore([]byte) error { return nil }

// Any service that declares its conflicts runs on the live worker pool
// (issue 31 item 4), not the sharded KV alone: a state that is not safe
// for concurrent use (run with -race) reaches the answers and state of a
// sequential run, and the mixer made parallel batches.
func TestLiveExecutorRunsADeclaredService(t *testing.T) {
	var ops []service.Op
	for i := 0; i < 200; i++ {
		kind := "add"
		if i%3 == 0 {
			kind = "read"
		}
		ops = append(ops, service.Op{Kind: kind, Key: fmt.Sprint("k", i%40)})
	}
	par, seq := tally{}.NewState(), tally{}.NewState()
	// Cost runs in the workers before each request's work: count how many
	// run at once (a sleep lets them overlap even on a busy machine).
	var inflight, most atomic.Int32
	cost := func(service.Op) time.Duration {
		n := inflight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(200 * time.Microsecond)
		inflight.Add(-1)
		return 0
	}
	job := &execJob{State: par, Svc: tally{}, Entries: make([]entry, len(ops)), Skip: make([]bool, len(ops)), Cores: 4, Cost: cost}
	for i, op := range ops {
		job.Entries[i].Req.Op = op
	}
	res := runLive(job, 0)
	if most.Load() < 2 {
		t.Fatalf("at most %d requests ran at once on 4 workers: the service ran sequentially", most.Load())
	}
	sr, _ := RunBatchLive(tally{}, seq, ops, 1, 0, 0)
	if string(par.Snapshot()) != string(seq.Snapshot()) {
		t.Fatal("the parallel run's state differs from the sequential one's")
	}
	for i := range res.Results {
		if !res.Results[i].Equal(sr[i]) {
			t.Fatalf("request %d (%v): parallel %v, sequential %v", i, ops[i], res.Results[i], sr[i])
		}
	}
	if res.Batches < 2 || res.Batches >= len(ops) {
		t.Fatalf("the mixer made %d batches of %d requests: not run in parallel batches", res.Batches, len(ops))
	}
}
