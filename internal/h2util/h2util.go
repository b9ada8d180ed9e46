// Package h2util holds what the Go client's own HTTP/2 transport
// (client/h2.go) and the server's (gateway/grpcserver/h2server.go) share
// beyond gRPC's wire format (api/synodpb/wire.go): a connection's queue of
// call deadlines served by one timer, and HEADERS frames read without
// x/net's Framer making a frame for each (issue 28 item 6, branch grpc51,
// session 51).
package h2util

import (
	"container/heap"
	"errors"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// Expirer is a call that ends at its deadline (Queue).
type Expirer interface{ Expire() }

// Entry is a call's place in a Queue; a call holds one of its own.
type Entry struct {
	at time.Time
	i  int // index in the queue's heap + 1; 0: not queued
	x  Expirer
}

// Queue runs each queued call's Expire once its deadline has passed, with
// one timer for all the calls of a connection: a call no longer makes a
// timer and a function for it (two allocations, and the runtime's timer
// heap's work, per call). The timer is armed for the earliest deadline,
// and moved only when an earlier one comes: the calls of one client mostly
// have the same time limit, so each new deadline is later than the one
// armed and nothing is done for it; the timer firing at a deadline whose
// call has ended finds the next and is armed again. The zero Queue is
// ready; Stop releases its timer.
type Queue struct {
	mu    sync.Mutex
	h     entries
	t     *time.Timer
	armed time.Time // when t fires (zero: not armed)
}

// Add queues x (whose Entry is e) to expire at at. e must not be queued.
func (q *Queue) Add(e *Entry, at time.Time, x Expirer) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e.at, e.x = at, x
	heap.Push(&q.h, e)
	switch {
	case q.t == nil:
		q.t = time.AfterFunc(time.Until(at), q.fire)
		q.armed = at
	case q.armed.IsZero() || at.Before(q.armed):
		q.t.Reset(time.Until(at))
		q.armed = at
	}
}

// Remove takes e out of the queue, reporting whether it was there (false:
// it was never queued, or has expired: its Expire is running or ran).
func (q *Queue) Remove(e *Entry) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if e.i == 0 {
		return false
	}
	heap.Remove(&q.h, e.i-1)
	e.x = nil
	return true
}

// Len is the number of calls queued.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.h)
}

// Stop stops the timer (a connection's end: its calls ended).
func (q *Queue) Stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.t != nil {
		q.t.Stop()
	}
	q.armed = time.Time{}
}

// fire expires the calls whose deadline has passed and arms the timer for
// the next.
func (q *Queue) fire() {
	q.mu.Lock()
	q.armed = time.Time{}
	now := time.Now()
	var due []Expirer
	for len(q.h) > 0 && !q.h[0].at.After(now) {
		e := heap.Pop(&q.h).(*Entry)
		due = append(due, e.x)
		e.x = nil
	}
	if len(q.h) > 0 {
		q.armed = q.h[0].at
		q.t.Reset(time.Until(q.armed))
	}
	q.mu.Unlock()
	for _, x := range due {
		x.Expire()
	}
}

// entries is a heap of entries by deadline (container/heap).
type entries []*Entry

func (h entries) Len() int           { return len(h) }
func (h entries) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h entries) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].i, h[j].i = i+1, j+1
}
func (h *entries) Push(x any) {
	e := x.(*Entry)
	*h = append(*h, e)
	e.i = len(*h)
}
func (h *entries) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.i = 0
	return e
}

// ErrFrameTooShort is HeadersFragment's error for a payload shorter than
// its flags say.
var ErrFrameTooShort = errors.New("http2: HEADERS frame too short")

// HeadersFragment returns the header block fragment of a HEADERS frame's
// payload p (without padding and priority), with x/net's checks
// (parseHeadersFrame): a stream, a payload as long as its flags say. So a
// reader parses the frame in its own buffer instead of having the
// Framer make a HeadersFrame for it.
func HeadersFragment(fh http2.FrameHeader, p []byte) ([]byte, error) {
	if fh.StreamID == 0 {
		return nil, http2.ConnectionError(http2.ErrCodeProtocol)
	}
	pad := 0
	if fh.Flags.Has(http2.FlagHeadersPadded) {
		if len(p) < 1 {
			return nil, ErrFrameTooShort
		}
		pad, p = int(p[0]), p[1:]
	}
	if fh.Flags.Has(http2.FlagHeadersPriority) {
		if len(p) < 5 {
			return nil, ErrFrameTooShort
		}
		p = p[5:]
	}
	if len(p) < pad {
		return nil, http2.ConnectionError(http2.ErrCodeProtocol)
	}
	return p[:len(p)-pad], nil
}
