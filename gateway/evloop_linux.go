//go:build linux

package gateway

import (
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// evLoop is the client event loop (evloop.go): one goroutine waiting on an
// epoll set (level-triggered) of the connections it owns, and an eventfd
// (key 0) that wakes it for connections queued by other goroutines (a
// reply written while the loop held the next command; a Close; stop).
type evLoop struct {
	s     *Server
	once  sync.Once
	ok    bool // started: epfd and efd open, run running
	epfd  int
	efd   int
	epf   *os.File        // epfd in Go's netpoller (wait); nil: blocking epoll_wait
	eprc  syscall.RawConn // epf's
	w     evWait          // the wait in progress (loop goroutine only)
	hold  bool            // this turn's requests are held for one pass (loop goroutine only)
	kicks []string        // the namespaces with requests held this turn
	wfn   func(uintptr) bool

	woken atomic.Bool

	mu      sync.Mutex
	stopped bool
	conns   map[uint32]*conn     // owned by the loop
	single  atomic.Pointer[conn] // the only connection in conns; nil: none or several
	queue   []*conn
	spare   []*conn

	// Counts for tests and benchmarks.
	handoffs atomic.Int64 // connections given to a goroutine
	backs    atomic.Int64 // connections given back by a goroutine
	steps    atomic.Int64 // readable sockets served
	singles  atomic.Int64 // of which served without an epoll_wait (wait's -1)
	wakes    atomic.Int64 // wake-ups by the eventfd
	waits    atomic.Int64 // epoll_wait calls
}

// EventLoopStats are the client event loop's counts (evloop.go).
type EventLoopStats struct {
	Steps, Handoffs, HandBacks, Wakes, Waits int64
}

// EventLoopStats returns the event loop's counts; zero when it is off.
func (s *Server) EventLoopStats() EventLoopStats {
	l := s.ev
	if l == nil {
		return EventLoopStats{}
	}
	return EventLoopStats{Steps: l.steps.Load(), Handoffs: l.handoffs.Load(), HandBacks: l.backs.Load(),
		Wakes: l.wakes.Load(), Waits: l.waits.Load()}
}

// newEvLoop returns s's event loop, or nil when it is off (the option,
// SYNOD_GATEWAY_EVLOOP) or s's Backend cannot answer by callback.
func newEvLoop(s *Server) *evLoop {
	on := s.opts.EventLoop
	if v := os.Getenv("SYNOD_GATEWAY_EVLOOP"); v != "" {
		on = v == "1"
	}
	if !on {
		return nil
	}
	if _, ok := s.b.(ReplyBackend); !ok {
		return nil
	}
	return &evLoop{s: s, conns: map[uint32]*conn{}}
}

// takes reports whether the loop serves nc (a plaintext TCP or Unix
// socket); it starts the loop the first time. s.mu held, s not closed.
func (l *evLoop) takes(nc net.Conn) bool {
	if l == nil || l.s.noReplyFn {
		return false
	}
	switch nc.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return false // TLS
	}
	l.once.Do(l.start)
	return l.ok
}

func (l *evLoop) start() {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		l.s.log.Warn("event loop off: epoll_create1 failed", "err", err)
		return
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		l.s.log.Warn("event loop off: eventfd failed", "err", err)
		return
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: 0}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, efd, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(efd)
		l.s.log.Warn("event loop off: epoll_ctl failed", "err", err)
		return
	}
	l.epfd, l.efd, l.ok = epfd, efd, true
	// The loop's goroutine waits for its epoll set in Go's netpoller (the
	// epoll descriptor is itself pollable), not in a blocking epoll_wait:
	// a thread asleep in a system call keeps its P for up to 10 ms
	// (sysmon's retake), so the goroutines the loop readied (peer readers,
	// a committer) would share the node's other P.
	if unix.SetNonblock(epfd, true) == nil {
		f := os.NewFile(uintptr(epfd), "gateway-evloop")
		if rc, err := f.SyscallConn(); err == nil {
			l.epf, l.eprc, l.wfn = f, rc, l.check
		}
	}
	l.s.wg.Add(1)
	go l.run()
}

