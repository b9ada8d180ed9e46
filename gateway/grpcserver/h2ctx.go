package grpcserver

import (
	"context"
	"sync"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/metadata"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/internal/h2util"
)

// A unary call's context is its stream (issue 28 item 6, branch grpc51,
// session 51).
//
// Each unary call used to get its incoming metadata as a map in a context
// of its own (metadata.NewIncomingContext), a context of its own ended by
// the stream's end and its grpc-timeout (context.WithTimeout or
// WithCancel), and, for a Do handed over (doreply.go), a context bounded
// by RequestTimeout and a context.AfterFunc withdrawing the request: some
// fifteen allocations per call, and the unary call's own goroutine-free
// path paid them all. Now the h2sstream of a unary call is its
// context.Context:
//
//   - Done is a channel made when first asked for (the node asks, to hand
//     the request over), closed when the call ends: its stream ended
//     (reply written, RST_STREAM, the connection's end: Canceled), its
//     deadline passed (DeadlineExceeded), or the server closes
//     (cancelAsync: Canceled; the Server's own context tells doError it
//     is a shutdown). Err says which, as a context's.
//   - Deadline is the caller's grpc-timeout, bounded for a Do handed over
//     by RequestTimeout (limit), queued when the call runs (arm) in the
//     connection's deadlines, one timer for all its calls (h2util.Queue),
//     and taken out at its end.
//   - Value answers the call's user (doReply's login), then the
//     connection's context (the peer, the connection for keepReading),
//     then the incoming metadata, made into grpc's metadata context only
//     when something asks for a key none of these has: the handlers
//     behind the interceptors (metadata.ValueFromIncomingContext in
//     login). doReply reads the password and user from the call's
//     headers without it.
//   - AfterFunc (the context package's afterFuncer) lets a context derived
//     from it (Server.run's WithTimeout) follow it without a goroutine.
//   - A Do handed over is withdrawn when its context ends first: the end
//     starts abandonDo on a goroutine of its own, as context.AfterFunc
//     did; the answer, once it runs, turns that off.
//
// Streams (Pipeline, WatchLeader, Phases) keep contexts made as before:
// one per stream, not per call.

// callHeaders are the request headers a unary call keeps: the ones grpc's
// metadata has besides extra (the other metadata fields, decoded).
type callHeaders struct {
	authority, ctype, ua string
	hasAuthority, hasUA  bool
	extra                []hpack.HeaderField
}

// md is the call's incoming metadata, as grpc-go's server makes it.
func (h *callHeaders) md(extra []hpack.HeaderField) metadata.MD {
	md := make(metadata.MD, len(extra)+3)
	if h.hasAuthority {
		md[":authority"] = []string{h.authority}
	}
	if h.ctype != "" {
		md["content-type"] = []string{h.ctype}
	}
	if h.hasUA {
		md["user-agent"] = []string{h.ua}
	}
	for _, f := range extra {
		md[f.Name] = append(md[f.Name], f.Value)
	}
	return md
}

// value is metadata key's first value and its number of values.
func (h *callHeaders) value(key string) (first string, n int) {
	for _, f := range h.extra {
		if f.Name == key {
			if n == 0 {
				first = f.Value
			}
			n++
		}
	}
	return first, n
}

// unaryCtx is a unary call's context state (h2sstream's uctx).
type unaryCtx struct {
	h        callHeaders
	deadline time.Time     // zero: none; set before the call runs
	user     *gateway.User // the call's user (doReply), set before the call is handed over

	mu      sync.Mutex
	done    chan struct{} // made by Done, closed at the end
	err     error         // set at the end
	queued  bool          // dl is in the connection's deadlines (arm)
	dl      h2util.Entry
	mdCtx   context.Context // the metadata's context, once asked for
	afters  []func()        // AfterFunc's, run at the end (nil: stopped)
	pending bool            // a Do handed over may be withdrawn (abandonDo at the end)
}

// doCall is a Do handed over (doreply.go): what its answer and its
// withdrawal need.
type doCall struct {
	srv   *Server
	rb    gateway.ReplyBackend
	ns    string
	req   automaton.Request
	terse bool
}

// Deadline implements context.Context.
func (s *h2sstream) Deadline() (time.Time, bool) {
	if s.cancel != nil {
		return s.ctx.Deadline()
	}
	return s.uctx.deadline, !s.uctx.deadline.IsZero()
}

