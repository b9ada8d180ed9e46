package ratelog

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestLogLimiter(t *testing.T) {
	l := New(time.Hour)
	if ok, _ := l.Allow("a"); !ok {
		t.Fatal("first event suppressed")
	}
	for range 5 {
		if ok, _ := l.Allow("a"); ok {
			t.Fatal("repeat logged within the interval")
		}
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Fatal("another key suppressed")
	}
	l.every = 0
	if ok, n := l.Allow("a"); !ok || n != 5 {
		t.Fatalf("after the interval: %v, %d suppressed (want 5)", ok, n)
	}
}

func TestHTTPErrorLog(t *testing.T) {
	var buf strings.Builder
	el := New(time.Hour).HTTPErrorLog(slog.New(slog.NewTextHandler(&buf, nil)))
	for range 3 {
		el.Printf("http: TLS handshake error from 127.0.0.1:5555: client sent an HTTP request to an HTTPS server")
	}
	el.Printf("http: Accept error: too many open files")
	out := buf.String()
	if strings.Count(out, "TLS handshake failed") != 1 || !strings.Contains(out, "remote=127.0.0.1:5555") || !strings.Contains(out, "Accept error") {
		t.Fatalf("log:\n%s", out)
	}
}
