package eve

import (
	"fmt"
	"math/rand"
	"runtime"
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
