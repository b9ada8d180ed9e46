//go:build linux

package gateway

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// evNetConn is a loop connection's socket, owned outright (branch
// evloop49, session 49): the descriptor the listener accepted is
// duplicated and the Go connection closed, so the socket is in no epoll
// set of Go's netpoller, only in the loop's (session 48 kept it in both:
// each command woke Go's netpoller thread for nothing, +0.9 epoll waits
// per SET on an idle node). Decision (the fallback path): a goroutine
// that reads the connection (a command the loop does not serve: blocking
// forms, MULTI, subscriptions, scripts, pipelining, errors) reads through
// a Go connection made for it by net.FileConn from another duplicate (gc),
// and closes it when it hands the connection back, so the socket is in
// exactly one epoll set at a time: the loop's while the loop owns it, Go's
// while a goroutine does. The output buffer's writer goroutine (a client
// slow to read) borrows the same Go connection for its blocking write.
// The loop's reads, the direct writes (direct_unix.go), the arrival-order
// peek (order_unix.go) and CLIENT LIST's fd go to the descriptor itself
// through the RawConn below, under a read lock that Close takes for
// writing before it closes the descriptor, so no number is reused under
// a system call.
type evNetConn struct {
	fd           int          // the socket; -1 once closed
	lmu          sync.RWMutex // fd's lifetime: held for reading around each use
	laddr, raddr net.Addr
	c            *conn

	gmu    sync.Mutex
	gc     net.Conn // the Go connection (a duplicate in Go's netpoller); nil: none
	users  int      // gc's holders: the reading goroutine, the writer
	closed bool
	rdl    time.Time // deadlines set, applied to gc
	wdl    time.Time

	gcs atomic.Int64 // Go connections made (tests, counts)

	// The owning goroutine's raw read of gc (goRead; that goroutine
	// only): gc's RawConn, made once per Go connection, and the read in
	// progress (rawReadOnce, bound once: a read allocates nothing).
	rgc  net.Conn
	rrc  syscall.RawConn
	rfn  func(fd uintptr) bool
	rp   []byte
	rn   int
	rerr error
}

