package gateway

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MONITOR (issue 34): a monitoring connection receives a line for every
// command the other clients of this node send, as Redis writes it:
//
//	+1700000000.123456 [0 127.0.0.1:50000] "set" "foo" "bar"
//
// Decisions: a node reports the commands its own gateway receives, as a
// Redis Cluster node does (a client watching the whole cluster monitors
// every node). A command is logged when the gateway dispatches it (after
// its name and arity are checked), so an unknown command is not logged and
// a command queued in MULTI is logged when queued (the order MULTI, the
// commands, EXEC, as Redis shows it). Commands a script or FUNCTION runs
// inside the log's Apply are logged from the eval operation's report
// (script.go scriptReports) as "[0 lua]" lines after the EVAL or FCALL,
// once the script ran; not inside MULTI. AUTH's and HELLO AUTH's arguments are redacted. Lines go
// through the connection's push queue (pubsub.go): a monitor that does not
// read is closed at the output limit.

// monitors is a server's MONITOR connections.
type monitors struct {
	n  atomic.Int64
	mu sync.Mutex
	m  map[*conn]struct{}
}

// statusLine is a push-queue frame written as a RESP simple string.
type statusLine string

func cmdMonitor(c *conn, args [][]byte) {
	s := &c.s.mon
	c.startPusher()
	s.mu.Lock()
	if s.m == nil {
		s.m = map[*conn]struct{}{}
	}
	if _, ok := s.m[c]; !ok {
		s.m[c] = struct{}{}
		s.n.Add(1)
	}
	s.mu.Unlock()
	c.w.WriteSimple("OK")
}

// has reports whether c is a monitor.
func (s *monitors) has(c *conn) bool {
	if s.n.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[c]
	return ok
}

// stopMonitor removes c from the monitors. Connection goroutine, at its end.
func (c *conn) stopMonitor() {
	s := &c.s.mon
	if s.n.Load() == 0 {
		return
	}
	s.mu.Lock()
	if _, ok := s.m[c]; ok {
		delete(s.m, c)
		s.n.Add(-1)
	}
	s.mu.Unlock()
}

// feedMonitors logs command args of c to every monitor but c.
func (c *conn) feedMonitors(name string, args [][]byte) {
	if c.s.mon.n.Load() == 0 {
		return // no monitor: the address string is not built (every command comes here)
	}
	c.feedMonitorsFrom(c.nc.RemoteAddr().String(), name, args)
}

// feedMonitorsFrom is feedMonitors with the line's source: the client's
// address, or "lua" for a command a script ran (script.go scriptReports).
func (c *conn) feedMonitorsFrom(from, name string, args [][]byte) {
	s := &c.s.mon
	if s.n.Load() == 0 || name == "monitor" {
		return
	}
	now := time.Now()
	var b strings.Builder
	fmt.Fprintf(&b, "%d.%06d [0 %s]", now.Unix(), now.Nanosecond()/1000, from)
	for i, a := range args {
		b.WriteByte(' ')
		if i > 0 && redacted(name, args, i) {
			b.WriteString(`"(redacted)"`)
			continue
		}
		b.WriteString(reprArg(a))
	}
	line := statusLine(b.String())
	s.mu.Lock()
	for m := range s.m {
		if m != c {
			m.queuePush(line)
		}
	}
	s.mu.Unlock()
}

// redacted says whether argument i of the command is a secret.
func redacted(name string, args [][]byte, i int) bool {
	switch name {
	case "auth":
		return true
	case "hello":
		for j := 2; j < i; j++ {
			if strings.EqualFold(string(args[j]), "auth") {
				return i <= j+2
			}
		}
	}
	return false
}

// reprArg quotes an argument as Redis's sdscatrepr.
func reprArg(a []byte) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, ch := range a {
		switch ch {
		case '\\', '"':
			b.WriteByte('\\')
			b.WriteByte(ch)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		default:
			if ch >= 0x20 && ch < 0x7f {
				b.WriteByte(ch)
			} else {
				b.WriteString(`\x`)
				h := strconv.FormatUint(uint64(ch), 16)
				if len(h) < 2 {
					h = "0" + h
				}
				b.WriteString(h)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
