package storage

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// An fdatasync that Go's scheduler does not see block (issue 28, branch
// fsync45, session 45). A blocking fdatasync holds its thread and its P for
// the whole flush (hundreds of µs to ms): Go's sysmon, which wakes every
// 20 µs while a P sits in a system call, retakes the P and hands it to
// another thread (a futex wake-up), and the syncing thread, back without a
// P, parks (another futex) while its goroutine queues for one. Counted with
// uprobes on a 3-node paxos cluster under redis-benchmark -P 16 (docs/COSTS.md,
// "fsync45, session 45"): 0.84 hand-offs of the leader's P per fdatasync,
// 0.27 of a follower's, 0.041-0.045 futex calls per SET at the leader.
//
// Here the WAL's fdatasync is IORING_OP_FSYNC with IORING_FSYNC_DATASYNC
// (fdatasync's semantics) on an io_uring of the file, submitted and waited
// for in one io_uring_enter (GETEVENTS with a ringHold timeout) made with
// RawSyscall: the thread sleeps in the kernel while the io-wq worker
// flushes, but keeps its P, so sysmon has nothing to retake and nobody is
// woken to take over; back, the goroutine continues at once. The wait is
// interruptible, unlike fdatasync's: Go's preemption signal (a
// stop-the-world, a stack scan, sysmon's 10 ms preemption) ends it with
// EINTR, and so does ringHold; the goroutine then waits the ordinary way
// (io_uring_enter through syscall.Syscall6, which the scheduler sees), so a
// slow disk holds no P and delays no stop-the-world. With GOMAXPROCS 1 it
// always waits the ordinary way (a held wait would stop the process).
// Measured: the leader's futex calls per SET -60 %, its P hand-offs per sync
// 0.84 -> 0.15-0.21, a follower's 0.27 -> 0.03.
//
// Tried and rejected: waiting by reading an eventfd registered with the
// ring through Go's netpoller (ringPoller, kept for
// BenchmarkDatasyncPath): a scheduler with runnable goroutines polls the
// network late (up to sysmon's 10 ms), so a sync took 10 ms at p50 with
// GOMAXPROCS goroutines runnable, against 0.13-0.19 ms for fdatasync, and a
// live cluster did 30-40 % fewer SETs per second in 4 of 4 rounds.
//
// **Off by default** (SYNOD_WAL_IOURING=1 in a node's environment turns it
// on for every sync, =bulk for large frames only): the io-wq worker that
// runs the fsync is one more thread to wake and schedule per sync, and a
// lone writer pays it on its critical path. One closed-loop client, 4 alternated rounds, load 11-15 (scripts/bench-latency13,
// docs/COSTS.md): unreplicated put p50 0.220 -> 0.398 ms (worse in 3 of 4),
// paxos put p50 0.552 -> 0.520 ms but p99 2.8-4.6 -> 6.0-17.0 ms (worse in 4
// of 4). Issue 28 allows no protocol's one-client latency to get worse, so
// pipelined SET's gain (CPU per SET lower in 6 of 6 rounds) is kept as an
// option. SYNOD_WAL_IOURING=bulk (session 46) uses the ring only for frames
// of at least walBulkFrame bytes, so a lone writer keeps fdatasync; it too
// is off by default (see ringMode).
//
// Durability is unchanged: Datasync returns only after reaping the
// completion of the fsync it submitted, with that fsync's result (an error
// is the fdatasync's error, and the WAL fails as before). Where io_uring
// cannot be set up (a kernel without it or without IORING_FEAT_EXT_ARG
// (5.11), io_uring_disabled, a seccomp profile that refuses it: EPERM,
// ENOSYS) or a submission fails, Datasync is the plain fdatasync system
// call; RingStatus says which, and OpenWAL logs the fallback.

const (
	iouringOpFsync        = 3
	iouringFsyncDatasync  = 1
	iouringSqeAsync       = 1 << 4 // IOSQE_ASYNC: straight to io-wq (an fsync never completes inline)
	iouringRegisterEvfd   = 4
	iouringOffSqRing      = 0
	iouringOffCqRing      = 0x8000000
	iouringOffSqes        = 0x10000000
	iouringFeatSingleMmap = 1
	iouringSqeSize        = 64
	iouringCqeSize        = 16
	iouringEnterGetevents = 1
	iouringEnterExtArg    = 1 << 3
	iouringFeatExtArg     = 1 << 8
)

type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  struct{ head, tail, ringMask, ringEntries, flags, dropped, array, resv1, userAddrLo, userAddrHi uint32 }
	cqOff                                                                  struct{ head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1, userAddrLo, userAddrHi uint32 }
}

