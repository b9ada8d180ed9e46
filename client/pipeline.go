package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
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
//   - Named groups (exactly once). Where the namespace's protocol applies
//     atomic groups and deduplicates retries (idempotent_retry: paxos,
//     pb, pbpaxos), the writer sends the single-operation calls without
//     options it finds queued together as named messages: one atomic
//     group per message under an identity of its own (a lane: a client
//     id of the client's with its next seq, PipelineRequest client_id and
//     seq), at most 256 calls of one namespace and read mode, about 1 MiB.
//     When the stream fails before a named call's reply came (the node was
//     killed, the connection broke) or the node answers it with an unknown
//     outcome (UNAVAILABLE, DEADLINE_EXCEEDED, TRYAGAIN), the message's
//     group is resubmitted once, through Do with the same identity and
//     ops, with Do's fail-over (failover.go: at the newly notified
//     leader): the namespace's session table applies it once and answers
//     its first outcome, which answers each call of the message. So no
//     such call ends with an unknown outcome while a node can still
//     answer it (TestPipelineLeaderKillGRPC in livetest). A lane is used
//     by one message at a time and reused once every call of the message
//     is answered (dropped when one was abandoned), so protocols that keep
//     only a client's latest seq deduplicate it too.
//   - Other retries follow the package doc's rules with one difference: a
//     pipelined request that is not in a named message runs under the
//     stream's identity (it may share an atomic group with others), so a
//     write that may have reached a node is never resubmitted, even where
//     the namespace deduplicates retries: its error wraps
//     ErrUnknownOutcome. Reads, and requests never sent (still queued when
//     the stream broke), are retried at the next address. A broken stream
//     is replaced by a new one on the next request, so a node's restart
//     fails only the requests in flight at the time.
//   - Leaders. Requests go to the namespace's leader when the client knows
//     it (failover.go's notifications), else to the address that last
//     answered; only named messages are resubmitted at a newly notified
//     leader (above).
//   - Not pipelined: transaction steps (Begin, Txn), and requests of
//     client_fanout namespaces (fanout.go), which go through Do.
//   - Cancellation. A request whose context ends is abandoned: if it was not
//     yet written it is dropped, otherwise its reply is ignored when it
//     comes (a write's outcome is then unknown). The other requests on the
//     stream are not affected. A lone request on a quiet stream is read by
//     its caller (gstream's read turn); when its context ends, the stream
//     is cut (the next request opens a new one) if no other request awaits
//     a reply on it, else the caller returns with the stream's next reply
//     (or once every other caller gave up). Close ends the streams.

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
			pre[i].first = &scall{req: req, done: make(chan struct{}), named: namedCall(props, req)}
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
	what := reqName{kind: kind, piped: true}
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
//
// Reading replies is a turn (turn), taken only while a call awaits a
// reply: a lone call on a quiet stream is read by its own caller (solo:
// gRPC's reader goroutine wakes the caller directly, one goroutine
// hand-off fewer per call than through the stream's reader goroutine);
// otherwise the stream's reader goroutine takes the turn when calls are
// sent and gives it back when none awaits a reply. A caller blocked in
// gRPC's Recv cannot be woken by its context, so a solo caller's context
// end or time limit cuts the stream (cancel: its Recv returns) when no
// other sent call awaits a reply; when others do, it waits for the
// stream's next reply (or until every other caller gave up, abandon) and
// then hands the turn to the reader goroutine, so one caller's
// cancellation never fails the others' calls.
type gstream struct {
	c      *GRPC
	s      synodpb.Synod_PipelineClient
	raw    *h2stream // s's direct-transport stream (nil: grpc-go's): recv
	cancel context.CancelFunc
	kick   chan struct{} // wakes the writer (capacity 1)
	rkick  chan struct{} // wakes the reader goroutine to its turn (capacity 1)

	mu      sync.Mutex
	next    uint64
	queue   []*scall          // not yet handed to the stream
	pending map[uint64]*scall // handed to it, awaiting a reply
	named   int               // named messages in flight (messages)
	writing bool              // a goroutine is sending (flush)
	turn    readTurn          // who reads replies
	solo    *scall            // the call whose caller reads (turn == byCaller)
	leave   error             // set when solo's caller must stop reading (its context ended)
	cut     bool              // the stream was cancelled for solo's caller
	err     error             // set once the stream failed

	// one: the message of one plain call (messages), reused by the one
	// goroutine sending (writing) once the message was sent: Send
	// marshals it before it returns, on both transports.
	one     synodpb.PipelineRequest
	oneCall synodpb.Call
	oneMsgs [1]*synodpb.PipelineRequest
	oneRefs [1]*synodpb.Call

	// soloTimer ends a solo caller's read at its timeout (readOwn): one
	// timer per stream, re-armed per solo call (one at a time); soloEnd
	// is the current solo call's timeout (under mu), so that a late firing
	// for an earlier call leaves the current one alone.
	soloTimer *time.Timer
	soloEnd   time.Time
}

