package grpcserver

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/config"
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

// On the direct transport, a lone Pipeline call to a ReplyBackend is
// handed over with SubmitReply and answered by the goroutine that
// completes it (submitLone): every one of 100 lone calls goes through
// SubmitReply, answered on the answering goroutine and inline, in a
// namespace without atomic groups (concurrent calls) and with them (a
// batch of one); a burst of calls sent together still runs (through the
// executor) and is answered; a held call past the stream's deadline is
// withdrawn.
func TestDirectLonePipelineCallSubmitted(t *testing.T) {
	for _, proto := range []string{"memory", "unreplicated"} {
		for _, inline := range []bool{false, true} {
			b := gatewaytest.NewReply(gatewaytest.New(config.Namespace{Name: "default", Protocol: proto, Service: "kv"}))
			b.Inline.Store(inline)
			_, c := startWith(t, b, Options{Transport: TransportDirect})
			s, err := c.Pipeline(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 100 {
				if err := s.Send(&synodpb.PipelineRequest{Calls: []*synodpb.Call{{Id: uint64(i + 1), Request: &synodpb.Request{Op: op("set", "k", fmt.Sprint(i))}}}}); err != nil {
					t.Fatal(err)
				}
				r, err := s.Recv()
				if err != nil || len(r.GetReplies()) != 1 || r.GetReplies()[0].GetId() != uint64(i+1) || r.GetReplies()[0].GetCode() != 0 {
					t.Fatalf("%s: call %d: %v %v", proto, i+1, r, err)
				}
			}
			if n := b.Submitted.Load(); n != 100 {
				t.Fatalf("%s inline=%v: %d of 100 lone calls through SubmitReply", proto, inline, n)
			}
			// A burst: 20 calls sent before any reply is read.
			for i := range 20 {
				if err := s.Send(&synodpb.PipelineRequest{Calls: []*synodpb.Call{{Id: uint64(200 + i), Request: &synodpb.Request{Op: op("set", fmt.Sprintf("b%d", i%3), fmt.Sprint(i))}}}}); err != nil {
					t.Fatal(err)
				}
			}
			got := map[uint64]bool{}
			for len(got) < 20 {
				r, err := s.Recv()
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range r.GetReplies() {
					if x.GetCode() != 0 {
						t.Fatalf("%s: burst call %d: %v", proto, x.GetId(), x)
					}
					got[x.GetId()] = true
				}
			}
			s.CloseSend()
			if _, err := s.Recv(); err != io.EOF {
				t.Fatalf("%s: stream end %v", proto, err)
			}
		}
	}
	// Held past the stream's deadline: withdrawn, the stream ends.
	b := newAnswerer()
	b.Hold.Store(true)
	_, c := startWith(t, b, Options{Transport: TransportDirect})
	x, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	defer cancel()
	s, err := c.Pipeline(x)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&synodpb.PipelineRequest{Calls: []*synodpb.Call{{Id: 1, Request: &synodpb.Request{Op: op("set", "k", "v")}}}}); err != nil {
		t.Fatal(err)
	}
	// The call's reply (outcome unknown) may come before the stream's end.
	r, err := s.Recv()
	if err == nil {
		if len(r.GetReplies()) != 1 || r.GetReplies()[0].GetCode() == 0 {
			t.Fatalf("held past the deadline: %v", r)
		}
		_, err = s.Recv()
	}
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("held past the deadline: %v", err)
	}
	waitFor(t, "the held call abandoned", func() bool { return b.Abandoned.Load() == 1 })
}

