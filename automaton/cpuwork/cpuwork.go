// Package cpuwork is a request's modelled computation in live runs: a fixed
// number of iterations of an arithmetic loop (Work), so that a request
// costs the same CPU work on every replica and every run, whatever the
// machine's load, and goroutines sharing one CPU take turns at it rather
// than overlapping (a wall-clock busy loop would let them overlap: each
// waits for a deadline while the others run, and a single CPU shows a
// "speedup"). Work is pure and deterministic; protocol code calls it.
//
// How many iterations make a millisecond of CPU on this machine is
// measured once per process, outside protocol code, by Calibrate (the
// thread's CPU clock, so a loaded machine does not shrink the work); the
// live runtime hands the figure to executors (automaton.ExecEnv.WorkPerMs),
// or a cluster file fixes it as a protocol parameter (eve's work_per_ms) so
// that every node does the same work.
package cpuwork

import (
	"runtime"
	"sync"
	"time"
)

// Work runs n iterations of a dependent multiply-add chain (a 64-bit LCG
// with a xorshift) and returns its value; the caller keeps the value alive
// (Sink) so the loop is not optimised away.
func Work(n uint64) uint64 {
	x := uint64(0x9E3779B97F4A7C15)
	for i := uint64(0); i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
		x ^= x >> 29
	}
	return x
}

// Iterations is the number of Work iterations that make d of CPU at
// perMs iterations per millisecond.
func Iterations(d time.Duration, perMs float64) uint64 {
	if d <= 0 || perMs <= 0 {
		return 0
	}
	return uint64(float64(d) / float64(time.Millisecond) * perMs)
}

var (
	once  sync.Once
	perMs float64
)

// Calibrate returns Work iterations per millisecond of this thread's CPU
// time, measured once per process (about 30 ms of CPU) and cached.
func Calibrate() float64 {
	once.Do(func() { perMs = measure(30 * time.Millisecond) })
	return perMs
}

// measure runs Work until the calling OS thread has used at least d of CPU
// and returns iterations per millisecond (the best of three chunks'
// rates, so that a preemption in one chunk does not lower it).
func measure(d time.Duration) float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	best := 0.0
	for chunk := 0; chunk < 3; chunk++ {
		var n uint64
		start := threadCPU()
		step := uint64(1 << 16)
		for threadCPU()-start < d/3 {
			Sink(Work(step))
			n += step
		}
		used := threadCPU() - start
		if r := float64(n) / (float64(used) / float64(time.Millisecond)); used > 0 && r > best {
			best = r
		}
	}
	return best
}

// threadCPU is the calling thread's CPU time (ThreadCPU); where it cannot
// be read (not Linux), the wall clock since the process started.
func threadCPU() time.Duration {
	if t, ok := ThreadCPU(); ok {
		return t
	}
	return time.Since(processStart)
}

var processStart = time.Now()

var sink struct {
	sync.Mutex
	v uint64
}

// Sink keeps a Work result alive.
func Sink(v uint64) {
	sink.Lock()
	sink.v ^= v
	sink.Unlock()
}