// readTurn is who reads a stream's replies (gstream's doc).
type readTurn int

const (
	byNobody readTurn = iota // no call awaits a reply
	byReader                 // the stream's reader goroutine
	byCaller                 // a solo call's caller
)

// scall is one call on a stream.
type scall struct {
	id    uint64
	req   *synodpb.Request
	sent  bool  // handed to the stream: it may have reached the node
	named bool  // may go in a named message (namedCall)
	msg   *nmsg // its named message, set with sent (under the stream's mu)
	done  chan struct{}
	// notify, when set, receives the call once it completed (after done
	// closed); its capacity must hold every call that names it, so the
	// stream never blocks on it (client-driven ABD's phases).
	notify chan<- *scall
	reply  *synodpb.CallReply
	err    error
	// abandoned: its caller gave up after it was sent (under the
	// stream's mu).
	abandoned bool
}

// complete ends sc: done closes, then notify hears of it.
func (sc *scall) complete() {
	close(sc.done)
	if sc.notify != nil {
		sc.notify <- sc
	}
}

// namedCall reports whether req, a pipelined call on a namespace of
// properties p, goes in a named message (the package doc's "Named
// groups"; the server's rule is gateway/grpcserver's kind joinBatch).
func namedCall(p nsProps, req *synodpb.Request) bool {
	op := req.GetOp()
	return p.atomic && p.idempotent && !p.fanout && op != nil && len(req.GetOps()) == 0 &&
		req.GetTxn() == nil && !req.GetFanout() && len(req.GetOptions()) == 0 && req.GetOpId() == "" &&
		len(req.GetPrev()) == 0 && !req.GetStrict() && op.GetKind() != service.GuardKind &&
		req.GetClientId() == 0 && req.GetSeq() == 0
}

// maxNamed bounds the calls of a named message (the server's batch bound).
const maxNamed = 256

// maxNamedInFlight bounds a stream's named messages without all replies.
// With 2 the second message took only what queued while the first was
// sent, so groups halved: `synod bench --target grpc --pipeline 16
// --clients 64` on 3-node paxos with fsync (load 54-56, 3 rounds against
// the server batching before named messages) ran at 0.24-0.74x with 1.2-1.7x
// the servers' CPU per put; with 1, 0.56-1.19x at equal CPU per put.
const maxNamedInFlight = 1

// nmsg is a named message: its calls are one atomic group under its
// lane's identity (client id, seq).
type nmsg struct {
	c      *GRPC
	lane   *lane
	seq    uint64
	calls  []*scall
	calls0 [1]*scall // calls' array for a message of one call
	size   int
	left   atomic.Int32 // calls not yet finished (finish)
	// unanswered counts calls without a reply (under its stream's mu).
	unanswered int
	drop       atomic.Bool // a call was abandoned: the lane is not reused
	once       sync.Once
	done       chan struct{} // closed when the resubmission ended
	resp       *synodpb.Response
	err        error
}

// fits reports whether sc, of n bytes, may join m.
func (m *nmsg) fits(sc *scall, n int) bool {
	f := m.calls[0].req
	return len(m.calls) < maxNamed && m.size+n <= maxCallBytes &&
		sc.req.GetNamespace() == f.GetNamespace() && sc.req.GetRead() == f.GetRead()
}

// finish records that one call of m is done with; the lane goes back once
// all are, unless one was abandoned (kept false).
func (m *nmsg) finish(kept bool) {
	if !kept {
		m.drop.Store(true)
	}
	if m.left.Add(-1) == 0 && !m.drop.Load() {
		m.c.glanes.put(m.lane)
	}
}

