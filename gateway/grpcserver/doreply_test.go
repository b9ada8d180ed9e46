package grpcserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// newAnswerer is the shared ReplyBackend double (gatewaytest) over the
// KV backend.
func newAnswerer() *gatewaytest.ReplyBackend { return gatewaytest.NewReply(kvBackend()) }

// On the direct transport, a lone Do handed to a ReplyBackend starts no
// goroutine to read the connection meanwhile: the reader hands it over and
// reads on, and the reply is written by the goroutine that answers (0
// readers started for 100 calls; before, one per call: 100). Replies
// larger than a frame, and refusals, take the same way.
func TestDirectDoAnsweredWhereCompleted(t *testing.T) {
	for _, inline := range []bool{false, true} {
		b := newAnswerer()
		b.Inline.Store(inline)
		_, c := startWith(t, b, Options{Transport: TransportDirect}, grpc.WithStaticStreamWindowSize(synodpb.StreamWindow), grpc.WithStaticConnWindowSize(synodpb.ConnWindow))
		x := ctx(t)
		r0 := h2Readers.Load()
		for i := range 100 {
			v := strings.Repeat("v", i%3*20000) // 0, 20,000, 40,000 bytes: within a frame, or not
			if _, err := c.Do(x, &synodpb.Request{Op: op("set", "k", v)}); err != nil {
				t.Fatal(err)
			}
			r, err := c.Do(x, &synodpb.Request{Op: op("get", "k")})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(r.GetResult().GetBytes()); got != v {
				t.Fatalf("inline=%v: get %d: %d bytes, want %d", inline, i, len(got), len(v))
			}
		}
		if n := h2Readers.Load() - r0; n != 0 {
			t.Fatalf("inline=%v: %d readers started for 200 calls, want 0", inline, n)
		}
		_, err := c.Do(x, &synodpb.Request{Namespace: "nope", Op: op("get", "k")})
		if status.Code(err) != codes.NotFound {
			t.Fatalf("inline=%v: unknown namespace: %v, want NOT_FOUND", inline, err)
		}
	}
}

// A Do the Backend holds past its deadline is withdrawn (Abandon) and
// answered DEADLINE_EXCEEDED; one held when the server closes is withdrawn
// and answered UNAVAILABLE; the connection serves on in between.
func TestDirectDoAbandoned(t *testing.T) {
	b := newAnswerer()
	s, c := startWith(t, b, Options{Transport: TransportDirect})
	b.Hold.Store(true)
	x, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	_, err := c.Do(x, &synodpb.Request{Op: op("set", "k", "v")})
	cancel()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("held past its deadline: %v, want DEADLINE_EXCEEDED", err)
	}
	waitFor(t, "the held call abandoned", func() bool { return b.Abandoned.Load() == 1 })

	b.Hold.Store(false)
	if _, err := c.Do(ctx(t), &synodpb.Request{Op: op("get", "k")}); err != nil {
		t.Fatalf("after an abandoned call: %v", err)
	}

	b.Hold.Store(true)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Do(ctx(t), &synodpb.Request{Op: op("set", "k", "w")})
		errc <- err
	}()
	waitFor(t, "the call held", func() bool { return b.Held() == 1 })
	s.Close()
	if err := <-errc; status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "unknown") {
		t.Fatalf("held when the server closed: %v, want UNAVAILABLE, outcome unknown", err)
	}
	if n := b.Abandoned.Load(); n != 2 {
		t.Fatalf("%d calls abandoned, want 2", n)
	}
}

// waitFor waits for cond (bounded: a minute, for loaded machines).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
