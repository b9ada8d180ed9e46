package grpcserver

import (
	"context"
	"time"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway"
)

// Do answered by the goroutine that completes it (direct transport;
// issue 28 item 6, branch grpc47, session 47), as the Redis gateway
// answers a lone command (gateway/replyfn.go).
//
// On grpc-go's transport, and on the direct one before, a unary Do ran on
// a goroutine that handed the request to the namespace's loop and parked
// on the answer; the goroutine that completed the request (a pool worker,
// a peer reader's pass, the committer) woke it to write the reply. Where
// the Backend answers through a callback (gateway.ReplyBackend: the node),
// the direct transport's reader now decodes the call, logs in (the
// authenticate interceptor's login), prepares it as Do does and hands it
// over with SubmitReply, then goes back to reading the connection; the
// goroutine that completes the request converts the answer and writes the
// reply frames itself, never waiting (h2sstream.finishNow: the write lock
// taken only if free, the reply within the flow-control windows, a plain
// socket's non-blocking write, the rest by a goroutine of its own). Where
// that could wait (TLS, no window, the lock held), a goroutine of its own
// writes it. No goroutine waits for the call, and none is started to read
// the connection meanwhile.
//
// Ends, as run's: the call's deadline is the caller's grpc-timeout and
// RequestTimeout, whichever is earlier; the caller's cancellation
// (RST_STREAM), the connection's end or Close also end it. Then the
// request is withdrawn (Abandon) if the Backend still holds it and
// answered with the status Do's error would get (DEADLINE_EXCEEDED,
// CANCELED, UNAVAILABLE: outcome unknown); else its answer is on its way.
// A request the Backend does not take so (SubmitReply false: a shard
// group's, a sharded namespace's) runs as Do on a goroutine of its own.
//
// Refusals (login, namespace, validation) are answered by the reader as
// the handler would answer them.
func (s *Server) doReply(ctx context.Context, dec func(any) error, done func(any, error)) {
	in := &synodpb.Request{}
	if err := dec(in); err != nil {
		done(nil, err)
		return
	}
	u, err := s.login(ctx, synodpb.Synod_Do_FullMethodName)
	if err != nil {
		done(nil, err)
		return
	}
	ctx = context.WithValue(ctx, userKey{}, u)
	ns, req, err := s.prepareDo(ctx, in)
	if err != nil {
		done(nil, err)
		return
	}
	rb, terse := s.b.(gateway.ReplyBackend), in.GetTerse()
	// ctx ends when the caller's deadline passes, the caller cancels, the
	// connection ends or the server closes (h2server.close cancels the
	// async calls' contexts): a timer of its own only when RequestTimeout
	// is earlier than the caller's deadline.
	rctx, cancel := ctx, context.CancelFunc(nil)
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > s.opts.RequestTimeout {
		rctx, cancel = context.WithTimeout(ctx, s.opts.RequestTimeout)
	}
	var abandon func() bool
	answer := func(res automaton.Response, err error) {
		abandon()
		out, err := s.response(ctx, rctx, req, res, err, terse)
		if cancel != nil {
			cancel()
		}
		done(out, err)
	}
	// Registered before the request is handed over: answer runs after
	// SubmitReply took it (the Backend's lock orders the two).
	abandon = context.AfterFunc(rctx, func() {
		if rb.Abandon(ns, req.ID) {
			answer(automaton.Response{}, rctx.Err())
		}
	})
	if !rb.SubmitReply(rctx, ns, req, answer) {
		go func() {
			res, err := s.b.Do(rctx, ns, req)
			answer(res, err)
		}()
	}
}