// retryable reports whether a named call's reply leaves its outcome
// unknown: the stream failed, or the node answered UNAVAILABLE,
// DEADLINE_EXCEEDED or TRYAGAIN.
func (sc *scall) retryable() bool {
	if sc.err != nil {
		return true
	}
	switch codes.Code(sc.reply.GetCode()) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	case codes.OK:
		return replyError(sc.reply.GetResponse().GetResult().GetErr()).Kind == synoderr.TryAgain
	}
	return false
}

// resubmit answers sc, a call of m whose outcome was left unknown, from
// one resubmission of m's group (shared by its calls): Do with m's
// identity and ops, with Do's fail-over and retries.
func (m *nmsg) resubmit(ctx context.Context, sc *scall) (*synodpb.Response, service.Result, bool, error) {
	m.once.Do(func() { go m.run() })
	select {
	case <-m.done:
	case <-ctx.Done():
		return nil, service.Result{}, true, status.FromContextError(ctx.Err()).Err()
	}
	if m.err != nil {
		return nil, service.Result{}, true, m.err
	}
	r := m.resp
	res := r.GetResult()
	if len(m.calls) > 1 && res.GetErr() == "" {
		if len(r.GetResults()) != len(m.calls) {
			return nil, service.Result{}, true, fmt.Errorf("client: a resubmitted group of %d calls answered %d results", len(m.calls), len(r.GetResults()))
		}
		for i, c := range m.calls {
			if c == sc {
				res = r.GetResults()[i]
			}
		}
	}
	v, err := synodpb.ToResult(res)
	return &synodpb.Response{Result: res, OpId: r.GetOpId(), Options: r.GetOptions()}, v, true, err
}

// run resubmits m's group (resubmit).
func (m *nmsg) run() {
	defer close(m.done)
	c := m.c
	first := m.calls[0].req
	req := &synodpb.Request{Namespace: first.GetNamespace(), ClientId: m.lane.client, Seq: m.seq, Read: first.GetRead()}
	ops := make([]service.Op, len(m.calls))
	for i, sc := range m.calls {
		ops[i] = synodpb.ToOp(sc.req.GetOp())
		if len(m.calls) > 1 {
			req.Ops = append(req.Ops, sc.req.GetOp())
		}
	}
	if len(m.calls) == 1 {
		req.Op = first.GetOp()
	}
	ctx, cancel := context.WithTimeout(c.life, c.opts.Timeout)
	defer cancel()
	p, err := c.nsProps(ctx, req.Namespace, ops...)
	if err != nil {
		m.err = err
		return
	}
	p.idempotent = true // the namespace's, checked when the message was formed
	what := reqName{text: fmt.Sprintf("pipelined group of %d calls (request %x:%d) resubmitted after its outcome was left unknown", len(m.calls), req.ClientId, req.Seq)}
	if p.hasLeader && !c.opts.NoLeaderWatch {
		m.resp, _, m.err = c.sendLeader(ctx, req, what, p)
	} else {
		m.resp, _, m.err = c.sendOne(ctx, req, what, p, -1, c.attempt)
	}
}

// callBytes bounds the encoded size of a call carrying req from above,
// without encoding it (proto.Size walks the options map by reflection,
// allocating per entry): its operations' bytes, its options' names and
// values, its strings, and 16 bytes of tags and lengths per field.
func callBytes(req *synodpb.Request) int {
	n := 64 + len(req.GetNamespace()) + len(req.GetOpId())
	op := func(o *synodpb.Op) {
		n += 16 + len(o.GetKind()) + len(o.GetKey())
		for _, a := range o.GetArgs() {
			n += 16 + len(a)
		}
	}
	if o := req.GetOp(); o != nil {
		op(o)
	}
	for _, o := range req.GetOps() {
		op(o)
	}
	for _, p := range req.GetPrev() {
		n += 16 + len(p)
	}
	for k, v := range req.GetOptions() {
		n += 32 + len(k)
		for _, s := range v.GetValues() {
			n += 16 + len(s)
		}
	}
	if req.GetTxn() != nil {
		n += 64
	}
	return n
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
	st = &gstream{c: c, s: s, cancel: cancel, kick: make(chan struct{}, 1), rkick: make(chan struct{}, 1), pending: map[uint64]*scall{}}
	if gs, ok := s.(*grpc.GenericClientStream[synodpb.PipelineRequest, synodpb.PipelineResponse]); ok {
		st.raw, _ = gs.ClientStream.(*h2stream) // the direct transport's: replies decoded by hand (recv)
	}
	go st.writer()
	go st.reader()
	g.st = st
	return st, nil
}

