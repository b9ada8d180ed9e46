//go:build !linux

package gateway

import "net"

// evLoop is the client event loop (evloop.go); there is none off Linux.
type evLoop struct{}

func newEvLoop(*Server) *evLoop       { return nil }
func (l *evLoop) takes(net.Conn) bool { return false }
func (l *evLoop) add(*conn)           {}
func (l *evLoop) giveBack(*conn) bool { return false }
func (l *evLoop) ready(*conn)         {}
func (l *evLoop) stop()               {}

// EventLoopStats are the client event loop's counts (evloop.go).
type EventLoopStats struct {
	Steps, Handoffs, HandBacks, Wakes, Waits int64
}

// EventLoopStats returns the event loop's counts: zero off Linux.
func (s *Server) EventLoopStats() EventLoopStats { return EventLoopStats{} }
