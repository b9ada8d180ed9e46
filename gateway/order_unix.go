//go:build unix

package gateway

import "syscall"

// peekOrdered reports whether the bytes waiting in o's socket begin an
// ordered command (false when none wait or o cannot be peeked): one
// recv(MSG_PEEK|MSG_DONTWAIT), which consumes nothing. Control keeps the
// descriptor open meanwhile; it does not wait for o's own read, which
// holds the read lock while it waits.
func (o *conn) peekOrdered() bool {
	if o.ord.raw == nil {
		return false
	}
	var buf [orderPeek]byte
	n := 0
	err := o.ord.raw.Control(func(fd uintptr) {
		n, _, _ = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	})
	if err != nil || n <= 0 {
		return false
	}
	return peekedOrdered(buf[:n])
}