// live returns g's stream when it has a live one, else nil.
func (g *gconn) live() *gstream {
	g.smu.Lock()
	st := g.st
	g.smu.Unlock()
	if st != nil && st.alive() {
		return st
	}
	return nil
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
// has failed (none sent). One small call on a quiet stream (nothing in
// flight, nobody writing) is sent by the caller itself (flush), one
// goroutine hand-off fewer per call for a client with one caller; it
// cannot block in gRPC's Send (a quiet stream's HTTP/2 window,
// synodpb.StreamWindow, holds it whole, and the node reads a quiet
// stream). Others wake the writer.
func (st *gstream) enqueue(scs ...*scall) error {
	_, err := st.enqueueAs(false, scs...)
	return err
}

// enqueueAs is enqueue; with solo, a call that finds the stream quiet
// (and nobody reading) is read by its caller, who takes the read turn
// (gstream's doc) and must then wait with readOwn (solo reports it).
func (st *gstream) enqueueAs(solo bool, scs ...*scall) (bool, error) {
	st.mu.Lock()
	if st.err != nil {
		st.mu.Unlock()
		return false, st.err
	}
	quiet := len(scs) == 1 && len(st.queue) == 0 && len(st.pending) == 0 && !st.writing &&
		callBytes(scs[0].req) <= maxInlineBytes
	solo = solo && quiet && st.turn == byNobody
	if solo {
		st.turn, st.solo, st.leave, st.cut = byCaller, scs[0], nil, false
	}
	for _, sc := range scs {
		st.next++
		sc.id = st.next
		st.queue = append(st.queue, sc)
	}
	st.mu.Unlock()
	if quiet {
		st.flush()
	} else {
		st.wake()
	}
	return solo, nil
}

// maxInlineBytes bounds a call its caller sends itself (enqueue).
const maxInlineBytes = 64 << 10

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
		st.flush()
	}
}

// flush sends the queued calls, and those queued meanwhile, unless
// another goroutine is sending (it then sends them before it stops).
func (st *gstream) flush() {
	st.mu.Lock()
	if st.writing {
		st.mu.Unlock()
		return
	}
	st.writing = true
	for st.err == nil {
		msgs := st.messages()
		if len(msgs) == 0 {
			break
		}
		if st.turn == byNobody && len(st.pending) > 0 {
			st.turn = byReader // its replies are the reader goroutine's to read
			select {
			case st.rkick <- struct{}{}:
			default:
			}
		}
		st.mu.Unlock()
		for k, msg := range msgs {
			if err := st.s.Send(msg); err != nil {
				st.unsent(msgs[k:])
				st.fail(err)
				break
			}
		}
		st.mu.Lock()
		st.oneCall.Request = nil // sent (or failed): not kept
	}
	st.writing = false
	st.mu.Unlock()
}

// unsent marks the calls of msgs as never sent: gRPC's Send failed before
// it queued the first of them (the stream had ended), so none reached the
// node, and fail then leaves their outcome known (retried elsewhere, as a
// call still queued).
func (st *gstream) unsent(msgs []*synodpb.PipelineRequest) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, msg := range msgs {
		for _, call := range msg.GetCalls() {
			if sc := st.pending[call.GetId()]; sc != nil {
				sc.sent = false
			}
		}
	}
}

