package transport

import (
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Peer sockets read and written without Go's system-call bookkeeping
// (issue 28, branch smon51, session 51).
//
// An ordinary read or write of a socket (net.Conn, or syscall.Write as
// the inline write used before) goes through syscall.Syscall, which tells
// the scheduler the goroutine is in a system call (entersyscall). When
// every P of the process was idle, Go's sysmon thread is in a deep sleep,
// and that call wakes it (a futex wake-up) and resets its polling period
// to 20 µs: it then wakes every 20 µs for at least 50 times before it
// backs off again (runtime/proc.go, sysmon). A follower idles between the
// leader's Accepts, so each Accept's first read reset sysmon; counted at
// session 50 (docs/costs/s50-pxs50.md), sysmon was 17-19 % of a
// follower's CPU under redis-benchmark -P 16.
//
// Here a plaintext peer connection's reads and writes are read(2) and
// write(2) made with syscall.RawSyscall on the connection's non-blocking
// descriptor, inside syscall.RawConn's Read and Write: the call returns
// at once with data, EAGAIN or an error, so it never sleeps in the kernel
// and the scheduler need not know about it; on EAGAIN the goroutine waits
// in the netpoller exactly as net.Conn's Read and Write do (deadlines
// included). The bytes read and written are the same: the framing, the
// handshake and every error path are unchanged.
//
// Decision: TLS connections keep crypto/tls over net.Conn (the raw path is
// for plaintext only). crypto/tls reads and writes records through the
// net.Conn it wraps; giving it a raw-backed conn would work but puts the
// whole TLS record layer's error and deadline handling on this file for a
// mode whose cost is dominated by the cipher, not by sysmon. A connection
// that is not a *net.TCPConn (the gRPC split listener's prefixConn) keeps
// net.Conn too. On by default (with the WAL's raw bulk pwrite and the
// held-when-idle fdatasync, storage/): SYNOD_PEER_RAWIO=0 in a node's
// environment turns it off (an A/B of one binary). Figures, and the -race
// test failures that kept it off in session 51's first batch:
// docs/costs/s51-smon51.md.

// rawIO is SYNOD_PEER_RAWIO, read at start: raw socket I/O unless "0".
// New copies it into the Transport.
var rawIO = os.Getenv("SYNOD_PEER_RAWIO") != "0"

// rawReads and rawWrites count read(2) and write(2) calls made on the raw
// path (tests and figures).
var rawReads, rawWrites atomic.Uint64

// rawConnOf returns c's RawConn when c's reads and writes may take the raw
// path: plaintext TCP, raw I/O on.
func (t *Transport) rawConnOf(c net.Conn) syscall.RawConn {
	if !t.rawIO {
		return nil
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// sockReader reads c: through net.Conn until raw is set (the handshake),
// then by raw read(2) (see above). One goroutine reads it.
type sockReader struct {
	c   net.Conn
	rc  syscall.RawConn
	fn  func(fd uintptr) bool // r.readOnce, made once: a read allocates nothing
	b   []byte
	n   int
	err error
}

// raw switches r to raw reads of rc (nil: stay on net.Conn).
func (r *sockReader) raw(rc syscall.RawConn) {
	r.rc = rc
	if rc != nil && r.fn == nil {
		r.fn = r.readOnce
	}
}

func (r *sockReader) Read(p []byte) (int, error) {
	if r.rc == nil || len(p) == 0 {
		return r.c.Read(p)
	}
	r.b, r.n, r.err = p, 0, nil
	err := r.rc.Read(r.fn)
	n, rerr := r.n, r.err
	r.b, r.err = nil, nil
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		return 0, rerr
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// readOnce is one read(2) of r.b; false (EAGAIN) makes RawConn.Read wait
// for the descriptor to be readable and call it again.
func (r *sockReader) readOnce(fd uintptr) bool {
	for {
		rawReads.Add(1)
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.b[0])), uintptr(len(r.b)))
		switch e {
		case 0:
			r.n = int(n)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		r.err = os.NewSyscallError("read", e)
		return true
	}
}

// sockWriter writes every byte of p to rc by raw write(2), waiting in the
// netpoller while the socket is full (and until the write deadline).
type sockWriter struct {
	rc  syscall.RawConn
	fn  func(fd uintptr) bool
	b   []byte // what is left to write
	err error
}

func newSockWriter(rc syscall.RawConn) *sockWriter {
	w := &sockWriter{rc: rc}
	w.fn = w.writeSome
	return w
}

func (w *sockWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	w.b, w.err = p, nil
	err := w.rc.Write(w.fn)
	n := len(p) - len(w.b)
	if err == nil {
		err = w.err
	}
	w.b, w.err = nil, nil
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	return n, err
}

// writeSome writes w.b until it is all written (true), the socket is
// full (false: wait and come back) or an error (true, w.err).
func (w *sockWriter) writeSome(fd uintptr) bool {
	for len(w.b) > 0 {
		n, e := rawWrite(fd, w.b)
		switch e {
		case 0:
			w.b = w.b[n:]
		case syscall.EAGAIN:
			return false
		default:
			w.err = os.NewSyscallError("write", e)
			return true
		}
	}
	return true
}

// rawWrite is one write(2) of b on the non-blocking descriptor fd by
// RawSyscall, retried after EINTR only.
func rawWrite(fd uintptr, b []byte) (int, syscall.Errno) {
	for {
		rawWrites.Add(1)
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if e != syscall.EINTR {
			return int(n), e
		}
	}
}
