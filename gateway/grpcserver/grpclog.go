package grpcserver

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"google.golang.org/grpc/grpclog"

	"github.com/synod-dev/synod/internal/ratelog"
)

// gRPC's own log lines in the node's format (issue 17 item 7: one log
// format). grpc-go logs through its own logger, by default errors to
// standard error in the standard library's format ("2026/01/02 15:04:05
// ERROR: [core] ..."), beside the node's log/slog lines. UseSlog sends
// them to a slog.Logger instead, with component=grpc: Info and Warning at
// slog's Debug and Warn (grpc-go's info lines are connection chatter), Error
// at Error; V(l) reports whether Debug is enabled, so verbose lines cost
// nothing otherwise.

// UseSlog makes l receive gRPC's internal log lines. grpclog.SetLoggerV2 is
// not safe to call while gRPC runs: call it once, at program start, before
// any client or server is created (cmd/synod's node command).
func UseSlog(l *slog.Logger) {
	grpclog.SetLoggerV2(NewSlogLogger(l))
}

// NewSlogLogger returns a grpclog.LoggerV2 writing to l.
func NewSlogLogger(l *slog.Logger) grpclog.LoggerV2 {
	return slogLogger{l: l.With("component", "grpc"), lim: ratelog.New(0)}
}

type slogLogger struct {
	l   *slog.Logger
	lim *ratelog.Limiter
}

// handshakeFrom introduces the remote address in gRPC's line about a
// refused connection (one per connection: a TLS client without the CA, a
// plaintext client to a TLS port), logged once per ten seconds per host.
const handshakeFrom = "failed to complete security handshake from "

func (s slogLogger) log(lv slog.Level, msg string) {
	if _, rest, ok := strings.Cut(msg, handshakeFrom); ok && lv >= slog.LevelWarn {
		remote, _, _ := strings.Cut(strings.Trim(rest, `"`), `"`)
		s.lim.Log(s.l, lv, "grpc-tls", remote, msg)
		return
	}
	s.l.Log(context.Background(), lv, msg)
}

func (s slogLogger) Info(args ...any)   { s.log(slog.LevelDebug, fmt.Sprint(args...)) }
func (s slogLogger) Infoln(args ...any) { s.log(slog.LevelDebug, sprintln(args...)) }
func (s slogLogger) Infof(format string, args ...any) {
	s.log(slog.LevelDebug, fmt.Sprintf(format, args...))
}
func (s slogLogger) Warning(args ...any)   { s.log(slog.LevelWarn, fmt.Sprint(args...)) }
func (s slogLogger) Warningln(args ...any) { s.log(slog.LevelWarn, sprintln(args...)) }
func (s slogLogger) Warningf(format string, args ...any) {
	s.log(slog.LevelWarn, fmt.Sprintf(format, args...))
}
func (s slogLogger) Error(args ...any)   { s.log(slog.LevelError, fmt.Sprint(args...)) }
func (s slogLogger) Errorln(args ...any) { s.log(slog.LevelError, sprintln(args...)) }
func (s slogLogger) Errorf(format string, args ...any) {
	s.log(slog.LevelError, fmt.Sprintf(format, args...))
}
func (s slogLogger) Fatal(args ...any)                 { s.fatal(fmt.Sprint(args...)) }
func (s slogLogger) Fatalln(args ...any)               { s.fatal(sprintln(args...)) }
func (s slogLogger) Fatalf(format string, args ...any) { s.fatal(fmt.Sprintf(format, args...)) }

// V reports whether verbose lines of level l would be written.
func (s slogLogger) V(l int) bool { return s.l.Enabled(context.Background(), slog.LevelDebug) }

// fatal logs msg and exits, as grpclog's Fatal does.
func (s slogLogger) fatal(msg string) {
	s.log(slog.LevelError, msg)
	os.Exit(1)
}

// sprintln is fmt.Sprintln without its newline.
func sprintln(args ...any) string {
	m := fmt.Sprintln(args...)
	return m[:len(m)-1]
}
