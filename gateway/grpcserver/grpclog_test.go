package grpcserver

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestSlogLogger: gRPC's log lines come out through slog with the node's
// handler (here JSON), component=grpc, at the mapped levels.
func TestSlogLogger(t *testing.T) {
	var buf bytes.Buffer
	l := NewSlogLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	l.Infof("connecting to %s", "n2") // debug: below the handler's level
	l.Warningln("transport", "closing")
	l.Errorf("failed: %v", "refused")
	if l.V(2) {
		t.Error("V(2) with the handler at warn")
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`"level":"WARN","msg":"transport closing","component":"grpc"}`,
		`"level":"ERROR","msg":"failed: refused","component":"grpc"}`,
	}
	if len(lines) != len(want) {
		t.Fatalf("lines:\n%s", buf.String())
	}
	for i, w := range want {
		if !strings.HasSuffix(lines[i], w) {
			t.Errorf("line %d: %s, want it to end %s", i, lines[i], w)
		}
	}
}

// TestHandshakeFailuresLoggedOnce: gRPC's line per refused connection is
// logged once per host and interval; other hosts and other lines pass.
func TestHandshakeFailuresLoggedOnce(t *testing.T) {
	var buf bytes.Buffer
	l := NewSlogLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	for range 5 {
		l.Warningf(`grpc: Server.Serve failed to complete security handshake from "127.0.0.1:%d": tls: first record does not look like a TLS handshake`, 40000)
	}
	l.Warningf(`grpc: Server.Serve failed to complete security handshake from "10.0.0.2:1": EOF`)
	l.Warningf("transport closing")
	l.Warningf("transport closing")
	out := buf.String()
	if n := strings.Count(out, "remote=127.0.0.1"); n != 1 {
		t.Errorf("5 refusals from one host logged %d times, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, "10.0.0.2") || strings.Count(out, "transport closing") != 2 {
		t.Errorf("another host's refusal or other lines held back:\n%s", out)
	}
}
