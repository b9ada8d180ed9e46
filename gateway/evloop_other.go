//go:build !linux

package gateway

import (
	"errors"
	"net"
	"syscall"
)

// evLoop is the client event loop (evloop.go); there is none off Linux.
type evLoop struct{}

func newEvLoop(*Server) *evLoop                    { return nil }
func (l *evLoop) takes(net.Conn) bool              { return false }
func (l *evLoop) own(nc net.Conn) (net.Conn, bool) { return nc, false }

// evNetConn is a loop connection's socket (evconn_linux.go); never made
// off Linux.
type evNetConn struct {
	net.Conn
	c *conn
}

func (e *evNetConn) goRead(p []byte, _ *bool) (int, error) { return e.Conn.Read(p) }
func (e *evNetConn) unhold()                               {}
func (e *evNetConn) SyscallConn() (syscall.RawConn, error) {
	return nil, errors.New("gateway: no event loop off Linux")
}
func (l *evLoop) add(*conn)           {}
func (l *evLoop) giveBack(*conn) bool { return false }
func (l *evLoop) ready(*conn)         {}
func (l *evLoop) stop()               {}
func (l *evLoop) holding() bool       { return false }
func (l *evLoop) held(string)         {}

// EventLoopStats are the client event loop's counts (evloop.go).
type EventLoopStats struct {
	Steps, Handoffs, HandBacks, Wakes, Waits int64
}

// EventLoopStats returns the event loop's counts: zero off Linux.
func (s *Server) EventLoopStats() EventLoopStats { return EventLoopStats{} }
