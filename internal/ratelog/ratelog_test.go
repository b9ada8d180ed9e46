package ratelog

import (
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
