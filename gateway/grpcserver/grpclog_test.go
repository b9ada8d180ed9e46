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