// Done implements context.Context.
func (s *h2sstream) Done() <-chan struct{} {
	if s.cancel != nil {
		return s.ctx.Done()
	}
	u := &s.uctx
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.done == nil {
		u.done = make(chan struct{})
		if u.err != nil {
			close(u.done)
		}
	}
	return u.done
}

// Err implements context.Context.
func (s *h2sstream) Err() error {
	if s.cancel != nil {
		return s.ctx.Err()
	}
	s.uctx.mu.Lock()
	defer s.uctx.mu.Unlock()
	return s.uctx.err
}

// Value implements context.Context.
func (s *h2sstream) Value(key any) any {
	if s.cancel != nil {
		return s.ctx.Value(key)
	}
	switch key.(type) {
	case userKey:
		if u := s.uctx.user; u != nil {
			return u
		}
		return nil
	case *int:
		// The context package's own key (cancelCtxKey): s is no
		// cancelCtx, and the connection's must not answer for it
		// (context.Cause would give its cause, not s's).
		return nil
	}
	if v := s.c.ctx.Value(key); v != nil {
		return v
	}
	u := &s.uctx
	u.mu.Lock()
	if u.mdCtx == nil {
		u.mdCtx = metadata.NewIncomingContext(context.Background(), u.h.md(u.h.extra))
	}
	mc := u.mdCtx
	u.mu.Unlock()
	return mc.Value(key)
}

// AfterFunc lets context.AfterFunc, and contexts derived from s, follow s
// without a goroutine of their own (the context package's afterFuncer).
func (s *h2sstream) AfterFunc(f func()) func() bool {
	if s.cancel != nil {
		return context.AfterFunc(s.ctx, f)
	}
	u := &s.uctx
	u.mu.Lock()
	if u.err != nil {
		u.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	i := len(u.afters)
	u.afters = append(u.afters, f)
	u.mu.Unlock()
	return func() bool {
		u.mu.Lock()
		defer u.mu.Unlock()
		if u.err != nil || u.afters[i] == nil {
			return false
		}
		u.afters[i] = nil
		return true
	}
}

// stop ends the call's context as cancelled (a stream's: its cancel).
func (s *h2sstream) stop() {
	if s.cancel != nil {
		s.cancel()
		return
	}
	s.endCtx(context.Canceled)
}

// Expire ends the call's context at its deadline (the connection's
// deadlines, arm).
func (s *h2sstream) Expire() { s.endCtx(context.DeadlineExceeded) }

// endCtx ends a unary call's context with err, unless it ended: Done
// closed, the timer stopped, AfterFunc's functions and a pending Do's
// withdrawal started.
func (s *h2sstream) endCtx(err error) {
	u := &s.uctx
	u.mu.Lock()
	if u.err != nil {
		u.mu.Unlock()
		return
	}
	u.err = err
	if u.done != nil {
		close(u.done)
	}
	if u.queued {
		s.c.deadlines.Remove(&u.dl)
		u.queued = false
	}
	afters, pending := u.afters, u.pending
	u.afters, u.pending = nil, false
	u.mu.Unlock()
	for _, f := range afters {
		if f != nil {
			go f()
		}
	}
	if pending {
		go s.abandonDo()
	}
}

// limit bounds a unary call's deadline by d from now.
func (s *h2sstream) limit(d time.Duration) {
	if dl := time.Now().Add(d); s.uctx.deadline.IsZero() || s.uctx.deadline.After(dl) {
		s.uctx.deadline = dl
	}
}

// arm queues a unary call's deadline, if it has one, in the connection's
// deadlines (one timer for all its calls: h2util.Queue); a deadline passed
// ends the context now.
func (s *h2sstream) arm() {
	if s.cancel != nil || s.uctx.deadline.IsZero() {
		return
	}
	if time.Until(s.uctx.deadline) <= 0 {
		s.Expire()
		return
	}
	u := &s.uctx
	u.mu.Lock()
	if u.err == nil {
		u.queued = true
		s.c.deadlines.Add(&u.dl, u.deadline, s)
	}
	u.mu.Unlock()
}

// hold marks a Do handed over (or about to be) as one to withdraw if the
// context ends before its answer; if it has ended, the withdrawal starts
// now (as context.AfterFunc on an ended context).
func (s *h2sstream) hold() {
	u := &s.uctx
	u.mu.Lock()
	ended := u.err != nil
	u.pending = !ended
	u.mu.Unlock()
	if ended {
		go s.abandonDo()
	}
}

// answered turns hold's withdrawal off: the answer is on its way.
func (s *h2sstream) answered() {
	u := &s.uctx
	u.mu.Lock()
	u.pending = false
	u.mu.Unlock()
}