// A lone Pipeline call in flight (submitLone, held by the Backend) keeps
// the executor's role: a message that arrives meanwhile is queued behind
// it, runs once the lone call is answered (its answer starts an executor
// for the queue: doneExecuting), and its reply follows the lone call's
// (answerLone holds the send lock until its reply is written). The get
// queued behind the held set sees the set's value. Each reply is bounded
// (a hang, e.g. a queue left without an executor, fails at the bound).
func TestDirectLonePipelineCallHoldsLaterCalls(t *testing.T) {
	b := newAnswerer()
	b.Hold.Store(true)
	_, c := startWith(t, b, Options{Transport: TransportDirect})
	x, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.Pipeline(x)
	if err != nil {
		t.Fatal(err)
	}
	send := func(id uint64, o *synodpb.Op) {
		if err := s.Send(&synodpb.PipelineRequest{Calls: []*synodpb.Call{{Id: id, Request: &synodpb.Request{Op: o}}}}); err != nil {
			t.Fatal(err)
		}
	}
	send(1, op("set", "k", "1"))
	waitFor(t, "the lone call held", func() bool { return b.Held() == 1 })
	q0 := pipeQueuedBehind.Load()
	send(2, op("get", "k"))
	waitFor(t, "the second message queued behind the lone call", func() bool { return pipeQueuedBehind.Load() > q0 })
	if n := b.Submitted.Load(); n != 1 {
		t.Fatalf("%d calls submitted while the lone call was held, want 1", n)
	}
	b.Hold.Store(false)
	b.Release() // answers call 1 on this goroutine
	var got []uint64
	for len(got) < 2 {
		r, err := s.Recv()
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		for _, x := range r.GetReplies() {
			if x.GetCode() != 0 {
				t.Fatalf("call %d: %v", x.GetId(), x)
			}
			if x.GetId() == 2 {
				if v := string(x.GetResponse().GetResult().GetBytes()); v != "1" {
					t.Fatalf("the queued get saw %q, want 1 (the held set's)", v)
				}
			}
			got = append(got, x.GetId())
		}
	}
	if got[0] != 1 || got[1] != 2 {
		t.Fatalf("replies in order %v, want [1 2]", got)
	}
	s.CloseSend()
	if _, err := s.Recv(); err != io.EOF {
		t.Fatalf("stream end %v", err)
	}
}

// A lone Pipeline call's RequestTimeout (submitLone's loneCtx, one per
// stream, re-armed per call): lone calls each held for less than the
// timeout but together for longer all succeed (each call's timeout starts
// with it); a call held past the timeout is withdrawn (Abandon) and
// answered DEADLINE_EXCEEDED on the live stream; the next call, on a fresh
// context, succeeds. Fails when arm does not re-arm the timer (the held
// call is never answered: the 20 s bound below).
func TestDirectLonePipelineCallRequestTimeout(t *testing.T) {
	b := newAnswerer()
	_, c := startWith(t, b, Options{Transport: TransportDirect, RequestTimeout: time.Second})
	x, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := c.Pipeline(x)
	if err != nil {
		t.Fatal(err)
	}
	call := func(id uint64, hold time.Duration) *synodpb.CallReply {
		t.Helper()
		if err := s.Send(&synodpb.PipelineRequest{Calls: []*synodpb.Call{{Id: id, Request: &synodpb.Request{Op: op("set", "k", fmt.Sprint(id))}}}}); err != nil {
			t.Fatal(err)
		}
		if hold > 0 {
			waitFor(t, "the lone call held", func() bool { return b.Held() == 1 })
			time.Sleep(hold)
			b.Release() // nothing if it was withdrawn meanwhile
		}
		type rr struct {
			r   *synodpb.PipelineResponse
			err error
		}
		got := make(chan rr, 1)
		go func() {
			r, err := s.Recv()
			got <- rr{r, err}
		}()
		select {
		case g := <-got:
			if g.err != nil || len(g.r.GetReplies()) != 1 || g.r.GetReplies()[0].GetId() != id {
				t.Fatalf("call %d: %v %v", id, g.r, g.err)
			}
			return g.r.GetReplies()[0]
		case <-time.After(20 * time.Second):
			t.Fatalf("call %d: no reply in 20 s", id)
		}
		return nil
	}
	b.Hold.Store(true)
	for i := range 4 { // 4 x 0.3 s held: 1.2 s, past one timeout
		if r := call(uint64(i+1), 300*time.Millisecond); r.GetCode() != 0 {
			t.Fatalf("call %d held 0.3 s of its 1 s: %v", i+1, r)
		}
	}
	if n := b.Abandoned.Load(); n != 0 {
		t.Fatalf("%d calls withdrawn, want 0", n)
	}
	if r := call(10, 0); codes.Code(r.GetCode()) != codes.DeadlineExceeded {
		t.Fatalf("a call held past its 1 s: %v, want DEADLINE_EXCEEDED", r)
	}
	if n := b.Abandoned.Load(); n != 1 {
		t.Fatalf("%d calls withdrawn, want 1", n)
	}
	b.Hold.Store(false)
	if r := call(11, 0); r.GetCode() != 0 {
		t.Fatalf("the call after a timed-out one: %v", r)
	}
	if n := b.Submitted.Load(); n != 6 {
		t.Fatalf("%d lone calls through SubmitReply, want 6", n)
	}
	s.CloseSend()
	if _, err := s.Recv(); err != io.EOF {
		t.Fatalf("stream end %v", err)
	}
}
