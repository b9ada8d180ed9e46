package storage

import (
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// The WAL's frame write by RawSyscall (issue 28, branch smon51, session
// 51; on by default, SYNOD_WAL_RAWWRITE=0 in a node's environment turns it
// off).
//
// A pwrite(2) of a frame into the page cache takes microseconds; made
// through syscall.Syscall (os.File.WriteAt) it tells the scheduler the
// goroutine is in a system call (entersyscall), and when every P was idle
// that wakes Go's sysmon from its deep sleep and resets it to 20 µs
// polling (transport/rawio.go says what that costs). With the transport's
// peer reads raw, the WAL's pwrite was what woke a follower's sysmon
// (perf, docs/costs/s51-smon51.md). Made with RawSyscall the scheduler
// does not see it. The same system call with the same bytes and offset:
// durability is unchanged (the fdatasync after it is what makes the frame
// durable). Limits: a write slower than rawWriteMaxWait (page-cache
// throttling, a journal stall) makes the file's next rawWriteBackoff
// writes ordinary ones, so a stalled disk does not keep holding a P.
//
// Only frames of at least walBulkFrame bytes (a loaded node's group
// commits, like the held fdatasync) are written raw: a lone writer's frame
// keeps os.File's pwrite. With every frame raw, one paxos client's put p50
// was above main's range in 5 of 6 alternated rounds (load 40-55); with
// the peer sockets raw and the pwrite ordinary it was inside or below in 6
// of 6 (0.655 -> 0.557 ms median, CPU per put 660 -> 558 µs, load 30-37):
// docs/costs/s51-smon51.md.

// rawWriteOn is SYNOD_WAL_RAWWRITE, read at start: on unless "0".
var rawWriteOn = os.Getenv("SYNOD_WAL_RAWWRITE") != "0"

var (
	rawWriteMaxWait = 5 * time.Millisecond
	rawWriteBackoff = int64(64)
)

// rawWrites counts frame writes made by RawSyscall.
var rawWrites atomic.Uint64

// WriteAt is pwrite(2) of p at off: by RawSyscall where the raw write is on
// (above), else os.File's.
func (f *osFile) WriteAt(p []byte, off int64) (int, error) {
	if !rawWriteOn || len(p) < walBulkFrame {
		return f.File.WriteAt(p, off)
	}
	if f.rawSkip.Load() > 0 {
		f.rawSkip.Add(-1)
		return f.File.WriteAt(p, off)
	}
	fd := f.Fd()
	t0 := time.Now()
	done := 0
	for done < len(p) {
		n, _, e := syscall.RawSyscall6(syscall.SYS_PWRITE64, fd, uintptr(unsafe.Pointer(&p[done])), uintptr(len(p)-done), uintptr(off+int64(done)), 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return done, &os.PathError{Op: "write", Path: f.Name(), Err: e}
		}
		if n == 0 {
			return done, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.EIO}
		}
		done += int(n)
	}
	rawWrites.Add(1)
	if time.Since(t0) > rawWriteMaxWait {
		f.rawSkip.Store(rawWriteBackoff)
	}
	return done, nil
}