// messages takes the queued calls to send now and makes the messages that
// carry them, in order (under st.mu): the calls that may go in named
// messages in named messages (the package doc's "Named groups"), the
// others in plain ones, each at most about maxCallBytes; and hands every
// call taken to the stream (sent, pending). At most maxNamedInFlight named
// messages are in flight on a stream: the server runs each alone, before
// anything sent after it, so the calls from the next named one on stay
// queued until its replies are in (the reader wakes the writer) and then
// leave together, as the server gathers the calls queued during a batch
// into the next one.
func (st *gstream) messages() []*synodpb.PipelineRequest {
	q := st.queue
	st.queue = nil
	if len(q) == 1 && !q[0].named {
		// One plain call (a lone caller's): the stream's reused message.
		sc := q[0]
		q[0] = nil
		st.queue = q[:0] // its array kept for the next call
		sc.sent = true
		st.pending[sc.id] = sc
		st.oneCall = synodpb.Call{Id: sc.id, Request: sc.req}
		st.oneRefs[0] = &st.oneCall
		st.one = synodpb.PipelineRequest{Calls: st.oneRefs[:]}
		st.oneMsgs[0] = &st.one
		return st.oneMsgs[:]
	}
	if len(q) == 1 && st.named < maxNamedInFlight {
		// One named call (a lone caller's on a namespace with atomic
		// groups): a named message of its own, in the stream's reused
		// message as a plain call's.
		sc := q[0]
		q[0] = nil
		st.queue = q[:0]
		sc.sent = true
		st.pending[sc.id] = sc
		l := st.c.glanes.get()
		l.seq++
		m := &nmsg{c: st.c, lane: l, seq: l.seq, done: make(chan struct{})}
		st.named++
		m.calls = append(m.calls0[:0], sc)
		m.size = callBytes(sc.req)
		m.left.Add(1)
		m.unanswered++
		sc.msg = m
		st.oneCall = synodpb.Call{Id: sc.id, Request: sc.req}
		st.oneRefs[0] = &st.oneCall
		st.one = synodpb.PipelineRequest{Calls: st.oneRefs[:], ClientId: l.client, Seq: l.seq}
		st.oneMsgs[0] = &st.one
		return st.oneMsgs[:]
	}
	var msgs []*synodpb.PipelineRequest
	var msg *synodpb.PipelineRequest
	var m *nmsg // msg's named message, nil for a plain one
	size := 0
	for k, sc := range q {
		call := &synodpb.Call{Id: sc.id, Request: sc.req}
		n := callBytes(sc.req)
		if sc.named && (m == nil || !m.fits(sc, n)) && st.named >= maxNamedInFlight {
			st.queue = append(st.queue, q[k:]...) // after the named message in flight
			break
		}
		sc.sent = true
		st.pending[sc.id] = sc
		switch {
		case sc.named && (m == nil || !m.fits(sc, n)):
			l := st.c.glanes.get()
			l.seq++
			m = &nmsg{c: st.c, lane: l, seq: l.seq, done: make(chan struct{})}
			st.named++
			msg = &synodpb.PipelineRequest{ClientId: l.client, Seq: l.seq}
			msgs = append(msgs, msg)
			size = 0
		case !sc.named && (msg == nil || m != nil || size+n > maxCallBytes):
			m = nil
			msg = &synodpb.PipelineRequest{}
			msgs = append(msgs, msg)
			size = 0
		}
		if m != nil {
			m.calls = append(m.calls, sc)
			m.size += n
			m.left.Add(1)
			m.unanswered++
			sc.msg = m
		}
		msg.Calls = append(msg.Calls, call)
		size += n
	}
	return msgs
}

// reader completes calls with their replies while the read turn is its
// (gstream's doc): woken when calls were sent and no caller reads them,
// it reads until no call awaits a reply.
func (st *gstream) reader() {
	ctx := st.s.Context()
	for {
		select {
		case <-st.rkick:
		case <-ctx.Done():
			st.fail(status.FromContextError(ctx.Err()).Err())
			return
		}
		st.mu.Lock()
		mine := st.turn == byReader
		st.mu.Unlock()
		for mine {
			m, err := st.recv()
			if err != nil {
				st.fail(err)
				return
			}
			st.deliver(m)
			st.mu.Lock()
			if len(st.pending) == 0 && st.turn == byReader {
				st.turn, mine = byNobody, false
			}
			st.mu.Unlock()
		}
	}
}

// recv receives the stream's next message: on the direct transport its
// bytes, decoded by hand when it is a common lone reply (respcodec.go).
func (st *gstream) recv() (*synodpb.PipelineResponse, error) {
	if st.raw == nil {
		return st.s.Recv()
	}
	b, err := st.raw.recvBytes()
	if err != nil {
		return nil, err
	}
	return decodePipelineResponse(b)
}

