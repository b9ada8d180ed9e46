package gatewaytest

import (
	"context"
	"math/rand"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/synod-dev/synod/automaton"
)

// ReplyBackend is a gateway.ReplyBackend over a MemBackend, answering as
// the node does: SubmitReply applies the request and calls done on a
// goroutine of its own (a namespace loop's, after 0–3 yields so that it
// interleaves with the caller's), or on the caller's goroutine (Inline,
// as the node's inline pass may), or, with Hold, keeps it until Release
// answers it or Abandon withdraws it. One double for the RESP gateway's
// tests (gateway) and the gRPC server's (gateway/grpcserver).
type ReplyBackend struct {
	*MemBackend
	// Inline answers on the caller's goroutine, inside SubmitReply.
	Inline atomic.Bool
	// Hold keeps each request submitted until Release or Abandon.
	Hold atomic.Bool
	// Submitted and Abandoned count SubmitReply's requests and the held
	// requests Abandon withdrew.
	Submitted, Abandoned atomic.Int64

	mu   sync.Mutex
	held map[automaton.RequestID]heldReply
}

type heldReply struct {
	ns   string
	req  automaton.Request
	done func(automaton.Response, error)
}

// NewReply returns a ReplyBackend over m.
func NewReply(m *MemBackend) *ReplyBackend {
	return &ReplyBackend{MemBackend: m, held: map[automaton.RequestID]heldReply{}}
}

// Submit implements gateway.SubmitBackend: the request is applied now.
func (b *ReplyBackend) Submit(ctx context.Context, ns string, req automaton.Request) func() (automaton.Response, error) {
	r, err := b.Do(ctx, ns, req)
	return func() (automaton.Response, error) { return r, err }
}

// SubmitReply implements gateway.ReplyBackend.
func (b *ReplyBackend) SubmitReply(ctx context.Context, ns string, req automaton.Request, done func(automaton.Response, error)) bool {
	b.Submitted.Add(1)
	if b.Hold.Load() {
		b.mu.Lock()
		b.held[req.ID] = heldReply{ns, req, done}
		b.mu.Unlock()
		return true
	}
	r, err := b.Do(ctx, ns, req)
	if b.Inline.Load() {
		done(r, err)
		return true
	}
	go func() {
		for range rand.Intn(4) {
			runtime.Gosched()
		}
		done(r, err)
	}()
	return true
}

// Abandon implements gateway.ReplyBackend: a held request is withdrawn
// (never answered).
func (b *ReplyBackend) Abandon(ns string, id automaton.RequestID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.held[id]; !ok {
		return false
	}
	delete(b.held, id)
	b.Abandoned.Add(1)
	return true
}

// Held is the number of requests held.
func (b *ReplyBackend) Held() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.held)
}

// Release answers every held request (applied now) on this goroutine.
func (b *ReplyBackend) Release() {
	b.mu.Lock()
	hs := make([]heldReply, 0, len(b.held))
	for id, h := range b.held {
		hs = append(hs, h)
		delete(b.held, id)
	}
	b.mu.Unlock()
	for _, h := range hs {
		r, err := b.Do(context.Background(), h.ns, h.req)
		h.done(r, err)
	}
}
