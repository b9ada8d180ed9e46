//go:build unix

package gateway

import "syscall"

// peeker is a connection's buffer for the peeks of its steps; fn is made
// once, so that a peek allocates nothing.
type peeker struct {
	buf [orderPeek]byte
	n   int
	fn  func(fd uintptr)
}

func newPeeker() *peeker {
	p := &peeker{}
	p.fn = p.peek
	return p
}

func (p *peeker) peek(fd uintptr) {
	p.n, _, _ = syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
}

// peekOrdered reports whether the bytes waiting in o's socket begin an
// ordered command (false when none wait or o cannot be peeked): one
// recv(MSG_PEEK|MSG_DONTWAIT), which consumes nothing, into p (the
// peeking connection's). Control keeps the descriptor open meanwhile; it
// does not wait for o's own read, which holds the read lock while it
// waits.
func (o *conn) peekOrdered(p *peeker) bool {
	if o.ord.raw == nil {
		return false
	}
	p.n = 0
	if err := o.ord.raw.Control(p.fn); err != nil || p.n <= 0 {
		return false
	}
	return peekedOrdered(p.buf[:p.n])
}