// deliver completes the calls m answers.
func (st *gstream) deliver(m *synodpb.PipelineResponse) {
	if testDeliver != nil {
		testDeliver()
	}
	for _, r := range m.GetReplies() {
		st.mu.Lock()
		sc := st.pending[r.GetId()]
		delete(st.pending, r.GetId())
		wake := false
		if sc != nil && sc.msg != nil {
			if sc.msg.unanswered--; sc.msg.unanswered == 0 {
				st.named--
				wake = len(st.queue) > 0
			}
		}
		st.mu.Unlock()
		if wake {
			st.wake()
		}
		if sc != nil {
			sc.reply = r
			sc.complete()
		}
	}
}

// readOwn waits for sc, a solo call (enqueueAs), reading the stream's
// replies itself until sc's is in, its context ends or timeout passes
// (gstream's doc: the stream is then cut, unless another sent call awaits
// a reply), and returns what wait would.
func (st *gstream) readOwn(ctx context.Context, sc *scall, timeout time.Duration) (*synodpb.Response, service.Result, bool, error) {
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { st.leaveSolo(sc, ctx.Err()) })
		defer stop()
	}
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > timeout {
		st.mu.Lock()
		st.soloEnd = time.Now().Add(timeout) // zero again when sc leaves
		if st.soloTimer == nil {
			st.soloTimer = time.AfterFunc(timeout, st.soloExpired)
		} else {
			st.soloTimer.Reset(timeout)
		}
		st.mu.Unlock()
		defer st.soloTimer.Stop()
	}
	for {
		select {
		case <-sc.done:
		default:
			st.mu.Lock()
			leave := st.leave
			st.mu.Unlock()
			if leave == nil {
				m, err := st.recv()
				if err != nil {
					st.fail(err)
				} else {
					st.deliver(m)
				}
				continue
			}
		}
		break
	}
	// Give the turn up: to the reader goroutine when calls sent meanwhile
	// await replies; wake the writer for calls queued meanwhile.
	st.mu.Lock()
	cause := st.leave
	st.solo, st.leave, st.soloEnd = nil, nil, time.Time{}
	kickR, kickW := false, false
	if st.turn == byCaller {
		st.turn = byNobody
		if len(st.pending) > 0 && st.err == nil {
			st.turn, kickR = byReader, true
		}
	}
	kickW = len(st.queue) > 0
	st.mu.Unlock()
	if kickR {
		select {
		case st.rkick <- struct{}{}:
		default:
		}
	}
	if kickW {
		st.wake()
	}
	select {
	case <-sc.done:
		if sc.err == nil || cause == nil {
			return st.finish(ctx, sc, nil)
		}
	default:
		st.mu.Lock()
		if st.pending[sc.id] == sc {
			sc.abandoned = true
		}
		st.mu.Unlock()
	}
	return st.finish(ctx, sc, cause) // its reply is ignored when it comes
}

// leaveSolo makes sc's caller stop reading for cause, if sc is still the
// solo call.
func (st *gstream) leaveSolo(sc *scall, cause error) {
	st.mu.Lock()
	if st.solo == sc && st.leave == nil {
		st.leave = cause
		st.cutIfAlone()
	}
	st.mu.Unlock()
}

// soloExpired is soloTimer's: the solo call's timeout passed, unless the
// timer fired for an earlier solo call (soloEnd is then later, or zero
// while the current call has no timeout of its own).
func (st *gstream) soloExpired() {
	st.mu.Lock()
	if st.solo != nil && st.leave == nil && !st.soloEnd.IsZero() && !time.Now().Before(st.soloEnd) {
		st.leave = context.DeadlineExceeded
		st.cutIfAlone()
	}
	st.mu.Unlock()
}

// testDeliver, when set (tests only), is called by the goroutine that
// reads each reply message, before it completes its calls.
var testDeliver func()

// cutIfAlone cancels the stream for the solo caller that must leave, once
// no other sent call awaits a reply (under st.mu).
func (st *gstream) cutIfAlone() {
	if st.solo == nil || st.leave == nil || st.cut {
		return
	}
	for _, p := range st.pending {
		if p != st.solo && !p.abandoned {
			return
		}
	}
	st.cut = true
	st.cancel()
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
		sc.complete()
	}
	for _, sc := range p {
		sc.err = err
		sc.complete()
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
	if st.pending[sc.id] == sc {
		sc.abandoned = true
		st.cutIfAlone() // a solo caller waiting to leave may now
	}
	return sc.sent
}

