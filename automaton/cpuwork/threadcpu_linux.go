//go:build linux

package cpuwork

import (
	"syscall"
	"time"
	"unsafe"
)

// clockThreadCPUTime is Linux's CLOCK_THREAD_CPUTIME_ID.
const clockThreadCPUTime = 3

// ThreadCPU is the calling OS thread's CPU time, user and system
// (clock_gettime CLOCK_THREAD_CPUTIME_ID, nanosecond resolution), and
// whether it could be read. getrusage's RUSAGE_THREAD, used before, splits
// the thread's time by scheduler ticks (4 ms here), so short spans read as
// a multiple of about 4 ms or 0. Callers that measure a span pin the
// goroutine to its thread (runtime.LockOSThread) or accept that a
// migration between threads spoils that span.
func ThreadCPU() (time.Duration, bool) {
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
