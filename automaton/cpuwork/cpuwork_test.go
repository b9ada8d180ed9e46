package cpuwork

import (
	"runtime"
	"testing"
	"time"
)

// Work is a function of n alone, and more iterations give other values.
func TestWorkDeterministic(t *testing.T) {
	if Work(1000) != Work(1000) {
		t.Fatal("Work(1000) differs between calls")
	}
	if Work(1000) == Work(1001) || Work(0) == Work(1) {
		t.Fatal("Work ignores n")
	}
}

// Calibrate gives a positive rate, and Iterations scales with the duration.
func TestCalibrateAndIterations(t *testing.T) {
	r := Calibrate()
	if r <= 0 {
		t.Fatalf("Calibrate = %v", r)
	}
	if Calibrate() != r {
		t.Fatal("Calibrate is not cached")
	}
	if a, b := Iterations(time.Millisecond, r), Iterations(2*time.Millisecond, r); a == 0 || b < 2*a-1 || b > 2*a+1 {
		t.Fatalf("Iterations: 1ms %d, 2ms %d", a, b)
	}
	if Iterations(0, r) != 0 || Iterations(time.Millisecond, 0) != 0 {
		t.Fatal("Iterations of no time or no rate is not 0")
	}
}

// Calibrated work costs about the CPU time it stands for: 20 ms of work
// uses between 5 and 80 ms of this thread's CPU (wide: the machine is
// shared, and the rate is the best of three chunks).
func TestCalibratedWorkUsesCPU(t *testing.T) {
	n := Iterations(20*time.Millisecond, Calibrate())
	lockAndMeasure := func() time.Duration {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		start := threadCPU()
		Sink(Work(n))
		return threadCPU() - start
	}
	if d := lockAndMeasure(); d < 5*time.Millisecond || d > 80*time.Millisecond {
		t.Fatalf("20 ms of calibrated work used %v of CPU", d)
	}
}
