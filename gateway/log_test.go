package gateway

import (
	"log/slog"
	"strings"
	"sync"
)

type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// testLogger returns a debug logger and a function returning what it logged.
func testLogger() (*slog.Logger, func() string) {
	sb := &syncBuilder{}
	l := slog.New(slog.NewTextHandler(sb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return l, func() string {
		sb.mu.Lock()
		defer sb.mu.Unlock()
		return sb.b.String()
	}
}
