package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Pipelining over gRPC (api/synod.proto, rpc Pipeline).
//
// A GRPC client can keep one Pipeline stream open per connection and send
// requests on it without waiting for replies: many requests in flight on
// one connection, replies matched by id. Three ways use it:
//
//   - Options.Pipeline: the typed methods and DoOp of every goroutine go
//     through the streams (automatic pipelining, as rueidis does for
//     Redis): requests issued while the stream's writer is busy leave
//     together in one message, and the node runs the calls of a message
//     (and whatever else is queued) as one atomic group where the protocol
//     applies groups, as the Redis gateway runs a pipeline.
//   - GRPC.Go: one request, asynchronously (as net/rpc's Go): it returns a
//     *Call at once, whose Done closes when the reply is in.
//   - GRPC.Pipeline: go-redis's Pipeline shape: queue requests, then Exec
//     sends them together, in one message, and waits for every reply. Each
//     request's result or error is its own (an error answers its request
//     only); Exec returns the first error.
//
// Rules of a pipelined request (the stream's server side is
// gateway/grpcserver/pipeline.go):
//
//   - Order. Requests of one client on one namespace whose protocol applies
//     atomic groups take effect in the order the stream carries them (the
//     order Pipeline.Do queued them; for concurrent callers, the order
//     their requests reached the writer). Elsewhere the node keeps the
//     order of a stream's requests on the same key only.
//   - Retries follow the package doc's rules with one difference: a
//     pipelined request runs under the stream's identity (it may share an
//     atomic group with others), so a write that may have reached a node is
//     never resubmitted, even where the namespace deduplicates retries: its
//     error wraps ErrUnknownOutcome. Reads, and requests never sent (still
//     queued when the stream broke), are retried at the next address. A
//     broken stream is replaced by a new one on the next request, so a
//     node's restart fails only the requests in flight at the time.
//   - Leaders. Requests go to the namespace's leader when the client knows
//     it (failover.go's notifications), else to the address that last
//     answered; they are not resubmitted at a newly notified leader (Do's
//     stub does that for deduplicated namespaces).
//   - Not pipelined: transaction steps (Begin, Txn), and requests of
//     client_fanout namespaces (fanout.go), which go through Do.
//   - Cancellation. A request whose context ends is abandoned: if it was not
//     yet written it is dropped, otherwise its reply is ignored when it
//     comes (a write's outcome is then unknown). The other requests on the
//     stream are not affected. Close ends the streams.

// Call is a pipelined request in flight (GRPC.Go, Pipeline.Do).
type Call struct {
	done chan struct{}
	res  service.Result
	opID string
	err  error
}

// Done is closed when the call has completed.
func (c *Call) Done() <-chan struct{} { return c.done }

// Result waits for the call and returns what DoOp would: the result (an
// error result with a nil error, except TRYAGAIN of a write, which also
// comes as a *Error wrapping ErrUnknownOutcome) and the error.
func (c *Call) Result() (service.Result, error) {
	<-c.done
	return c.res, c.err
}

// OpID waits for the call and returns the operation's id (DoOp's second
// result).
func (c *Call) OpID() string {
	<-c.done
	return c.opID
}

// Go runs op on namespace ns as DoOp does, but on the pipeline (the
// package doc's rules), and returns at once.
func (c *GRPC) Go(ctx context.Context, ns string, op service.Op, o OpOptions) *Call {
	call := &Call{done: make(chan struct{})}
	go func() {
		defer close(call.done)
		call.res, call.opID, call.err = c.doOp(ctx, ns, op, o, true)
	}()
	return call
}

// Pipeline queues requests for one Exec (go-redis's Pipeline). It is not
// safe for concurrent use; the GRPC client it comes from is.
type Pipeline struct {
	c     *GRPC
	queue []queued
}

type queued struct {
	ns   string
	op   service.Op
	o    OpOptions
	call *Call
}

// Pipeline returns an empty pipeline of c.
func (c *GRPC) Pipeline() *Pipeline { return &Pipeline{c: c} }

// Do queues op on namespace ns with options o; its Call completes during
// Exec.
func (p *Pipeline) Do(ns string, op service.Op, o OpOptions) *Call {
	call := &Call{done: make(chan struct{})}
	p.queue = append(p.queue, queued{ns: ns, op: op, o: o, call: call})
	return call
}

