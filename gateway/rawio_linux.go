//go:build linux

package gateway

import (
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The client sockets' reads and writes without Go's system-call
// bookkeeping (issue 28, branch gw52, session 52).
//
// The event loop's reads of the plaintext client sockets it owns
// (evReader.read, evloop.go) and the direct reply writes
// (directWriter.write, direct_unix.go: a reply written at once by the
// goroutine that has it, loop or not) are read(2) and write(2) on a
// non-blocking descriptor: each returns at once with data, EAGAIN or an
// error and never sleeps in the kernel. Made by syscall.Syscall, each told
// the scheduler the goroutine was in a system call (entersyscall and
// exitsyscall), which wakes Go's sysmon thread from its idle sleep and
// resets it to 20 µs polling (runtime/proc.go, sysmon; counted at session
// 51, docs/costs/s51-smon51.md: with the peer sockets and the WAL raw, the
// leader's remaining sysmon wakers were the gateway's reads and reply
// writes). Here they are made by syscall.RawSyscall, as the peer sockets'
// are (transport/rawio.go): the same bytes, the same results (EINTR
// retried by the callers, EAGAIN ending the loop's read and the direct
// write as before, where the writer goroutine or the next epoll wait takes
// over), no P hand-off and no sysmon wake-up.
//
// Decision: TLS connections are not touched (they are not loop
// connections and have no direct writer). The writer goroutine's blocking
// writes stay on net.Conn. The goroutine path's reads (goRead,
// evconn_linux.go) are raw too since session 56: through RawConn.Read,
// which waits in Go's netpoller between them. SYNOD_GATEWAY_RAWIO=0
// in a node's environment turns the raw calls off (an A/B of one binary).
// The loop's readiness check (evLoop.check, evloop_linux.go: a
// zero-timeout epoll_wait, which never sleeps either) is made raw too. The
// eventfd's read and write and the blocking epoll_wait of a loop outside
// Go's netpoller stay as they are.

// rawIO is SYNOD_GATEWAY_RAWIO, read at start: raw client socket I/O
// unless "0".
var rawIO = os.Getenv("SYNOD_GATEWAY_RAWIO") != "0"

// rawReads and rawWrites count the read(2) and write(2) calls made on the
// raw path, and rawPolls the zero-timeout epoll_waits (tests and figures).
var rawReads, rawWrites, rawPolls atomic.Uint64

// sockRead is one read(2) of fd into p: by RawSyscall when rawIO is on,
// else syscall.Read. An error is the bare errno (EINTR and EAGAIN compare
// equal to syscall's); the caller retries EINTR.
func sockRead(fd uintptr, p []byte) (int, error) {
	if !rawIO || len(p) == 0 {
		return syscall.Read(int(fd), p)
	}
	rawReads.Add(1)
	n, err := rawRW(syscall.SYS_READ, fd, p)
	raceAfterRead(fd, p, n)
	return n, err
}

// sockWrite is one write(2) of p to fd, as sockRead reads.
func sockWrite(fd uintptr, p []byte) (int, error) {
	if !rawIO || len(p) == 0 {
		return syscall.Write(int(fd), p)
	}
	rawWrites.Add(1)
	raceBeforeWrite(fd, p)
	return rawRW(syscall.SYS_WRITE, fd, p)
}

// rawRW is read(2) or write(2) (trap) of p on fd by RawSyscall.
func rawRW(trap, fd uintptr, p []byte) (int, error) {
	n, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// epollPoll is epoll_wait(epfd, evs, 0), which returns at once: by
// RawSyscall6 (epoll_pwait with no signal mask, as unix.EpollWait on
// arm64) when rawIO is on, else unix.EpollWait. An error returns 0 events.
func epollPoll(epfd int, evs []unix.EpollEvent) (int, error) {
	if !rawIO || len(evs) == 0 {
		return unix.EpollWait(epfd, evs, 0)
	}
	rawPolls.Add(1)
	n, _, e := syscall.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
