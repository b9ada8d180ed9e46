package client

import (
	"context"
	"fmt"
	"io"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/protocol/abd"
	"github.com/synod-dev/synod/service"
)

// Client-driven ABD's phases on a Phases stream (api/synod.proto, rpc
// Phases; the server side is gateway/grpcserver/phases.go).
//
// Each connection has at most one Phases stream, opened on first use and
// shared by the phases of every operation of the client (and of every
// namespace). A writer goroutine sends the queued phases, as many per
// message as are queued (one namespace per message, at most maxPhasesMsg
// phases and about maxCallBytes), and a reader completes them by id. At
// most phaseWindow messages are in flight on a stream: the phases queued
// meanwhile leave together once a message's replies are in, so that a
// message carries what the client's concurrent operations queued during
// one round trip and the replica hands them to its loop in one batch, as a
// node-coordinated replica takes a peer frame (the batches grow with the
// load). A replica that does not serve Phases (an older node:
// UNIMPLEMENTED) is asked through its Pipeline stream instead (abd.go).

const (
	// phaseWindow bounds a stream's messages without all their replies:
	// one, so that the phases queued during a round trip leave in one
	// message (with 2, as before session 61, a loaded client sent about
	// 1.2x the messages per operation, each a write, a read and a wake on
	// both sides; docs/costs/s61-cabd61.md).
	phaseWindow = 1
	// maxPhasesMsg bounds a message's phases (the server's bound,
	// grpcserver maxPhases).
	maxPhasesMsg = 1024
)

// pcall is one phase on a Phases stream.
type pcall struct {
	id    uint64
	ns    string
	phase *synodpb.Phase // &ph (the phase in the same allocation as its call)
	ph    synodpb.Phase
	msg   *pmsg // its message once sent (under the stream's mu)
	// notify receives the call once it completed; its capacity must hold
	// every call that names it, so the stream never blocks on it.
	notify chan<- *pcall
	reply  *synodpb.PhaseReply
	err    error
	// via, for a phase asked through the Pipeline stream (a replica
	// without Phases), is that call.
	via *scall
}

// pmsg is a message in flight: how many of its phases are unanswered.
type pmsg struct{ left int }

func (pc *pcall) complete() { pc.notify <- pc }

// result is a completed phase's outcome: the protocol's answer in the
// form protocol/abd's Coordinator reads (a query's [tag, value], a
// store's OK, an error result), or a status error.
func (pc *pcall) result() (service.Result, error) {
	if pc.via != nil {
		_, res, _, err := pc.via.outcome()
		return res, err
	}
	if pc.err != nil {
		return service.Result{}, pc.err
	}
	r := pc.reply
	if code := codes.Code(r.GetCode()); code != codes.OK {
		return service.Result{}, statusError(status.Error(code, r.GetMessage()))
	}
	switch {
	case r.GetErr() != "":
		return service.Result{Type: service.ResultErr, Err: r.GetErr()}, nil
	case pc.phase.GetTag() != "":
		return service.OK(), nil
	}
	val := service.Nil()
	if r.GetPresent() {
		val = service.Bytes(r.GetValue())
	}
	return service.Array(service.Bytes([]byte(r.GetTag())), val), nil
}

// queryAnswer reads a completed query phase's reply as protocol/abd's
// QueryAnswer, without making the [tag, value] result that result makes
// and ParseQueryAnswer reads (three allocations per reply); ok false for
// anything else (a store, a failure, an error result, a phase asked
// through Pipeline): result then says what it was. err: the tag does not
// parse (as ParseQueryAnswer would refuse it).
func (pc *pcall) queryAnswer() (q abd.QueryAnswer, ok bool, err error) {
	r := pc.reply
	if pc.via != nil || pc.err != nil || pc.phase.GetTag() != "" || r.GetCode() != 0 || r.GetErr() != "" {
		return q, false, nil
	}
	t, err := abd.ParseTag(r.GetTag())
	if err != nil {
		return q, true, fmt.Errorf("abd: query answer: %w", err)
	}
	q.Tag = t
	if r.GetPresent() {
		q.Value = r.GetValue()
	} else {
		q.Tomb = t != (abd.Tag{})
	}
	return q, true, nil
}

// pstream is a Phases stream on one connection.
type pstream struct {
	g      *gconn
	s      synodpb.Synod_PhasesClient
	cancel context.CancelFunc
	kick   chan struct{} // wakes the writer (capacity 1)

	mu       sync.Mutex
	next     uint64
	queue    []*pcall
	pending  map[uint64]*pcall
	inflight int   // messages without all replies
	err      error // set once the stream failed
}

// phases returns g's live Phases stream, opening one when there is none
// (after waiting for the connection). An error means nothing was sent.
func (c *GRPC) phases(ctx context.Context, g *gconn) (*pstream, error) {
	if ps := g.livePhases(); ps != nil {
		return ps, nil
	}
	if err := g.side.ready(ctx); err != nil { // Phases go over side (gconn.phaseStub)
		return nil, err
	}
	g.smu.Lock()
	defer g.smu.Unlock()
	if g.ps != nil && g.ps.alive() {
		return g.ps, nil
	}
	sctx, cancel := context.WithCancel(c.life)
	s, err := g.phaseStub.Phases(c.withAuth(sctx))
	if err != nil {
		cancel()
		return nil, err
	}
	ps := &pstream{g: g, s: s, cancel: cancel, kick: make(chan struct{}, 1), pending: map[uint64]*pcall{}}
	go ps.writer()
	go ps.reader()
	g.ps = ps
	return ps, nil
}

