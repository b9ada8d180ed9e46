// Package ratelog logs refusals at most once per interval for each kind of
// event and remote host, and counts the ones it holds back, so that a flood
// of bad connections or requests from one address costs one log line per
// interval, not one per connection, frame or call (docs/SECURITY.md: "every
// refusal is logged, at most once per ten seconds for each kind and remote
// host"). The peer transport, the client gateways (RESP and gRPC) and the
// metrics port share it.
package ratelog

import (
	stdlog "log"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"
)

// DefaultEvery is the interval used when none is given.
const DefaultEvery = 10 * time.Second

// Limiter lets one event through per key and interval.
type Limiter struct {
	mu    sync.Mutex
	every time.Duration
	last  map[string]*entry
}

type entry struct {
	at         time.Time
	suppressed int
}

// New returns a limiter letting one event per key through every interval
// (DefaultEvery when every <= 0).
func New(every time.Duration) *Limiter {
	if every <= 0 {
		every = DefaultEvery
	}
	return &Limiter{every: every, last: map[string]*entry{}}
}

// Allow reports whether to log an event of key now, and how many events of
// key were suppressed since the last line.
func (l *Limiter) Allow(key string) (bool, int) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.last[key]
	if ok && now.Sub(e.at) < l.every {
		e.suppressed++
		return false, 0
	}
	if len(l.last) >= 4096 {
		for k, v := range l.last {
			if now.Sub(v.at) >= l.every {
				delete(l.last, k)
			}
		}
	}
	n := 0
	if ok {
		n = e.suppressed
	}
	l.last[key] = &entry{at: now}
	return true, n
}

// Host is the host part of a remote address ("1.2.3.4:5" -> "1.2.3.4"),
// or the address itself when it has no port.
func Host(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return remote
	}
	return host
}

// Log logs msg at level through log, at most once per interval for kind and
// remote's host; attrs get remote and, when lines were held back, their
// count as suppressed.
func (l *Limiter) Log(log *slog.Logger, level slog.Level, kind, remote, msg string, attrs ...any) {
	ok, suppressed := l.Allow(kind + " " + Host(remote))
	if !ok {
		return
	}
	attrs = append(attrs, "remote", remote)
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	log.Log(nil, level, msg, attrs...)
}

// HTTPErrorLog returns a logger for http.Server.ErrorLog that sends
// net/http's lines to log at Warn, those about a connection ("http: TLS
// handshake error from ADDR: ...", one per refused connection) at most once
// per interval for each remote host.
func (l *Limiter) HTTPErrorLog(log *slog.Logger) *stdlog.Logger {
	return stdlog.New(httpErrors{l: l, log: log}, "", 0)
}

type httpErrors struct {
	l   *Limiter
	log *slog.Logger
}

func (h httpErrors) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	const from = "http: TLS handshake error from "
	if rest, ok := strings.CutPrefix(msg, from); ok {
		remote, reason, _ := strings.Cut(rest, ": ")
		h.l.Log(h.log, slog.LevelWarn, "http-tls", remote, "refused connection: TLS handshake failed", "err", reason)
		return len(p), nil
	}
	h.log.Warn(msg)
	return len(p), nil
}