// add serves new connection c: the loop's when it may serve it, else its
// goroutine's.
func (l *evLoop) add(c *conn) {
	c.s.log.Debug("client connected", "id", c.id, "remote", c.nc.RemoteAddr().String())
	if !c.handBack() {
		go c.serveFrom(evResume{})
	}
}

// giveBack gives c, owned by its goroutine, to the loop; false when the
// loop takes no more (stopped) or c's socket is gone.
func (l *evLoop) giveBack(c *conn) bool {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return false
	}
	c.ev.rd.dropGo() // out of Go's netpoller before the loop's set (evconn_linux.go)
	c.ev.rd.mode = evSpent
	c.ev.owner.Store(evOwnLoop)
	l.conns[c.ev.key] = c
	l.noteSingle()
	l.mu.Unlock()
	var eerr error
	err := c.ev.rd.raw.Control(func(fd uintptr) {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(c.ev.key)}
		eerr = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err == nil && eerr == nil {
		l.backs.Add(1)
		return true
	}
	if !c.ev.owner.CompareAndSwap(evOwnLoop, evOwnGoroutine) {
		return true // the loop took it (a Close) and gave it to a goroutine
	}
	l.mu.Lock()
	delete(l.conns, c.ev.key)
	l.noteSingle()
	l.mu.Unlock()
	c.ev.rd.mode = evPass
	return false
}

// holding reports whether the loop holds this turn's requests for one
// pass (submitReply). Loop goroutine only.
func (l *evLoop) holding() bool { return l != nil && l.hold }

// held notes that a request of namespace ns waits for the turn's Kick.
func (l *evLoop) held(ns string) {
	for _, k := range l.kicks {
		if k == ns {
			return
		}
	}
	l.kicks = append(l.kicks, ns)
}

// noteSingle records the loop's only connection, if it has one. l.mu held.
func (l *evLoop) noteSingle() {
	var one *conn
	if len(l.conns) == 1 {
		for _, c := range l.conns {
			one = c
		}
	}
	l.single.Store(one)
}

// handoff gives c, owned by the loop, to a goroutine starting at r.
func (l *evLoop) handoff(c *conn, r evResume) {
	if !c.ev.owner.CompareAndSwap(evOwnLoop, evOwnGoroutine) {
		return
	}
	l.mu.Lock()
	delete(l.conns, c.ev.key)
	l.noteSingle()
	l.mu.Unlock()
	l.unwatch(c)
	c.ev.rd.mode = evPass
	l.handoffs.Add(1)
	go c.serveFrom(r)
}

// unwatch takes c's socket out of the epoll set (a closed socket left it).
func (l *evLoop) unwatch(c *conn) {
	c.ev.rd.raw.Control(func(fd uintptr) {
		unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
	})
}

// ready queues c for the loop: its reply was written while the loop held
// its next command (replyLoopWaited), or it was closed.
func (l *evLoop) ready(c *conn) {
	if l == nil || !l.ok {
		return
	}
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	l.queue = append(l.queue, c)
	l.mu.Unlock()
	l.wake()
}

func (l *evLoop) wake() {
	if l.woken.CompareAndSwap(false, true) {
		var one = [8]byte{1}
		unix.Write(l.efd, one[:])
	}
}

// stop gives every connection of the loop to a goroutine (the server is
// closing: their reads fail and they end) and ends the loop.
func (l *evLoop) stop() {
	if l == nil {
		return
	}
	l.once.Do(func() {}) // a loop not started stays so
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
	if l.ok {
		l.wake()
	}
}

