package storage

import (
	"os"
	"runtime"
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
//   - it is OFF by default: SYNOD_WAL_HELDSYNC=1 in a node's environment
//     turns it on. It lowered CPU and context switches per SET but also
//     the SET rate, in 7 of 8 alternated rounds at load 16-23 (while the
//     flush holds the P, the goroutines it readied wait unless the other P
//     is free to steal them): docs/costs/s50-pxs50.md.
//
// io_uring's held wait (SYNOD_WAL_IOURING, uring_linux.go) keeps the P
// too, interruptibly, but wakes an io-wq worker thread per sync; where a
// ring mode is set, it is used instead of this.

// heldOn is SYNOD_WAL_HELDSYNC, read at start: held syncs only with "1".
var heldOn = os.Getenv("SYNOD_WAL_HELDSYNC") == "1"

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

// heldSyncs counts held fdatasyncs (tests and figures).
var heldSyncs atomic.Uint64

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