// own returns nc's socket as a loop connection's (evNetConn): its
// descriptor duplicated, nc closed. ok false: nc stays as it was.
func (l *evLoop) own(nc net.Conn) (net.Conn, bool) {
	if !l.takes(nc) {
		return nc, false
	}
	raw, err := nc.(syscall.Conn).SyscallConn()
	if err != nil {
		return nc, false
	}
	fd := -1
	var derr error
	if err := raw.Control(func(f uintptr) {
		fd, derr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil || derr != nil {
		return nc, false
	}
	e := &evNetConn{fd: fd, laddr: nc.LocalAddr(), raddr: nc.RemoteAddr()}
	nc.Close() // Go's descriptor leaves its netpoller; the socket lives on in fd
	return e, true
}

var errEvClosed = net.ErrClosed

func (e *evNetConn) LocalAddr() net.Addr  { return e.laddr }
func (e *evNetConn) RemoteAddr() net.Addr { return e.raddr }

// hold returns the Go connection, made if there is none (a duplicate of
// the socket for Go's netpoller), counting the caller as a holder.
func (e *evNetConn) hold() (net.Conn, error) {
	e.gmu.Lock()
	defer e.gmu.Unlock()
	if e.closed {
		return nil, errEvClosed
	}
	if e.gc == nil {
		gc, err := e.goConn()
		if err != nil {
			return nil, err
		}
		if !e.rdl.IsZero() {
			gc.SetReadDeadline(e.rdl)
		}
		if !e.wdl.IsZero() {
			gc.SetWriteDeadline(e.wdl)
		}
		e.gc = gc
		e.gcs.Add(1)
	}
	e.users++
	return e.gc, nil
}

// goConn makes a Go connection over a duplicate of the socket. gmu held.
func (e *evNetConn) goConn() (net.Conn, error) {
	e.lmu.RLock()
	if e.fd < 0 {
		e.lmu.RUnlock()
		return nil, errEvClosed
	}
	fd, err := unix.FcntlInt(uintptr(e.fd), unix.F_DUPFD_CLOEXEC, 0)
	e.lmu.RUnlock()
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "gateway-client")
	gc, err := net.FileConn(f) // its own duplicate, in Go's netpoller
	f.Close()
	return gc, err
}

// unhold drops a holder; the last one closes the Go connection (the
// socket leaves Go's netpoller).
func (e *evNetConn) unhold() {
	e.gmu.Lock()
	var gc net.Conn
	if e.users--; e.users == 0 {
		gc, e.gc = e.gc, nil
	}
	e.gmu.Unlock()
	if gc != nil {
		gc.Close()
	}
}

// goRead is a goroutine's read (it owns the connection): through the Go
// connection, held until the connection goes back to the loop (dropGo).
func (e *evNetConn) goRead(p []byte, held *bool) (int, error) {
	if !*held {
		if _, err := e.hold(); err != nil {
			return 0, err
		}
		*held = true
	}
	e.gmu.Lock()
	gc := e.gc
	e.gmu.Unlock()
	if gc == nil {
		return 0, errEvClosed
	}
	if rc := e.rawOf(gc); rc != nil && len(p) > 0 {
		e.rp, e.rn, e.rerr = p, 0, nil
		err := rc.Read(e.rfn)
		n, rerr := e.rn, e.rerr
		e.rp, e.rerr = nil, nil
		if err != nil {
			return 0, err
		}
		return n, rerr
	}
	return gc.Read(p)
}

// The goroutine's read of a connection it owns (goRead), like the loop's,
// by raw read(2) (rawio_linux.go; session 56): a read that finds no data
// waits in Go's netpoller as net.Conn's does (RawConn.Read: deadlines
// included), but neither read is a system call the scheduler sees. Through
// net.Conn each was one (entersyscall), which woke an idle process's
// sysmon: a Multi-Paxos leader serving one client's puts had 20 % of its
// futex calls there (docs/costs/s56-plat56.md).

// rawOf returns gc's RawConn for raw reads (nil: read through gc), made
// once per Go connection.
func (e *evNetConn) rawOf(gc net.Conn) syscall.RawConn {
	if !rawIO {
		return nil
	}
	if e.rgc != gc {
		e.rgc, e.rrc = gc, nil
		if sc, ok := gc.(syscall.Conn); ok {
			e.rrc, _ = sc.SyscallConn()
		}
		if e.rfn == nil {
			e.rfn = e.rawReadOnce
		}
	}
	return e.rrc
}

// rawReadOnce is one read(2) of e.rp: false (EAGAIN) makes RawConn.Read
// wait until the socket is readable and call it again.
func (e *evNetConn) rawReadOnce(fd uintptr) bool {
	n, err := sockReadOnce(fd, e.rp)
	if err == syscall.EAGAIN {
		return false
	}
	e.rn, e.rerr = max(n, 0), err
	return true
}

// Read is the owning goroutine's read when nothing else reads through
// the loop's reader (not used by the gateway: evReader calls goRead).
func (e *evNetConn) Read(p []byte) (int, error) {
	gc, err := e.hold()
	if err != nil {
		return 0, err
	}
	defer e.unhold()
	return gc.Read(p)
}

// Write is the writer goroutine's blocking write (limits.go), through the
// Go connection for as long as it writes.
func (e *evNetConn) Write(p []byte) (int, error) {
	gc, err := e.hold()
	if err != nil {
		return 0, err
	}
	defer e.unhold()
	return gc.Write(p)
}

func (e *evNetConn) SetDeadline(t time.Time) error {
	e.SetReadDeadline(t)
	return e.SetWriteDeadline(t)
}

func (e *evNetConn) SetReadDeadline(t time.Time) error {
	e.gmu.Lock()
	defer e.gmu.Unlock()
	e.rdl = t
	if e.gc != nil {
		return e.gc.SetReadDeadline(t)
	}
	return nil
}

func (e *evNetConn) SetWriteDeadline(t time.Time) error {
	e.gmu.Lock()
	defer e.gmu.Unlock()
	e.wdl = t
	if e.gc != nil {
		return e.gc.SetWriteDeadline(t)
	}
	return nil
}

// Close closes the socket: the Go connection (a goroutine's read or the
// writer's write in progress fails), then the descriptor once no system
// call uses it; a connection the loop owns is given to a goroutine, which
// meets the closed socket and ends it.
func (e *evNetConn) Close() error {
	e.gmu.Lock()
	if e.closed {
		e.gmu.Unlock()
		return errEvClosed
	}
	e.closed = true
	gc := e.gc
	e.gmu.Unlock()
	if gc != nil {
		gc.Close()
	}
	e.lmu.Lock()
	fd := e.fd
	e.fd = -1
	e.lmu.Unlock()
	if c := e.c; c != nil && c.s.ev != nil && c.s.ev.ok {
		unix.EpollCtl(c.s.ev.epfd, unix.EPOLL_CTL_DEL, fd, nil) // ENOENT when not watched
	}
	err := unix.Close(fd)
	if c := e.c; c != nil && c.ev.closed.CompareAndSwap(false, true) {
		c.s.ev.ready(c)
	}
	return err
}

// SyscallConn gives the descriptor itself (the loop's reads, direct
// writes, the order peek, CLIENT LIST's fd).
func (e *evNetConn) SyscallConn() (syscall.RawConn, error) { return evRaw{e}, nil }

// evRaw is an evNetConn's descriptor as a syscall.RawConn. Its Read and
// Write call f until it returns true, polling the socket in between;
// every caller in the gateway passes an f that never waits (returns true).
type evRaw struct{ e *evNetConn }

func (r evRaw) Control(f func(fd uintptr)) error {
	e := r.e
	e.lmu.RLock()
	defer e.lmu.RUnlock()
	if e.fd < 0 {
		return errEvClosed
	}
	f(uintptr(e.fd))
	return nil
}

func (r evRaw) Read(f func(fd uintptr) bool) error  { return r.poll(f, unix.POLLIN) }
func (r evRaw) Write(f func(fd uintptr) bool) error { return r.poll(f, unix.POLLOUT) }

func (r evRaw) poll(f func(fd uintptr) bool, ev int16) error {
	e := r.e
	for {
		e.lmu.RLock()
		fd := e.fd
		if fd < 0 {
			e.lmu.RUnlock()
			return errEvClosed
		}
		if f(uintptr(fd)) {
			e.lmu.RUnlock()
			return nil
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: ev}}
		_, err := unix.Poll(pfd, 10) // bounded: Close waits for the lock
		e.lmu.RUnlock()
		if err != nil && !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