func (l *evLoop) run() {
	defer l.s.wg.Done()
	evs := make([]unix.EpollEvent, 256)
	for {
		n, err := l.wait(evs)
		l.waits.Add(1)
		if n < 0 { // woken with one connection in the set: serve it without asking epoll
			if c := l.single.Load(); c != nil && c.ev.owner.Load() == evOwnLoop {
				l.steps.Add(1)
				l.singles.Add(1)
				l.serve(c, true)
			}
			n = 0
		}
		if err != nil && err != syscall.EINTR {
			l.s.log.Error("event loop: epoll_wait failed", "err", err)
			l.mu.Lock()
			l.stopped = true
			l.mu.Unlock()
		}
		l.hold = n > 1 // several sockets: their requests go in one pass (Kick below)
		for i := 0; i < n; i++ {
			key := uint32(evs[i].Fd)
			if key == 0 {
				// Cleared before the read: a wake after it writes again.
				l.woken.Store(false)
				var b [8]byte
				unix.Read(l.efd, b[:])
				l.wakes.Add(1)
				continue
			}
			l.mu.Lock()
			c := l.conns[key]
			l.mu.Unlock()
			if c == nil {
				continue
			}
			if c.ev.owner.Load() != evOwnLoop {
				l.unwatch(c)
				continue
			}
			l.steps.Add(1)
			l.serve(c, true)
		}
		l.hold = false
		if len(l.kicks) > 0 {
			tb := l.s.b.(TurnBackend) // held only through one
			for i, ns := range l.kicks {
				tb.Kick(ns)
				l.kicks[i] = ""
			}
			l.kicks = l.kicks[:0]
		}
		l.mu.Lock()
		q := l.queue
		l.queue, l.spare = l.spare[:0], q
		stopped := l.stopped
		l.mu.Unlock()
		for i, c := range q {
			if c.ev.owner.Load() == evOwnLoop {
				l.serve(c, false)
			}
			q[i] = nil
		}
		if stopped {
			l.mu.Lock()
			var all []*conn
			for _, c := range l.conns {
				all = append(all, c)
			}
			l.mu.Unlock()
			for _, c := range all {
				l.handoff(c, evResume{})
			}
			if l.epf != nil {
				l.epf.Close()
			} else {
				unix.Close(l.epfd)
			}
			unix.Close(l.efd)
			return
		}
	}
}

// wait returns the ready events of the loop's set: parked in Go's
// netpoller until the set has one (a zero-timeout epoll_wait finds them),
// or in a blocking epoll_wait where the set cannot be polled. Woken by Go
// with a single connection in the set (one client), it returns -1 instead
// of asking epoll which: the caller reads that connection (EAGAIN if the
// wake was the eventfd's), and the next wait's first check, a
// zero-timeout epoll_wait on the level-triggered set, reports whatever is
// still ready. So a lone client's command costs a read and that one check,
// as a goroutine's costs a read and the EAGAIN read, not two epoll_waits
// and a read.
func (l *evLoop) wait(evs []unix.EpollEvent) (int, error) {
	if l.eprc != nil {
		l.w = evWait{evs: evs}
		err := l.eprc.Read(l.wfn)
		if err == nil {
			n, werr := l.w.n, l.w.err
			l.w = evWait{}
			return n, werr
		}
		l.s.log.Warn("event loop: waiting in Go's netpoller failed; blocking epoll_wait from now", "err", err)
		l.eprc = nil
	}
	return unix.EpollWait(l.epfd, evs, -1)
}

// evWait is one wait's state for check (bound once: a closure per wait
// cost three allocations).
type evWait struct {
	evs     []unix.EpollEvent
	n       int
	err     error
	checked bool
}

// check is the loop's test in Go's netpoller (wait): true when it has
// something to serve.
func (l *evLoop) check(fd uintptr) bool {
	w := &l.w
	if w.checked && l.single.Load() != nil {
		w.n = -1
		return true
	}
	w.checked = true
	w.n, w.err = epollPoll(int(fd), w.evs) // raw unless SYNOD_GATEWAY_RAWIO=0: rawio_linux.go
	return w.n > 0 || (w.err != nil && w.err != syscall.EINTR)
}

// serve runs c's step and gives c to a goroutine when the step says so,
// or when c is the server's only connection (evAlone).
func (l *evLoop) serve(c *conn, read bool) {
	if r, stay := c.evStep(read); !stay {
		l.handoff(c, r)
	} else if l.s.evAlone() {
		l.handoff(c, evResume{})
	}
}