// Where the ring is used (SYNOD_WAL_IOURING in a node's environment, read
// at start): ringOff (the default, variable unset or "0") for no sync;
// ringAll ("1", session 45's option) for every sync; ringBulk ("bulk",
// branch pxs46, session 46) for the syncs of frames of at least
// walBulkFrame bytes only (DatasyncBulk): a loaded node's group commits,
// while a lone writer's small frames keep fdatasync and its latency. Bulk
// is not the default: at load 24 on the 2-core machine it lowered the
// leader's futex calls per SET by 30-50 % but raised the followers' CPU and
// context switches per SET (the io-wq worker's wake-up on every sync) by
// more than the leader saved (docs/COSTS.md, pxs46, session 46). Since
// session 47 (pxs47) bulk's ring is lazy: made after a run of bulk syncs,
// closed after a run of plain ones (osFile.lazySync), so a lone writer has
// no ring and no io-wq threads.
const (
	ringOff = iota
	ringBulk
	ringAll
)

var ringMode = ringModeOf(os.Getenv("SYNOD_WAL_IOURING"))

func ringModeOf(v string) int {
	switch v {
	case "1":
		return ringAll
	case "bulk":
		return ringBulk
	}
	return ringOff
}

// uringSetup is io_uring_setup; tests replace it to refuse the ring.
var uringSetup = func(entries uint32, p *uringParams) (int, error) {
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// Counts of Datasync calls by path (tests, and the figures of docs/COSTS.md).
var ringSyncs, plainSyncs atomic.Uint64

// Counts of lazy rings opened and closed (bulk mode, osFile.lazySync).
var ringOpens, ringCloses atomic.Uint64

type ringProbeState struct {
	once sync.Once
	err  error
}

var ringProbe = &ringProbeState{}

// RingStatus reports whether Datasync uses io_uring in this process, and if
// not, why (io_uring_setup's error). It probes once.
func RingStatus() (bool, error) {
	p := ringProbe
	p.once.Do(func() {
		r, err := newRing()
		if err == nil {
			r.close()
		}
		p.err = err
	})
	return p.err == nil, p.err
}

// ring is one io_uring with one submission in flight at a time (mu), its
// completions signalled on efd.
type ring struct {
	mu      sync.Mutex
	fd      int
	efd     *os.File // ringPoller's non-blocking eventfd: reads wait in the netpoller
	mem     []byte   // SQ and CQ rings (one mapping: IORING_FEAT_SINGLE_MMAP)
	sqes    []byte
	sqTail  *uint32
	sqMask  uint32
	sqArray unsafe.Pointer
	cqHead  *uint32
	cqTail  *uint32
	cqMask  uint32
	cqes    unsafe.Pointer
	broken  bool // a submission failed: use fdatasync from now on
	// The held wait's arguments (enterHeld): on the heap, where the kernel
	// reads them; a goroutine's stack may move.
	arg uringGeteventsArg
	ts  [2]int64
}

func newRing() (*ring, error) {
	var p uringParams
	fd, err := uringSetup(2, &p)
	if err != nil {
		return nil, &os.SyscallError{Syscall: "io_uring_setup", Err: err}
	}
	r := &ring{fd: fd}
	fail := func(call string, err error) (*ring, error) {
		r.close()
		return nil, &os.SyscallError{Syscall: call, Err: err}
	}
	if p.features&iouringFeatSingleMmap == 0 || p.features&iouringFeatExtArg == 0 {
		return fail("io_uring_setup", syscall.ENOTSUP) // kernels before 5.11: no timed wait
	}
	size := max(int(p.sqOff.array)+4*int(p.sqEntries), int(p.cqOff.cqes)+iouringCqeSize*int(p.cqEntries))
	if r.mem, err = unix.Mmap(fd, iouringOffSqRing, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fail("mmap", err)
	}
	if r.sqes, err = unix.Mmap(fd, iouringOffSqes, iouringSqeSize*int(p.sqEntries), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fail("mmap", err)
	}
	r.sqTail = (*uint32)(unsafe.Pointer(&r.mem[p.sqOff.tail]))
	r.sqMask = *(*uint32)(unsafe.Pointer(&r.mem[p.sqOff.ringMask]))
	r.sqArray = unsafe.Pointer(&r.mem[p.sqOff.array])
	r.cqHead = (*uint32)(unsafe.Pointer(&r.mem[p.cqOff.head]))
	r.cqTail = (*uint32)(unsafe.Pointer(&r.mem[p.cqOff.tail]))
	r.cqMask = *(*uint32)(unsafe.Pointer(&r.mem[p.cqOff.ringMask]))
	r.cqes = unsafe.Pointer(&r.mem[p.cqOff.cqes])
	if !ringPoller {
		return r, nil
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fail("eventfd", err)
	}
	r.efd = os.NewFile(uintptr(efd), "io_uring-eventfd")
	e32 := int32(efd)
	if _, _, e := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(fd), iouringRegisterEvfd, uintptr(unsafe.Pointer(&e32)), 1, 0, 0); e != 0 {
		return fail("io_uring_register", e)
	}
	return r, nil
}

