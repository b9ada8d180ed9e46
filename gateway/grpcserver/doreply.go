package grpcserver

import (
	"encoding/binary"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
func (s *Server) doReply(st *h2sstream, msg []byte) {
	in, err := decodeRequest(msg, s.nsNames) // reqcodec.go
	if err != nil {
		st.replied(nil, err)
		return
	}
	pw, npw := st.uctx.h.value(synodpb.PasswordKey)
	name, nname := st.uctx.h.value(synodpb.UserKey)
	u, err := s.loginWith(st, synodpb.Synod_Do_FullMethodName, pw, npw, name, nname)
	if err != nil {
		st.replied(nil, err)
		return
	}
	st.uctx.user = u // st's Value(userKey{}) from now on
	ns, req, err := s.prepareDo(st, in)
	if err != nil {
		st.replied(nil, err)
		return
	}
	rb := s.b.(gateway.ReplyBackend)
	st.do = doCall{srv: s, rb: rb, ns: ns, req: req, terse: in.GetTerse()}
	// st ends when the caller's deadline or RequestTimeout passes, the
	// caller cancels, the connection ends or the server closes
	// (h2server.close cancels the async calls' contexts); then the
	// request is withdrawn (abandonDo), unless answered.
	st.limit(s.opts.RequestTimeout)
	st.arm()
	// Marked before the request is handed over: the answer runs after
	// SubmitReply took it (the Backend's lock orders the two).
	st.hold()
	if !rb.SubmitReply(st, ns, req, st.answerDo) {
		go st.doAnswer() // st.do, not req: a closure taking req would move it to the heap on every call
	}
}

// doAnswer runs a Do the Backend did not take (SubmitReply false) and
// answers it.
func (st *h2sstream) doAnswer() {
	d := &st.do
	res, err := d.srv.b.Do(st, d.ns, d.req)
	st.answerDo(res, err)
}

// answerDo is a Do's answer (the Backend's callback, or abandonDo's):
// converted and written (replied).
func (st *h2sstream) answerDo(res automaton.Response, err error) {
	st.answered()
	d := &st.do
	if err != nil {
		_, err = d.srv.response(st, st, d.req, res, err, d.terse)
		st.replied(nil, err)
		return
	}
	// The Response written as it would be marshalled, without making it
	// (replycodec.go).
	buf := replyBufs.Get().(*[]byte)
	b := append((*buf)[:0], 0, 0, 0, 0, 0)
	b = appendResponse(b, d.req, res, d.terse)
	n := len(b) - 5
	if n > synodpb.MaxMessageSize {
		putReplyBuf(buf, b)
		st.replied(nil, status.Errorf(codes.ResourceExhausted, "grpc: trying to send message larger than max (%d vs. %d)", n, synodpb.MaxMessageSize))
		return
	}
	binary.BigEndian.PutUint32(b[1:5], uint32(n))
	st.send(buf, b, statusOK)
}

// abandonDo withdraws a Do whose context ended before its answer, and
// answers it with the context's error if it did (else its answer is on
// its way).
func (st *h2sstream) abandonDo() {
	d := &st.do
	if d.rb.Abandon(d.ns, d.req.ID) {
		st.answerDo(automaton.Response{}, st.Err())
	}
}
