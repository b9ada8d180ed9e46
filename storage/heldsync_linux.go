package storage

import (
	"os"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"syscall"
	"time"
)

// A loaded node's group-commit fdatasync that keeps its P (issue 28,
// branch pxs50, session 50).
//
// Go's sysmon wakes every 20 µs while it keeps finding a P to retake from
// a system call, backing off to 10 ms only after 50 wake-ups that found
// none. A blocking fdatasync (hundreds of µs to ms) is such a P, on every
// node, a few hundred times a second under pipelined SETs, so sysmon never
// backs off: counted per thread (/proc/PID/task/TID, sysmon being the
// process's first thread after the main one) under redis-benchmark -c 50
// -P 16 against a 3-node paxos cluster with fsync, sysmon took 12-16 % of
// the nodes' CPU at 0.12-0.18 wake-ups per SET, about half of all their
// voluntary context switches (docs/costs/s50-pxs50.md). Each retake also
// hands the P to another thread (a futex wake-up) and parks the syncing
// thread when it returns without one.
//
// So a frame of at least walBulkFrame bytes (DatasyncBulk: a loaded node's
// group commit; a lone writer's frames are smaller and keep the ordinary
// fdatasync) is synced with RawSyscall: the thread sleeps in the kernel
// for the flush but its P stays "running", so sysmon has nothing to
// retake, backs off, and nobody is woken to take the P over; back from the
// flush the goroutine continues at once. The same system call: durability
// is unchanged (the frame's commits are acknowledged only after it
// returns, with its error). What it costs: while the flush runs, its P
// runs nothing else (other Ps steal its queued goroutines), and a
// stop-the-world (the GC's two short pauses) waits for the flush to end.
// Hence three limits:
//   - never with GOMAXPROCS 1 (the process would stop for every flush);
//   - a held flush that took longer than heldMaxWait (a stalled disk)
//     makes the file's next heldBackoff bulk syncs ordinary ones, so a
//     stalled disk does not keep holding a P or delaying GC pauses;
//   - by default (session 51, with the peer sockets' raw I/O it pairs
//     with, transport/rawio.go) a bulk sync is held only when no
//     other goroutine runs or waits to run (procsIdle): a follower
//     between two Accepts, not a loaded leader. Holding every bulk sync
//     (SYNOD_WAL_HELDSYNC=1, session 50's mode) lowered CPU and context
//     switches per SET but also the SET rate, in 7 of 8 alternated rounds
//     at load 16-23 (while the flush holds the P, the goroutines it
//     readied wait unless the other P is free to steal them):
//     docs/costs/s50-pxs50.md. Held only when idle, nothing waits for the
//     P; and an idle process's sysmon is in its deep sleep, which the
//     ordinary fdatasync's entersyscall would end and reset to 20 µs
//     polling for the whole flush (with the transport's raw socket I/O,
//     transport/rawio.go, and the WAL's raw pwrite, rawwrite_linux.go, a
//     follower's Accept then makes no system call the scheduler sees):
//     docs/costs/s51-smon51.md. SYNOD_WAL_HELDSYNC=0 holds none.
//
// io_uring's held wait (SYNOD_WAL_IOURING, uring_linux.go) keeps the P
// too, interruptibly, but wakes an io-wq worker thread per sync; where a
// ring mode is set, it is used instead of this.

// heldOn and heldIdleOnly are SYNOD_WAL_HELDSYNC, read at start: unset
// or "idle" (the default) holds a bulk sync only when the process has
// nothing else to run (heldIdleOnly, procsIdle); "1" holds every bulk
// sync (session 50's mode); "0" holds none.
var (
	heldOn       = os.Getenv("SYNOD_WAL_HELDSYNC") != "0"
	heldIdleOnly = os.Getenv("SYNOD_WAL_HELDSYNC") != "1"
)

// heldMaxWait and heldBackoff: see above. A stall, not a busy disk: on
// the shared 2-core machine at load 25-30 (three nodes and other builds on
// one disk) group-commit flushes often exceed 5 ms, and a 5 ms bound
// turned most held syncs back into ordinary ones (sysmon's wake-ups per
// SET as without held syncs; with no bound 30-40 % fewer:
// docs/costs/s50-pxs50.md).
var (
	heldMaxWait = 50 * time.Millisecond
	heldBackoff = int64(64)
)

// heldSyncs counts held fdatasyncs (tests and figures); heldBusy the bulk
// syncs that heldIdleOnly left ordinary because the process had other work.
var heldSyncs, heldBusy atomic.Uint64

// procsIdle reports whether no other goroutine runs or waits to run (Go's
// runtime/metrics: the running goroutines, this one included, and the
// runnable ones): then a held flush keeps a P that nothing wants, and
// sysmon, had the flush been an ordinary system call, would not have
// retaken it either (it retakes a P in a system call only for queued work
// or when no other P is idle). One reader at a time per file (the WAL's
// writer).
func (f *osFile) procsIdle() bool {
	s := &f.idleSample
	if s[0].Name == "" {
		s[0].Name = "/sched/goroutines/running:goroutines"
		s[1].Name = "/sched/goroutines/runnable:goroutines"
	}
	metrics.Read(s[:])
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return false
	}
	return s[0].Value.Uint64() <= 1 && s[1].Value.Uint64() == 0
}

// heldDatasync syncs f with a held fdatasync and reports true, or reports
// false without syncing where a held sync is not to be used (see above):
// the caller then syncs the ordinary way.
func (f *osFile) heldDatasync() (bool, error) {
	if !heldOn || runtime.GOMAXPROCS(0) < 2 {
		return false, nil
	}
	if f.heldSkip.Load() > 0 {
		f.heldSkip.Add(-1)
		return false, nil
	}
	if heldIdleOnly && !f.procsIdle() {
		heldBusy.Add(1)
		return false, nil
	}
	fd := f.Fd()
	t0 := time.Now()
	var e syscall.Errno
	for {
		_, _, e = syscall.RawSyscall(syscall.SYS_FDATASYNC, fd, 0, 0)
		if e != syscall.EINTR {
			break
		}
	}
	if time.Since(t0) > heldMaxWait {
		f.heldSkip.Store(heldBackoff)
	}
	heldSyncs.Add(1)
	if e != 0 {
		return true, &os.PathError{Op: "fdatasync", Path: f.Name(), Err: e}
	}
	return true, nil
}