// livePhases returns g's Phases stream when it has a live one, else nil.
func (g *gconn) livePhases() *pstream {
	g.smu.Lock()
	ps := g.ps
	g.smu.Unlock()
	if ps != nil && ps.alive() {
		return ps
	}
	return nil
}

func (ps *pstream) alive() bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.err == nil
}

func (ps *pstream) wake() {
	select {
	case ps.kick <- struct{}{}:
	default:
	}
}

// enqueue queues pc for the writer; an error means the stream has failed
// (not sent).
func (ps *pstream) enqueue(pc *pcall) error {
	ps.mu.Lock()
	if ps.err != nil {
		ps.mu.Unlock()
		return ps.err
	}
	ps.next++
	pc.id = ps.next
	ps.queue = append(ps.queue, pc)
	wake := ps.inflight < phaseWindow
	ps.mu.Unlock()
	if wake {
		ps.wake()
	}
	return nil
}

// abandon drops pc if it is still queued (its phase ended without it).
// A phase already sent stays pending: its reply still counts for its
// message (the window), and is then dropped.
func (ps *pstream) abandon(pc *pcall) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for i, q := range ps.queue {
		if q == pc {
			ps.queue = append(ps.queue[:i], ps.queue[i+1:]...)
			return
		}
	}
}

// writer sends the queued phases whenever woken and the window allows.
func (ps *pstream) writer() {
	ctx := ps.s.Context()
	for {
		select {
		case <-ps.kick:
		case <-ctx.Done():
			ps.fail(status.FromContextError(ctx.Err()).Err())
			return
		}
		for {
			ps.mu.Lock()
			if ps.err != nil {
				ps.mu.Unlock()
				return
			}
			msg := ps.message()
			ps.mu.Unlock()
			if msg == nil {
				break
			}
			if err := ps.s.Send(msg); err != nil {
				if err != io.EOF { // io.EOF: the stream ended; the reader's Recv says why
					ps.fail(err)
				}
				return
			}
		}
	}
}

// message takes the next message's phases from the queue (under ps.mu):
// the queued phases of the first one's namespace, within maxPhasesMsg and
// about maxCallBytes; nil when the queue is empty or the window full.
func (ps *pstream) message() *synodpb.PhaseRequest {
	if len(ps.queue) == 0 || ps.inflight >= phaseWindow {
		return nil
	}
	ns := ps.queue[0].ns
	// The list at its largest at once (appending from nil grew it about
	// log2(n) times per message).
	msg := &synodpb.PhaseRequest{Namespace: ns, Phases: make([]*synodpb.Phase, 0, min(len(ps.queue), maxPhasesMsg))}
	m := &pmsg{}
	size := 0
	rest := ps.queue[:0]
	for _, pc := range ps.queue {
		n := 32 + len(pc.phase.GetKey()) + len(pc.phase.GetTag()) + len(pc.phase.GetValue())
		if pc.ns != ns || len(msg.Phases) >= maxPhasesMsg || (size > 0 && size+n > maxCallBytes) {
			rest = append(rest, pc)
			continue
		}
		pc.phase.Id = pc.id
		pc.msg = m
		ps.pending[pc.id] = pc
		msg.Phases = append(msg.Phases, pc.phase)
		size += n
	}
	clear(ps.queue[len(rest):])
	ps.queue = rest
	m.left = len(msg.Phases)
	ps.inflight++
	return msg
}

// reader completes phases with their replies.
func (ps *pstream) reader() {
	for {
		m, err := ps.s.Recv()
		if err != nil {
			ps.fail(err)
			return
		}
		done, wake := ps.answered(m.GetReplies())
		if wake {
			ps.wake()
		}
		for _, pc := range done {
			pc.complete()
		}
	}
}

// answered takes replies: it returns the phases they complete (abandoned
// ones included: their phase drops them) and whether a message's last
// reply freed a place in the window while phases are queued (the writer
// is then to be woken).
func (ps *pstream) answered(replies []*synodpb.PhaseReply) (done []*pcall, wake bool) {
	done = make([]*pcall, 0, len(replies)) // at its largest at once, as message's list
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, r := range replies {
		pc := ps.pending[r.GetId()]
		if pc == nil {
			continue
		}
		delete(ps.pending, r.GetId())
		if pc.msg.left--; pc.msg.left == 0 {
			ps.inflight--
			wake = len(ps.queue) > 0
		}
		pc.reply = r
		done = append(done, pc)
	}
	return done, wake
}

// fail ends the stream once: every phase without a reply fails with err
// (a status; a bare error becomes UNAVAILABLE).
func (ps *pstream) fail(err error) {
	if _, ok := status.FromError(err); !ok {
		err = status.Errorf(codes.Unavailable, "phases stream failed: %v", err)
	}
	ps.mu.Lock()
	if ps.err != nil {
		ps.mu.Unlock()
		return
	}
	ps.err = err
	if status.Code(err) == codes.Unimplemented {
		ps.g.noPhases.Store(true) // an older node: phases go through Pipeline (abd.go)
	}
	q, p := ps.queue, ps.pending
	ps.queue, ps.pending = nil, nil
	ps.mu.Unlock()
	ps.cancel()
	for _, pc := range q {
		pc.err = err
		pc.complete()
	}
	for _, pc := range p {
		pc.err = err
		pc.complete()
	}
}