// Len is the number of requests queued.
func (p *Pipeline) Len() int { return len(p.queue) }

// Exec sends the queued requests together and waits for all of them; the
// pipeline is then empty again. Each Call has its own result; Exec returns
// the first error of a call, in queue order (nil when every call had a
// result; an error result is a result, as for DoOp). The requests leave in
// queue order, in one message as far as the size limit allows, on the
// stream of one address (the first request's namespace's leader when
// known); a request that needs another attempt makes it on its own.
func (p *Pipeline) Exec(ctx context.Context) error {
	q := p.queue
	p.queue = nil
	if len(q) == 0 {
		return nil
	}
	c := p.c
	type prepared struct {
		req   *synodpb.Request
		first *scall // its first attempt, queued on st
		err   error
	}
	pre := make([]prepared, len(q))
	var batch []*scall
	start := -1
	var st *gstream
	for i, e := range q {
		req, err := c.request(e.ns, e.o)
		if err != nil {
			pre[i].err = err
			continue
		}
		req.Op = synodpb.FromOp(e.op)
		req.ClientId, req.Seq = 0, 0 // the stream identifies its calls
		pre[i].req = req
		props, err := c.nsProps(ctx, req.Namespace, e.op)
		if err != nil || (props.fanout && !c.opts.NoFanout) {
			continue // fails, or goes through Do, on its own
		}
		if start < 0 {
			start = c.preferred(props)
			if st, err = c.stream(ctx, c.conns[start]); err != nil {
				st = nil
			}
		}
		if st != nil {
			pre[i].first = &scall{req: req, done: make(chan struct{})}
			batch = append(batch, pre[i].first)
		}
	}
	if st != nil && st.enqueue(batch...) != nil {
		for i := range pre {
			pre[i].first = nil // the stream failed: nothing was queued
		}
	}
	for i, e := range q {
		go func() {
			defer close(e.call.done)
			if pre[i].err != nil {
				e.call.err = pre[i].err
				return
			}
			first := pre[i].first
			try := func(ctx context.Context, g *gconn, req *synodpb.Request) (*synodpb.Response, service.Result, bool, error) {
				if sc := first; sc != nil && g == c.conns[start] {
					first = nil
					return st.wait(ctx, sc, c.opts.Timeout)
				}
				return c.attemptStream(ctx, g, req)
			}
			var resp *synodpb.Response
			resp, e.call.res, e.call.err = c.sendPiped(ctx, pre[i].req, e.op.Kind, start, try, e.op)
			if v := resp.GetOptions()[automaton.OptOpID].GetValues(); len(v) > 0 {
				e.call.opID = v[0]
			}
		}()
	}
	var first error
	for _, e := range q {
		if _, err := e.call.Result(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// nsName is the namespace a request on ns goes to ("" means
// Options.Namespace).
func (c *GRPC) nsName(ns string) string {
	if ns == "" {
		return c.opts.Namespace
	}
	return ns
}

// preferred is where a pipelined request of namespace p starts: its
// leader when known, else the address that last answered.
func (c *GRPC) preferred(p nsProps) int {
	if p.hasLeader && !c.opts.NoLeaderWatch {
		if idx, _ := c.leader(p.name).target(); idx >= 0 {
			return idx
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// doOp is DoOp, on the pipeline when piped.
func (c *GRPC) doOp(ctx context.Context, ns string, op service.Op, o OpOptions, piped bool) (service.Result, string, error) {
	if !piped {
		return c.doOpVia(ctx, ns, op, o, -1, nil)
	}
	return c.doOpVia(ctx, ns, op, o, -1, c.attemptStream)
}

// doOpVia is DoOp with each attempt made by try (nil: Do calls, with
// DoOp's fail-over; else pipelined, starting at address start, -1 for the
// preferred one).
func (c *GRPC) doOpVia(ctx context.Context, ns string, op service.Op, o OpOptions, start int, try tryFunc) (service.Result, string, error) {
	req, err := c.request(ns, o)
	if err != nil {
		return service.Result{}, "", err
	}
	req.Op = synodpb.FromOp(op)
	var resp *synodpb.Response
	var res service.Result
	if try == nil {
		resp, res, err = c.send(ctx, req, op.Kind, op)
	} else {
		resp, res, err = c.sendPiped(ctx, req, op.Kind, start, try, op)
	}
	var id string
	if v := resp.GetOptions()[automaton.OptOpID].GetValues(); len(v) > 0 {
		id = v[0]
	}
	return res, id, err
}

// sendPiped runs req on the pipeline (the package doc's rules), or with
// Do where the pipeline does not apply.
func (c *GRPC) sendPiped(ctx context.Context, req *synodpb.Request, kind string, start int, try tryFunc, ops ...service.Op) (*synodpb.Response, service.Result, error) {
	p, err := c.nsProps(ctx, req.Namespace, ops...)
	if err != nil {
		return nil, service.Result{}, err
	}
	if p.fanout && !c.opts.NoFanout {
		return c.send(ctx, req, kind, ops...)
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, service.Result{}, ErrClosed
	}
	what := fmt.Sprintf("pipelined %s", kind)
	if req.ClientId != 0 || req.Seq != 0 {
		req.ClientId, req.Seq = 0, 0 // the stream identifies its calls
	}
	p.idempotent = false // ... so a write that may have run is never resubmitted
	if start < 0 {
		start = c.preferred(p)
	}
	return c.sendOne(ctx, req, what, p, start, try)
}

// --- streams ----------------------------------------------------------------

// gstream is a Pipeline stream on one connection: a writer sends queued
// calls, as many per message as are queued (within maxCallBytes), a
// reader matches replies to calls by id.
type gstream struct {
	s      synodpb.Synod_PipelineClient
	cancel context.CancelFunc
	kick   chan struct{} // wakes the writer (capacity 1)

	mu      sync.Mutex
	next    uint64
	queue   []*scall          // not yet handed to the stream
	pending map[uint64]*scall // handed to it, awaiting a reply
	err     error             // set once the stream failed
}

// scall is one call on a stream.
type scall struct {
	id    uint64
	req   *synodpb.Request
	sent  bool // handed to the stream: it may have reached the node
	done  chan struct{}
	reply *synodpb.CallReply
	err   error
}

// maxCallBytes is where the writer starts a new message.
const maxCallBytes = 1 << 20

// stream returns g's live stream, opening one when there is none (after
// waiting for the connection as a Do attempt does). An error means
// nothing was sent.
func (c *GRPC) stream(ctx context.Context, g *gconn) (*gstream, error) {
	g.smu.Lock()
	st := g.st
	g.smu.Unlock()
	if st != nil && st.alive() {
		return st, nil
	}
	if err := g.ready(ctx); err != nil {
		return nil, err
	}
	g.smu.Lock()
	defer g.smu.Unlock()
	if g.st != nil && g.st.alive() {
		return g.st, nil
	}
	sctx, cancel := context.WithCancel(c.life)
	s, err := g.stub.Pipeline(c.withAuth(sctx))
	if err != nil {
		cancel()
		return nil, err
	}
	st = &gstream{s: s, cancel: cancel, kick: make(chan struct{}, 1), pending: map[uint64]*scall{}}
	go st.writer()
	go st.reader()
	g.st = st
	return st, nil
}

func (st *gstream) alive() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.err == nil
}

func (st *gstream) wake() {
	select {
	case st.kick <- struct{}{}:
	default:
	}
}

// enqueue queues scs, in order, for the writer; an error means the stream
// has failed (none sent).
func (st *gstream) enqueue(scs ...*scall) error {
	st.mu.Lock()
	if st.err != nil {
		st.mu.Unlock()
		return st.err
	}
	for _, sc := range scs {
		st.next++
		sc.id = st.next
		st.queue = append(st.queue, sc)
	}
	st.mu.Unlock()
	st.wake()
	return nil
}

// writer sends the queued calls whenever woken.
func (st *gstream) writer() {
	ctx := st.s.Context()
	for {
		select {
		case <-st.kick:
		case <-ctx.Done():
			st.fail(status.FromContextError(ctx.Err()).Err())
			return
		}
		st.mu.Lock()
		if st.err != nil {
			st.mu.Unlock()
			return
		}
		q := st.queue
		st.queue = nil
		for _, sc := range q {
			sc.sent = true
			st.pending[sc.id] = sc
		}
		st.mu.Unlock()
		var msg synodpb.PipelineRequest
		size := 0
		for i, sc := range q {
			call := &synodpb.Call{Id: sc.id, Request: sc.req}
			n := proto.Size(call)
			if size > 0 && size+n > maxCallBytes {
				if err := st.s.Send(&msg); err != nil {
					st.fail(err)
					return
				}
				msg.Calls, size = nil, 0
			}
			msg.Calls = append(msg.Calls, call)
			size += n
			if i == len(q)-1 {
				if err := st.s.Send(&msg); err != nil {
					st.fail(err)
					return
				}
			}
		}
	}
}

// reader completes calls with their replies.
func (st *gstream) reader() {
	for {
		m, err := st.s.Recv()
		if err != nil {
			st.fail(err)
			return
		}
		for _, r := range m.GetReplies() {
			st.mu.Lock()
			sc := st.pending[r.GetId()]
			delete(st.pending, r.GetId())
			st.mu.Unlock()
			if sc != nil {
				sc.reply = r
				close(sc.done)
			}
		}
	}
}

// fail ends the stream once: every call without a reply fails with err
// (a status; io.EOF or a bare error becomes UNAVAILABLE).
func (st *gstream) fail(err error) {
	if _, ok := status.FromError(err); !ok {
		err = status.Errorf(codes.Unavailable, "pipeline stream failed: %v", err)
	}
	st.mu.Lock()
	if st.err != nil {
		st.mu.Unlock()
		return
	}
	st.err = err
	q, p := st.queue, st.pending
	st.queue, st.pending = nil, nil
	st.mu.Unlock()
	st.cancel()
	for _, sc := range q {
		sc.err = err
		close(sc.done)
	}
	for _, sc := range p {
		sc.err = err
		close(sc.done)
	}
}

// abandon gives up sc (its caller's context ended) and reports whether it
// may have reached the node.
func (st *gstream) abandon(sc *scall) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for i, q := range st.queue {
		if q == sc {
			st.queue = append(st.queue[:i], st.queue[i+1:]...)
			return false
		}
	}
	return sc.sent
}

// attemptStream is a tryFunc: one attempt of req as a call on g's stream.
func (c *GRPC) attemptStream(ctx context.Context, g *gconn, req *synodpb.Request) (*synodpb.Response, service.Result, bool, error) {
	g.smu.Lock()
	st := g.st
	g.smu.Unlock()
	if st == nil || !st.alive() {
		// Slow path: wait for the connection and open a stream.
		actx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
		var err error
		st, err = c.stream(actx, g)
		cancel()
		if err != nil {
			return nil, service.Result{}, false, err
		}
	}
	sc := &scall{req: req, done: make(chan struct{})}
	if err := st.enqueue(sc); err != nil {
		return nil, service.Result{}, false, err
	}
	return st.wait(ctx, sc, c.opts.Timeout)
}

// wait waits up to timeout for sc's reply (a tryFunc's results),
// abandoning sc when ctx ends or the time is up first.
func (st *gstream) wait(ctx context.Context, sc *scall, timeout time.Duration) (*synodpb.Response, service.Result, bool, error) {
	tm := time.NewTimer(timeout)
	defer tm.Stop()
	var cause error
	select {
	case <-sc.done:
	case <-ctx.Done():
		cause = ctx.Err()
	case <-tm.C:
		cause = context.DeadlineExceeded
	}
	if cause != nil {
		select {
		case <-sc.done: // completed meanwhile
		default:
			sent := st.abandon(sc)
			return nil, service.Result{}, sent, status.FromContextError(cause).Err()
		}
	}
	if sc.err != nil {
		return nil, service.Result{}, sc.sent, sc.err
	}
	r := sc.reply
	if code := codes.Code(r.GetCode()); code != codes.OK {
		return nil, service.Result{}, true, statusError(status.Error(code, r.GetMessage()))
	}
	if r.GetResponse() == nil {
		return nil, service.Result{}, true, errors.New("client: a call's reply has no response")
	}
	res, err := synodpb.ToResult(r.GetResponse().GetResult())
	return r.GetResponse(), res, true, err
}