func (r *ring) close() {
	if r.efd != nil {
		r.efd.Close()
	}
	if r.sqes != nil {
		unix.Munmap(r.sqes)
	}
	if r.mem != nil {
		unix.Munmap(r.mem)
	}
	unix.Close(r.fd)
}

// ringHold is how long a ring's waiter waits for its fsync holding its P
// (an interruptible io_uring_enter with a timeout that does not tell Go's
// scheduler it is in a system call) before it waits the ordinary way.
const ringHold = 5 * time.Millisecond

// ringPoller makes datasync wait by reading the eventfd through the
// netpoller instead (BenchmarkDatasyncPath: slower, see the package doc).
var ringPoller = false

// datasync submits IORING_OP_FSYNC with IORING_FSYNC_DATASYNC for fd and
// waits for its completion. submitted=false: the ring could not take it
// (the caller calls fdatasync itself); otherwise err is the fsync's result.
func (r *ring) datasync(fd int) (submitted bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.broken {
		return false, nil
	}
	// One submission at a time: the slot at the tail is free.
	tail := atomic.LoadUint32(r.sqTail)
	idx := tail & r.sqMask
	sqe := r.sqes[idx*iouringSqeSize : (idx+1)*iouringSqeSize]
	clear(sqe)
	sqe[0] = iouringOpFsync
	sqe[1] = iouringSqeAsync
	*(*int32)(unsafe.Pointer(&sqe[4])) = int32(fd)
	*(*uint32)(unsafe.Pointer(&sqe[28])) = iouringFsyncDatasync
	*(*uint64)(unsafe.Pointer(&sqe[32])) = uint64(tail) // user_data
	*(*uint32)(unsafe.Add(r.sqArray, 4*uintptr(idx))) = idx
	atomic.StoreUint32(r.sqTail, tail+1)
	// Submit, and (unless ringPoller) wait up to ringHold in the same
	// call. An error means nothing was submitted (io_uring_enter returns
	// the number submitted whenever it is not 0).
	for {
		var n uintptr
		var e syscall.Errno
		if r.efd != nil || runtime.GOMAXPROCS(0) < 2 {
			// With one P a held wait would stop the whole process.
			n, _, e = unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 1, 0, 0, 0, 0)
		} else {
			n, e = r.enterHeld(1, ringHold)
		}
		if e == syscall.EINTR && n != 1 {
			continue
		}
		if n != 1 {
			// Not taken (or taken in a state we cannot follow): the
			// caller syncs with fdatasync, which covers whatever this
			// ring may still do with the entry; never use it again.
			r.broken = true
			return false, nil
		}
		break
	}
	var buf [8]byte
	for {
		head := atomic.LoadUint32(r.cqHead)
		if head != atomic.LoadUint32(r.cqTail) {
			cqe := unsafe.Add(r.cqes, iouringCqeSize*uintptr(head&r.cqMask))
			res := *(*int32)(unsafe.Add(cqe, 8))
			atomic.StoreUint32(r.cqHead, head+1)
			if *(*uint64)(cqe) != uint64(tail) {
				continue // not ours (cannot happen with one in flight): skip it
			}
			if res < 0 {
				return true, syscall.Errno(-res)
			}
			return true, nil
		}
		if r.efd != nil {
			// The kernel posts the completion, then signals the eventfd: a
			// count read here may be an earlier completion's, so look again.
			if _, err := r.efd.Read(buf[:]); err == nil {
				continue
			}
		}
		// The held wait ended without the completion: ringHold passed, or
		// a signal cut it short (Go's preemption: a stop-the-world or a
		// stack scan waits for this goroutine). Wait the ordinary way, a
		// system call the scheduler sees: a slow disk holds no P, and a
		// stop-the-world waits for none.
		unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 0, 1, iouringEnterGetevents, 0, 0)
	}
}

// enterHeld is io_uring_enter(submit, min_complete 1, GETEVENTS|EXT_ARG)
// with a timeout at deadline, made without telling the scheduler: the P
// stays with this goroutine's thread, so sysmon never retakes it and no
// other thread is woken to run it, and the thread, back, continues at once.
// The wait is interruptible (a signal ends it with EINTR), unlike a
// blocking fdatasync's. It returns the number submitted and the error.
func (r *ring) enterHeld(submit uintptr, d time.Duration) (uintptr, syscall.Errno) {
	r.ts = [2]int64{int64(d / time.Second), int64(d % time.Second)}
	r.arg = uringGeteventsArg{ts: uint64(uintptr(unsafe.Pointer(&r.ts)))}
	n, _, e := unix.RawSyscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), submit, 1,
		iouringEnterGetevents|iouringEnterExtArg, uintptr(unsafe.Pointer(&r.arg)), unsafe.Sizeof(r.arg))
	if e != 0 {
		n = 0
	}
	return n, e
}

// uringGeteventsArg is struct io_uring_getevents_arg.
type uringGeteventsArg struct {
	sigmask     uint64
	sigmaskSize uint32
	minWaitUsec uint32
	ts          uint64 // *struct __kernel_timespec
}