// attemptStream is a tryFunc: one attempt of req as a call on g's stream.
// A call whose stream turned out dead before the call was sent (the node
// closed it, the client had not yet read the close) is tried once more on
// a new stream to the same address: a node that restarted is then used at
// once, as it should be, instead of being skipped as if it were down
// (TestPipelineServerRestart: a write after the restart failed at every
// address, "pipeline stream failed: EOF" at the restarted node, about 1
// run in 10 under -race at load 33).
func (c *GRPC) attemptStream(ctx context.Context, g *gconn, req *synodpb.Request) (*synodpb.Response, service.Result, bool, error) {
	resp, res, sent, err, st := c.attemptStreamOnce(ctx, g, req)
	if err != nil && !sent && st != nil && !st.alive() && ctx.Err() == nil {
		resp, res, sent, err, _ = c.attemptStreamOnce(ctx, g, req)
	}
	return resp, res, sent, err
}

// attemptStreamOnce is attemptStream without the second try; st is the
// stream the call was put on (nil if none).
func (c *GRPC) attemptStreamOnce(ctx context.Context, g *gconn, req *synodpb.Request) (_ *synodpb.Response, _ service.Result, _ bool, _ error, st *gstream) {
	g.smu.Lock()
	st = g.st
	g.smu.Unlock()
	if st == nil || !st.alive() {
		// Slow path: wait for the connection and open a stream.
		actx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
		var err error
		st, err = c.stream(actx, g)
		cancel()
		if err != nil {
			return nil, service.Result{}, false, err, nil
		}
	}
	sc := &scall{req: req, done: make(chan struct{})}
	if p, err := c.nsProps(ctx, req.GetNamespace()); err == nil {
		sc.named = namedCall(p, req)
	}
	// A call whose context has ended is not sent. Without this check it
	// was queued, and on a quiet stream enqueue sends it at once, before
	// wait sees the context: the node ran a call its caller had given up
	// before making it, and the caller was told the outcome was unknown.
	if err := ctx.Err(); err != nil {
		return nil, service.Result{}, false, err, nil
	}
	solo, err := st.enqueueAs(true, sc)
	if err != nil {
		return nil, service.Result{}, false, err, st
	}
	if solo {
		resp, res, sent, err := st.readOwn(ctx, sc, c.opts.Timeout)
		return resp, res, sent, err, st
	}
	resp, res, sent, err := st.wait(ctx, sc, c.opts.Timeout)
	return resp, res, sent, err, st
}

// wait waits up to timeout for sc's reply (a tryFunc's results),
// abandoning sc when ctx ends or the time is up first.
func (st *gstream) wait(ctx context.Context, sc *scall, timeout time.Duration) (*synodpb.Response, service.Result, bool, error) {
	var expired <-chan time.Time // nil (never) when ctx ends first anyway
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > timeout {
		tm := time.NewTimer(timeout)
		defer tm.Stop()
		expired = tm.C
	}
	var cause error
	select {
	case <-sc.done:
	case <-ctx.Done():
		cause = ctx.Err()
	case <-expired:
		cause = context.DeadlineExceeded
	}
	if cause != nil {
		select {
		case <-sc.done: // completed meanwhile
		default:
			st.abandon(sc)
			return st.finish(ctx, sc, cause)
		}
	}
	return st.finish(ctx, sc, nil)
}

// finish is wait's end for sc: given up for cause (its reply, if it
// comes, is ignored), or completed (cause nil).
func (st *gstream) finish(ctx context.Context, sc *scall, cause error) (*synodpb.Response, service.Result, bool, error) {
	if cause != nil {
		st.mu.Lock()
		sent := sc.sent
		st.mu.Unlock()
		if m := sc.msg; m != nil {
			m.finish(false)
		}
		return nil, service.Result{}, sent, status.FromContextError(cause).Err()
	}
	if m := sc.msg; m != nil {
		if sc.retryable() {
			resp, res, sent, err := m.resubmit(ctx, sc)
			m.finish(err == nil)
			return resp, res, sent, err
		}
		m.finish(true)
	}
	return sc.outcome()
}

// outcome is a completed call's reply as a tryFunc returns it (a call in
// no named message).
func (sc *scall) outcome() (*synodpb.Response, service.Result, bool, error) {
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
