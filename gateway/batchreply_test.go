package gateway

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

// replySubmitBackend is submitBackend (inflight_test.go) answering through
// callbacks as well (ReplyBackend): SubmitReply hands the request over as
// Submit does and calls done on another goroutine once its answer comes
// (a random little while later), so batches' callbacks run out of order.
type replySubmitBackend struct {
	*submitBackend
	batches atomic.Int64 // batches (requests of several operations) handed over by SubmitReply
}

func (b *replySubmitBackend) SubmitReply(ctx context.Context, ns string, req automaton.Request, done func(automaton.Response, error)) bool {
	if len(req.Ops) > 1 {
		b.batches.Add(1)
	}
	await := b.Submit(ctx, ns, req)
	go func() { done(await()) }()
	return true
}

func (b *replySubmitBackend) Abandon(string, automaton.RequestID) bool { return false }

// TestPipelineBatchReplyFn: with a Backend that answers through callbacks
// (ReplyBackend), batches in flight are handed over with one (batchCall)
// and their replies, written by the goroutines that answer them, are
// still exactly serial execution's, in command order, with no client id
// twice in flight and no batch handed over while an earlier one on its
// keys is unanswered (TestPipelineBatchesInFlight's script and checks).
func TestPipelineBatchReplyFn(t *testing.T) {
	ns := config.Namespace{Name: "default", Protocol: pxName, Service: "kv"}
	chunks, script, want := inFlightScript(t, ns)
	b := &replySubmitBackend{submitBackend: newSubmitBackend(ns)}
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	go writeChunks(t, c, chunks, rand.New(rand.NewPCG(5, 28)))
	expectSerial(t, c, script, want)
	if n := b.batches.Load(); n == 0 {
		t.Errorf("no batch handed over through SubmitReply")
	}
	b.checkInFlight(t, len(script))
}

// TestPipelineBatchReplyFnDeadline: a batch handed over with a callback
// whose answer the Backend holds past the request timeout is withdrawn
// (Abandon) and each of its commands answered TRYAGAIN, outcome unknown;
// then the connection serves on. Checked by mutation: without the
// deadline's after-hook (batchReply's setAfter) the batch is never
// answered and the read times out.
func TestPipelineBatchReplyFnDeadline(t *testing.T) {
	b := newReplyBackend()
	b.Hold.Store(true)
	_, addr := startServer(t, b, ServerOptions{RequestTimeout: 50 * time.Millisecond})
	c := dial(t, addr)
	c.send("SET", "a", "1")
	c.send("SET", "b", "2")
	if err := c.w.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if got := c.reply().String(); !strings.Contains(got, "TRYAGAIN") || !strings.Contains(got, "timed out") {
			t.Fatalf("held batch's reply %d: %q, want TRYAGAIN ... timed out", i+1, got)
		}
	}
	if n := b.Abandoned.Load(); n != 1 {
		t.Fatalf("abandoned %d, want 1 (the batch)", n)
	}
	b.Hold.Store(false)
	if got := c.do("SET", "c", "3"); got != "OK" {
		t.Fatalf("then SET: %q", got)
	}
}
