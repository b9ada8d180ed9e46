package grpcserver

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Pipelining over gRPC (api/synod.proto, rpc Pipeline; issue 28 item 6:
// the gRPC API at parity with the Redis protocol's pipelines).
//
// A stream is served as the Redis gateway serves a connection
// (gateway/pipeline.go, "Pipelining" and "Batches"):
//
//   - Identity. The stream picks a random client id of its own, as a Redis
//     connection does; each batch or call run alone takes its next seq. A
//     call run concurrently (below) takes a lane: a client id of its own
//     with its own seqs, held for the call and reused after, so that no
//     client id has two requests in flight. Calls carry no client_id or
//     seq (INVALID_ARGUMENT otherwise): a call joins a batch under the
//     batch's identity, so the caller's identity could not deduplicate a
//     retry anyway.
//   - Batches. Where the namespace's protocol applies atomic groups, the
//     single-operation calls without request options (and without guards)
//     that are queued when the previous batch completes form one atomic
//     group (Backend.Do with Request.Ops; one operation alone goes as
//     Request.Op), at most maxBatch calls and about maxBatchBytes of
//     arguments, consecutive calls of one namespace and read mode. The
//     stream's executor runs one batch at a time; what the receiver queues
//     meanwhile is the next batch, so the batches grow with the load as a
//     Redis connection's reads do. An operation's error answers its call;
//     a failure of the group as a whole (an error result, a Backend.Do
//     error) answers each call of the batch.
//   - Other calls. In a namespace without atomic groups a call of one
//     operation on a key runs concurrently with the stream's other calls
//     (at most maxLanes in flight), after the stream's earlier calls on the
//     same namespace and key completed (the conflict rule). Where the
//     Backend hands several requests to the namespace's loop at once
//     (gateway.BatchBackend) and the protocol steps client batches
//     (automaton.StepsClientBatches: ABD, ESDS), the consecutive such calls
//     of one namespace on distinct keys that the executor takes together
//     go as one group: one goroutine, one hand-off to the loop
//     (BatchBackend.DoBatch), each call with its own identity and its own
//     answer, their replies written together (runGroup); any other call
//     (a group, a keyless operation, a call with options in an atomic
//     namespace) runs alone after every earlier call completed, and later
//     calls wait for it.
//   - Named groups. A message that carries a client_id and seq
//     (PipelineRequest) is one atomic group under that RequestID, run on
//     its own (after every earlier call, before any later one; not joined
//     with queued calls, not split): the same request Do makes of these
//     ops with that identity, so a caller whose stream failed may send it
//     again (Do, another stream, another node) and a namespace that
//     deduplicates retries applies it once (runNamed). Its calls must be
//     batch calls of one namespace and read mode, at most maxBatch; else
//     each is refused INVALID_ARGUMENT. A call refused by Do's checks
//     refuses the whole message, as Do refuses a group.
//   - Replies. The executor writes a batch's replies (and a call run
//     alone's) itself, in one message. The other replies (refusals,
//     concurrent calls) are written by the goroutine that made them, with
//     no hand-off: a reply made while another goroutine is writing is
//     queued, and that writer sends the queued replies, as many as are
//     queued in one message, before it returns (reply). A message holds at most about
//     maxReplyBytes (a reply holds at most one value of
//     service.MaxValueSize, so a message stays within
//     synodpb.MaxMessageSize).
//   - Hand-offs. The stream's goroutines take turns receiving (pipe's
//     roles): a message that finds the stream idle is run by the goroutine
//     that received it, which first wakes another to receive; one that
//     finds a batch running is queued for it. A call on a quiet stream
//     thus reaches the namespace's loop from the goroutine gRPC woke for
//     it, as a Redis connection's command does, and the last concurrent
//     calls of an idle stream run on that goroutine too (execute's tail).
//   - A lone call (the direct transport, a Backend that answers through a
//     callback: gateway.ReplyBackend, the node): a message of one call
//     that finds the stream idle (no executor, nothing queued, no
//     concurrent call in flight), a single operation of an atomic
//     namespace (a batch of one, under the stream's next seq or the
//     message's name) or on a key, is handed over with SubmitReply by its
//     receiver, which holds the executor's role for it and goes back to
//     receiving at once; the goroutine that completes it writes its reply
//     (a non-blocking write, else a goroutine of its own) and gives the
//     role up, starting an executor for what was queued meanwhile
//     (submitLone, answerLone). So a lone Pipeline call, as a lone Do
//     (doreply.go), wakes no worker and parks no executor; messages that
//     arrive meanwhile wait for it as they wait for a batch. Its context is
//     the stream's, ended also by RequestTimeout; since one lone call at a
//     time holds the role, one such context per stream serves them all,
//     re-armed per call (loneCtx), and its reply's message and frame are
//     the stream's, reused: a lone call allocates no timer, context or
//     closure of its own (branch grpc50, docs/costs/s50-grpc50.md).
//   - Flow control. The receiver queues at most maxQueued messages; then it
//     stops reading and HTTP/2 flow control holds the caller back, as a
//     Redis connection stops being read.
//   - End. When the caller closes its side, the queued calls run and are
//     answered, then the stream ends OK. When the caller cancels or the
//     server closes, calls in flight are cut short (their replies, if the
//     stream still carries them, say the outcome is unknown) and no queued
//     call starts.
const (
	// maxBatch and maxBatchBytes are the Redis gateway's bounds of a batch
	// (gateway/pipeline.go maxBatch, maxBatchBytes): one log command and
	// one peer message stay well inside a peer frame.
	maxBatch      = 256
	maxBatchBytes = 1 << 20
	// maxLanes bounds a stream's concurrent calls (the Redis gateway's
	// maxPipelined).
	maxLanes = 64
	// maxQueued bounds the request messages received and not yet run.
	maxQueued = 64
	// maxReplyBytes is where the sender starts a new message.
	maxReplyBytes = 1 << 20
)

// rawStream is the direct transport's stream under a Pipeline stream
// (the generated wrapper over the interceptor's), or nil.
func rawStream(stream synodpb.Synod_PipelineServer) *h2sstream {
	gs, ok := stream.(*grpc.GenericServerStream[synodpb.PipelineRequest, synodpb.PipelineResponse])
	if !ok {
		return nil
	}
	ss := gs.ServerStream
	if us, ok := ss.(*userStream); ok {
		ss = us.ServerStream
	}
	h, _ := ss.(*h2sstream)
	return h
}

// recv receives the stream's next message: on the direct transport its
// bytes, decoded by hand when it is one common call (reqcodec.go).
func (p *pipe) recv() (*synodpb.PipelineRequest, error) {
	if p.raw == nil {
		return p.stream.Recv()
	}
	b, err := p.raw.recvBytes()
	if err != nil {
		return nil, err
	}
	return decodePipelineRequest(b, p.s.nsNames)
}

// Pipeline implements synod.v1.Synod.
func (s *Server) Pipeline(stream synodpb.Synod_PipelineServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	p := &pipe{
		s: s, stream: stream, ctx: ctx, cancel: cancel,
		kick:  make(chan struct{}, 1),
		end:   make(chan struct{}),
		lanes: make(chan *pipeLane, maxLanes),
		last:  map[laneKey]chan struct{}{},
	}
	p.cond = sync.NewCond(&p.wmu)
	// The stream's end wakes whoever waits on the roles (below).
	stopWake := context.AfterFunc(ctx, func() {
		p.wmu.Lock()
		p.cond.Broadcast()
		p.wmu.Unlock()
	})
	defer stopWake()
	p.client = randomClient()
	p.raw = rawStream(stream)
	p.batcher, _ = s.b.(gateway.BatchBackend)
	if _, ok := s.b.(gateway.ReplyBackend); ok {
		p.sendNow = sendNowOf(stream.Context())
	}
	go p.worker()
	// Wait until the caller has ended its side and everything received
	// has run, or the stream has ended; then no executor starts, and
	// every reply is written when the executor and the concurrent calls
	// have returned (reply).
	p.wmu.Lock()
	for (!p.recvEnded || p.executing) && ctx.Err() == nil {
		p.cond.Wait()
		if testHandlerWoke != nil {
			testHandlerWoke()
		}
	}
	p.stopped = true
	for p.executing {
		p.cond.Wait()
	}
	p.wmu.Unlock()
	close(p.end)
	p.wg.Wait()
	p.endSessions() // sessions.go
	if err := stream.Context().Err(); err != nil {
		// The stream's deadline passed or the caller cancelled: its
		// status, though the receiver may not have seen it (on the
		// direct transport it may be reading the connection, holding
		// its read turn, or a lone call's answer may have ended the
		// wait first).
		p.fail(status.FromContextError(err).Err())
	}
	if s.ctx.Err() != nil {
		return refusal(synoderr.TryAgain, "%s", "node is shutting down; calls without a reply have an unknown outcome")
	}
	p.errMu.Lock()
	defer p.errMu.Unlock()
	return p.err
}

// pipe is one Pipeline stream's state.
//
// Roles (the package doc's hand-offs): the stream's goroutines (workers)
// take turns receiving, as a Phases stream's do. The worker holding the
// receive turn (receiving) receives; a message that finds no executor
// makes its receiver the executor, which gives up the turn, wakes an idle
// worker to take it (a new one when none is idle) and runs the message
// itself: no hand-off between receiving a call and handing it to the
// namespace's loop. A message that finds an executor is queued for it (at
// most maxQueued). The executor runs what is queued until nothing is, then
// takes the turn back if no worker has taken it yet (a caller with one
// call at a time: the woken worker finds the turn taken and waits again),
// else waits as an idle worker (or ends, when another worker is idle).
type pipe struct {
	s      *Server
	stream synodpb.Synod_PipelineServer
	raw    *h2sstream      // stream's direct-transport stream (nil: grpc-go's): recv
	ctx    context.Context // the stream's, also ended by Server.Close
	cancel context.CancelFunc

	wmu       sync.Mutex
	cond      *sync.Cond    // on wmu: the queue, executing, recvEnded changed
	queue     []inMsg       // received, not yet taken by the executor
	receiving bool          // a worker holds the receive turn
	executing bool          // a worker is the executor
	recvEnded bool          // receiving ended: the caller closed its side, or the stream failed
	stopped   bool          // Pipeline is returning: no executor starts
	idle      int           // workers waiting for a kick, or about to
	kick      chan struct{} // wakes an idle worker to take the turn (capacity 1)
	end       chan struct{} // closed when Pipeline returns: idle workers end

	rmu     sync.Mutex
	queued  []*synodpb.CallReply // replies made while another goroutine was writing
	writing bool                 // a goroutine is writing the queued replies

	errMu sync.Mutex
	err   error // the first failure of the stream (receive or send), a status

	smu        sync.Mutex // held while sending (write)
	sendFailed bool

	batcher gateway.BatchBackend // the Backend's, when it hands over batches (runGroup)
	// sendNow writes a framed message now if that cannot wait (the direct
	// transport's h2sstream.sendNow), when the Backend is a ReplyBackend:
	// a lone call is then handed over and answered where it completes
	// (submitLone).
	sendNow  func([]byte) bool
	inflight atomic.Int64 // concurrent calls started and not done (submitLone)
	lone     *loneCtx     // the lone calls' context (submitLone's receiver's)

	// A lone call's reply message and frame (answerLone), under smu.
	oneResp    synodpb.PipelineResponse
	oneReplies [1]*synodpb.CallReply
	oneFrame   []byte
	oneWire    []byte // a Response's wire form (loneReply.appendFrame)

	// The executor's own (one worker at a time: the role passes under wmu).
	client uint64 // the stream's client id (batches and calls run alone)
	seq    uint64
	wrote  bool                      // the stream's client id sent a request that may write (sessions.go)
	usedNS []config.Namespace        // the namespaces of its own ids' requests (sessions.go)
	made   int                       // lanes created
	lanes  chan *pipeLane            // idle lanes
	wg     sync.WaitGroup            // concurrent calls in flight
	last   map[laneKey]chan struct{} // done of each key's latest concurrent call
}

// inMsg is a received message: its calls and the group identity it names
// (zero: none).
type inMsg struct {
	calls []*synodpb.Call
	id    automaton.RequestID
}

// pipeLane is the identity of a concurrent call.
type pipeLane struct {
	client, seq uint64
	wrote       bool // sent a request that may write (sessions.go)
}

// laneKey names a key of a namespace (the conflict rule).
type laneKey struct{ ns, key string }

func randomClient() uint64 {
	var b [8]byte
	for {
		rand.Read(b[:])
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

// fail records the stream's first failure and ends the stream.
func (p *pipe) fail(err error) {
	p.errMu.Lock()
	if p.err == nil {
		p.err = status.Convert(err).Err()
	}
	p.errMu.Unlock()
	p.cancel()
}

// worker is one of the stream's goroutines (pipe's roles): it takes the
// receive turn when nobody holds it, receives until a message makes it
// the executor, runs what is queued (and its last concurrent calls, if it
// has them, itself), and takes the turn again; when another worker holds
// it, it waits to be woken, unless another worker is idle already or the
// stream is ending.
func (p *pipe) worker() {
	p.wmu.Lock()
	for {
		switch {
		case p.recvEnded || p.stopped:
			p.wmu.Unlock()
			return
		case !p.receiving:
			p.receiving = true
			p.wmu.Unlock()
			if !p.receive() {
				return
			}
			if tail := p.execute(); tail != nil {
				tail()
			}
			p.wmu.Lock()
			continue
		case p.idle > 0:
			p.wmu.Unlock()
			return
		}
		p.idle++
		p.wmu.Unlock()
		select {
		case <-p.kick:
		case <-p.end:
			return
		}
		p.wmu.Lock()
		p.idle--
	}
}

// receive receives messages, holding the receive turn, and queues their
// calls, until a message finds no executor: its receiver then becomes
// the executor, gives up the turn and wakes an idle worker to take it (a
// new one when none is idle), and returns true. It returns false when
// receiving ended: the caller ended its side (recvEnded), or the stream
// failed or ended.
func (p *pipe) receive() bool {
	for {
		m, err := p.recv()
		if err != nil {
			if err != io.EOF {
				p.fail(err)
			}
			p.wmu.Lock()
			p.recvEnded = true
			p.receiving = false
			p.cond.Broadcast()
			p.wmu.Unlock()
			return false
		}
		if len(m.GetCalls()) == 0 {
			continue
		}
		p.wmu.Lock()
		if p.stopped || p.ctx.Err() != nil {
			p.receiving = false
			p.wmu.Unlock()
			return false
		}
		p.queue = append(p.queue, inMsg{calls: m.GetCalls(), id: automaton.RequestID{Client: m.GetClientId(), Seq: m.GetSeq()}})
		if !p.executing {
			p.executing = true
			if m := p.queue[0]; p.sendNow != nil && len(p.queue) == 1 && len(m.calls) == 1 && p.inflight.Load() == 0 {
				p.queue[0] = inMsg{}
				p.queue = p.queue[:0]
				p.wmu.Unlock()
				if p.submitLone(m.calls[0], m.id) {
					continue // handed over: this goroutine receives on
				}
				p.wmu.Lock()
				p.queue = append(p.queue, m)
			}
			p.receiving = false
			if p.idle > 0 {
				select {
				case p.kick <- struct{}{}:
				default: // a kick is pending already
				}
			} else {
				go p.worker()
			}
			p.wmu.Unlock()
			return true
		}
		pipeQueuedBehind.Add(1)
		if len(p.queue) >= maxQueued {
			// Not receiving for a while: the connection is read on
			// meanwhile (the direct transport's read turn, h2server.go).
			keepReading(p.ctx)
		}
		for len(p.queue) >= maxQueued && p.ctx.Err() == nil {
			p.cond.Wait()
		}
		p.wmu.Unlock()
	}
}

// write sends rs in messages of at most about maxReplyBytes, under the
// stream's send lock: the executor writes a batch's replies itself (one
// hand-off fewer per batch, as a Redis connection writes its replies), the
// sender the others'. After a failure it sends nothing.
func (p *pipe) write(rs []*synodpb.CallReply) {
	p.smu.Lock()
	defer p.smu.Unlock()
	var msg synodpb.PipelineResponse
	size := 0
	flush := func() {
		if len(msg.Replies) > 0 && !p.sendFailed {
			if err := p.stream.Send(&msg); err != nil {
				p.sendFailed = true
				p.fail(err)
			}
		}
		msg.Replies, size = nil, 0
	}
	if len(rs) == 1 { // one reply is one message: no size to add up
		msg.Replies = rs
		flush()
		return
	}
	for _, r := range rs {
		n := replyBytes(r)
		if size > 0 && size+n > maxReplyBytes {
			flush()
		}
		msg.Replies = append(msg.Replies, r)
		size += n
	}
	flush()
}

// replyBytes bounds r's encoded size from above without encoding the
// options map (proto.Size walks it by reflection, allocating per entry):
// its results' sizes, its strings, its options' names and values, and 16
// bytes of tags and lengths per field.
func replyBytes(r *synodpb.CallReply) int {
	n := 64 + len(r.GetMessage())
	resp := r.GetResponse()
	if resp == nil {
		return n
	}
	n += 16 + proto.Size(resp.GetResult()) + len(resp.GetOpId())
	for _, x := range resp.GetResults() {
		n += 16 + proto.Size(x)
	}
	for k, v := range resp.GetOptions() {
		n += 32 + len(k)
		for _, s := range v.GetValues() {
			n += 16 + len(s)
		}
	}
	return n
}

// reply sends rs: written at once by this goroutine, with whatever other
// goroutines queue meanwhile, unless another goroutine is writing, which
// then sends rs before it returns (so every reply made before execute
// returned has been written when the goroutine that made it, or the one
// writing for it, returned).
func (p *pipe) reply(rs ...*synodpb.CallReply) {
	p.rmu.Lock()
	p.queued = append(p.queued, rs...)
	if p.writing {
		p.rmu.Unlock()
		return
	}
	p.writing = true
	p.rmu.Unlock()
	p.drain()
}

// drain writes the queued replies until none is, then ends this
// goroutine's writing. The caller is the writer (writing set).
func (p *pipe) drain() {
	p.rmu.Lock()
	for len(p.queued) > 0 {
		out := p.queued
		p.queued = nil
		p.rmu.Unlock()
		p.write(out)
		p.rmu.Lock()
	}
	p.writing = false
	p.rmu.Unlock()
}

// failed is the reply of a call that failed with err, a status.
func failed(id uint64, err error) *synodpb.CallReply {
	st := status.Convert(err)
	return &synodpb.CallReply{Id: id, Code: uint32(st.Code()), Message: st.Message()}
}

// execute runs the queued calls, a batch at a time, until none is
// queued; then it gives up the executor's role. A named group (a message
// with an identity) runs on its own once the calls before it have run.
// When the last calls it ran end with concurrent calls started together
// (runCalls' tail) and nothing is queued, it returns their run instead of
// starting a goroutine for it: the worker runs it after giving up the
// role (the next message makes its receiver the executor).
func (p *pipe) execute() (tail func()) {
	var calls []*synodpb.Call
	var named *inMsg // a named message waiting for calls before it
	for {
		// Take what is queued, up to maxBatch calls (a longer message
		// runs in several turns), up to a named message.
		p.wmu.Lock()
		took, full := false, len(p.queue) >= maxQueued
		for named == nil && len(calls) < maxBatch && len(p.queue) > 0 {
			m := p.queue[0]
			p.queue[0] = inMsg{}
			p.queue = p.queue[1:]
			took = true
			if m.id.Client != 0 || m.id.Seq != 0 {
				named = &m
			} else {
				calls = append(calls, m.calls...)
			}
		}
		if took && full {
			p.cond.Broadcast() // room for the receiver
		}
		if p.ctx.Err() != nil || (len(calls) == 0 && named == nil) {
			if p.ctx.Err() != nil {
				p.queue = nil // no queued call starts
			}
			p.stopExecuting()
			p.wmu.Unlock()
			return nil
		}
		p.wmu.Unlock()
		if len(calls) > 0 {
			n := min(len(calls), maxBatch)
			t := p.runCalls(calls[:n], n == len(calls) && named == nil)
			calls = calls[n:]
			if t == nil {
				continue
			}
			p.wmu.Lock()
			if len(p.queue) == 0 {
				p.stopExecuting()
				p.wmu.Unlock()
				return t
			}
			p.wmu.Unlock()
			go t()
			continue
		}
		p.runNamed(*named)
		named = nil
	}
}

// stopExecuting gives up the executor's role (under wmu). Only Pipeline's
// own goroutine waits for the role's end, and only once receiving ended
// or the stream is ending (its loop's conditions): it is woken then, not
// at the end of every execution (a wake-up of a goroutine that found its
// condition unmet and waited again, per call of a caller with one call
// at a time). The receiver waits for room in the queue, not for this.
func (p *pipe) stopExecuting() {
	p.executing = false
	if p.recvEnded || p.stopped || p.ctx.Err() != nil {
		p.cond.Broadcast()
	}
}

// pipeQueuedBehind counts the messages queued behind a running executor
// (or a lone call in flight), for tests.
var pipeQueuedBehind atomic.Int64

// testHandlerWoke, when set (tests only), hears of each wake-up of
// Pipeline's own goroutine while it waits for the stream's end.
var testHandlerWoke func()

// runNamed runs a named message's calls as one atomic group under its
// identity (the package doc's "Named groups"), after every earlier call.
func (p *pipe) runNamed(m inMsg) {
	refuse := func(err error) {
		out := make([]*synodpb.CallReply, len(m.calls))
		for i, c := range m.calls {
			out[i] = failed(c.GetId(), err)
		}
		p.write(out)
	}
	if m.id.Client == 0 || m.id.Seq == 0 {
		refuse(refusal(synoderr.Invalid, "%s", "a named message needs both client_id and seq"))
		return
	}
	if len(m.calls) > maxBatch {
		refuse(refusal(synoderr.Invalid, "a named message holds at most %d calls (it has %d)", maxBatch, len(m.calls)))
		return
	}
	batch := make([]pcall, 0, len(m.calls))
	for i, c := range m.calls {
		in := c.GetRequest()
		if in == nil {
			refuse(refusal(synoderr.Invalid, "call %d of a named message has no request", i+1))
			return
		}
		ns, _, err := p.s.namespace(in.GetNamespace())
		var rule error
		switch {
		case err != nil:
		case in.GetClientId() != 0 || in.GetSeq() != 0:
			rule = refusal(synoderr.Invalid, "call %d of a named message carries a client_id or seq: its message names the group", i+1)
		case kind(ns, in) != joinBatch:
			rule = refusal(synoderr.Invalid, "call %d of a named message is not a single operation without options of a namespace with atomic groups", i+1)
		case i > 0 && (ns.Name != batch[0].ns.Name || in.GetRead() != m.calls[0].GetRequest().GetRead()):
			rule = refusal(synoderr.Invalid, "%s", "the calls of a named message are of one namespace and read mode")
		}
		if rule != nil {
			refuse(rule)
			return
		}
		var req automaton.Request
		if err == nil {
			req, err = p.s.prepare(p.ctx, ns, m.id, in)
		}
		if err != nil {
			out := make([]*synodpb.CallReply, len(m.calls))
			for j, c := range m.calls {
				if j == i {
					out[j] = failed(c.GetId(), err)
				} else {
					out[j] = failed(c.GetId(), refusal(synoderr.Unsupported, "not run: call %d of its named message was refused (%s)", i+1, status.Convert(err).Message()))
				}
			}
			p.write(out)
			return
		}
		batch = append(batch, pcall{id: c.GetId(), ns: ns, req: req, terse: in.GetTerse()})
	}
	p.barrier()
	p.runBatchAs(batch, m.id, false)
}

// pcall is a checked call.
type pcall struct {
	id    uint64
	ns    config.Namespace
	req   automaton.Request
	lane  *pipeLane // a grouped concurrent call's (runGroup)
	terse bool      // Request.terse: no op id and options in its reply
}

// callKind is how a call runs.
type callKind int

const (
	joinBatch  callKind = iota // a batch's operation (atomic namespace)
	concurrent                 // in flight beside others (conflict rule)
	alone                      // after every earlier call, before any later one
)

// kind decides how in runs (the package doc's rule).
func kind(ns config.Namespace, in *synodpb.Request) callKind {
	op := in.GetOp()
	single := op != nil && len(in.GetOps()) == 0 && in.GetTxn() == nil && !in.GetFanout()
	switch {
	case !single:
		return alone
	case automaton.TransactionsOf(ns.Protocol).Atomic:
		if len(in.GetOptions()) > 0 || in.GetOpId() != "" || len(in.GetPrev()) > 0 || in.GetStrict() || op.GetKind() == service.GuardKind {
			return alone
		}
		return joinBatch
	case op.GetKey() != "":
		return concurrent
	}
	return alone
}

// runCalls runs calls in order: consecutive batch calls of one namespace
// and read mode as one group, the others as kind says. When last (no call
// follows calls yet) and calls end with a group of concurrent calls, it
// returns the group's run (runGroup) for the caller to start (execute's
// tail) instead of starting it.
func (p *pipe) runCalls(calls []*synodpb.Call, last bool) (tail func()) {
	var batch []pcall
	var group []pcall // concurrent calls to hand over together (runGroup)
	size := 0
	flushGroup := func() {
		if len(group) > 0 {
			run := p.runGroup(group)
			go run()
			group = nil
		}
	}
	flush := func() {
		flushGroup()
		if len(batch) > 0 {
			p.barrier()
			p.runBatch(batch)
			clear(batch)
			batch, size = batch[:0], 0
		}
	}
	for _, c := range calls {
		in := c.GetRequest()
		if in == nil {
			p.reply(failed(c.GetId(), refusal(synoderr.Invalid, "%s", "call has no request")))
			continue
		}
		ns, _, err := p.s.namespace(in.GetNamespace())
		if err == nil && (in.GetClientId() != 0 || in.GetSeq() != 0) {
			err = refusal(synoderr.Invalid, "%s", "a pipelined call carries no client_id or seq: the stream identifies its calls (use Do to choose the identity)")
		}
		if err == nil && in.GetTxn() != nil {
			err = refusal(synoderr.Invalid, "%s", "transaction steps go through Do, not Pipeline")
		}
		if err == nil && in.GetFanout() {
			err = refusal(synoderr.Invalid, "%s", "fanout requests go through Do, not Pipeline")
		}
		if err != nil {
			p.reply(failed(c.GetId(), err))
			continue
		}
		switch kind(ns, in) {
		case joinBatch:
			// Checked under the stream's identity; the group gets its own
			// at run time (no option of the call depends on it: it has
			// none, and assigned ones are assigned to the group).
			req, err := p.s.prepare(p.ctx, ns, automaton.RequestID{Client: p.client, Seq: p.seq + 1}, in)
			if err != nil {
				p.reply(failed(c.GetId(), err))
				continue
			}
			n := opBytesOf(req.Op)
			if len(batch) > 0 && (batch[0].ns.Name != ns.Name || batch[0].req.Opts.Read != req.Opts.Read || size+n > maxBatchBytes) {
				flush()
			}
			batch = append(batch, pcall{id: c.GetId(), ns: ns, req: req, terse: in.GetTerse()})
			size += n
		case concurrent:
			if !p.groups(ns) {
				flush()
				p.startConcurrent(c.GetId(), ns, in)
				continue
			}
			if len(batch) > 0 {
				flush()
			}
			key := in.GetOp().GetKey()
			if len(group) > 0 && (group[0].ns.Name != ns.Name || slices.ContainsFunc(group, func(g pcall) bool { return g.req.Op.Key == key })) {
				flushGroup() // the same key: after this group (the conflict rule)
			}
			l := p.idleLane()
			if l == nil {
				flushGroup() // its calls hold lanes: start them before waiting for one
				if l = p.waitLane(); l == nil {
					p.reply(failed(c.GetId(), status.FromContextError(p.ctx.Err()).Err()))
					continue
				}
			}
			l.seq++
			req, err := p.s.prepare(p.ctx, ns, automaton.RequestID{Client: l.client, Seq: l.seq}, in)
			if err != nil {
				p.lanes <- l
				p.reply(failed(c.GetId(), err))
				continue
			}
			req.Unanswered = l.seq // the lane's only request in flight (sessions.go)
			p.noteOwn(ns, req, l)
			group = append(group, pcall{id: c.GetId(), ns: ns, req: req, lane: l, terse: in.GetTerse()})
		default:
			flush()
			p.barrier()
			p.seq++
			req, err := p.s.prepare(p.ctx, ns, automaton.RequestID{Client: p.client, Seq: p.seq}, in)
			if err != nil {
				p.reply(failed(c.GetId(), err))
				continue
			}
			req.Unanswered = p.seq // the stream's only request in flight (sessions.go)
			p.noteOwn(ns, req, nil)
			p.write([]*synodpb.CallReply{p.runOne(c.GetId(), ns.Name, req, in.GetTerse())})
		}
	}
	if last && len(batch) == 0 && len(group) > 0 {
		tail = p.runGroup(group)
		group = nil
	}
	flush()
	return tail
}

// groups reports whether ns's concurrent calls go in groups (the package
// doc's "Other calls").
func (p *pipe) groups(ns config.Namespace) bool {
	if p.batcher == nil || len(ns.Shards) > 0 {
		return false // a sharded namespace's requests are guarded one by one
	}
	if v, ok := stepsBatches.Load(ns.Protocol); ok {
		return v.(bool)
	}
	b := automaton.StepsClientBatches(ns.Protocol)
	stepsBatches.Store(ns.Protocol, b)
	return b
}

// stepsBatches caches automaton.StepsClientBatches per protocol.
var stepsBatches sync.Map

// runGroup prepares group, concurrent calls of one namespace on distinct
// keys, each on its lane, and returns its run, to be started on a
// goroutine of its own: one hand-off to the namespace's loop
// (BatchBackend.DoBatch), after the stream's earlier calls on their keys
// (the conflict rule); their replies are written together.
func (p *pipe) runGroup(group []pcall) (run func()) {
	if len(group) == 1 {
		c := group[0]
		return p.startOn(c.id, c.ns, c.req, c.lane, c.terse)
	}
	done := make(chan struct{})
	var prevs []chan struct{}
	for _, c := range group {
		k := laneKey{c.ns.Name, c.req.Op.Key}
		if prev := p.last[k]; prev != nil && !slices.Contains(prevs, prev) {
			prevs = append(prevs, prev)
		}
		p.last[k] = done
	}
	p.pruneLast()
	p.wg.Add(1)
	p.inflight.Add(1)
	return func() {
		defer p.wg.Done()
		defer p.inflight.Add(-1)
		defer close(done)
		for _, prev := range prevs {
			<-prev
		}
		reqs := make([]automaton.Request, len(group))
		for i, c := range group {
			reqs[i] = c.req
		}
		rctx, cancel := context.WithTimeout(p.ctx, p.s.opts.RequestTimeout)
		resps, errs := p.batcher.DoBatch(rctx, group[0].ns.Name, reqs)
		out := make([]*synodpb.CallReply, len(group))
		for i, c := range group {
			resp, err := p.s.response(p.ctx, rctx, c.req, resps[i], errs[i], c.terse)
			if err != nil {
				out[i] = failed(c.id, err)
			} else {
				out[i] = &synodpb.CallReply{Id: c.id, Response: resp}
			}
			p.lanes <- c.lane
		}
		cancel()
		p.reply(out...)
	}
}

func opBytesOf(op service.Op) int {
	n := len(op.Key)
	for _, a := range op.Args {
		n += len(a)
	}
	return n
}

// runOne runs a prepared request and makes its reply.
func (p *pipe) runOne(id uint64, ns string, req automaton.Request, terse bool) *synodpb.CallReply {
	resp, err := p.s.runWithin(p.ctx, ns, req, terse)
	if err != nil {
		return failed(id, err)
	}
	return &synodpb.CallReply{Id: id, Response: resp}
}

// runBatch runs a batch's calls as one atomic group (one operation alone
// as itself) under the stream's next seq, and answers each.
func (p *pipe) runBatch(batch []pcall) {
	p.seq++
	p.runBatchAs(batch, automaton.RequestID{Client: p.client, Seq: p.seq}, true)
}

// runBatchAs runs a batch's calls as one atomic group (one operation alone
// as itself) with request id id, and answers each: the request Do makes of
// the same ops with that id. own: id is the stream's own (runBatch), not
// a named message's (sessions.go).
func (p *pipe) runBatchAs(batch []pcall, id automaton.RequestID, own bool) {
	ns := batch[0].ns
	opts := automaton.AssignOptions(gateway.RequestOptionSpecs(ns.Protocol), id, automaton.Options{Read: batch[0].req.Opts.Read})
	var unanswered uint64
	if own {
		unanswered = id.Seq // the stream's only request in flight (sessions.go); a named group's identity is the caller's
	}
	if len(batch) == 1 {
		req := batch[0].req
		req.ID, req.Opts, req.Unanswered = id, opts, unanswered
		if own {
			p.noteOwn(ns, req, nil)
		}
		p.write([]*synodpb.CallReply{p.runOne(batch[0].id, ns.Name, req, batch[0].terse)})
		return
	}
	req := automaton.Request{ID: id, Opts: opts, Ops: make([]service.Op, len(batch)), Checked: true, Unanswered: unanswered} // each call's op was (prepare)
	for i, c := range batch {
		req.Ops[i] = c.req.Op
	}
	if own {
		p.noteOwn(ns, req, nil)
	}
	resp, err := p.s.runWithin(p.ctx, ns.Name, req, false)
	out := make([]*synodpb.CallReply, len(batch))
	for i, c := range batch {
		switch {
		case err != nil:
			out[i] = failed(c.id, err)
		case resp.GetResult().GetErr() != "" || len(resp.GetResults()) != len(batch):
			// The group failed as a whole: its result answers each call.
			r := resp.GetResult()
			if r.GetErr() == "" {
				r = synodpb.FromResult(service.Errorf("ERR internal error: a batch of %d operations answered %d results", len(batch), len(resp.GetResults())))
			}
			out[i] = &synodpb.CallReply{Id: c.id, Response: &synodpb.Response{Result: r, OpId: resp.GetOpId(), Options: resp.GetOptions()}}
		default:
			out[i] = &synodpb.CallReply{Id: c.id, Response: &synodpb.Response{Result: resp.GetResults()[i], OpId: resp.GetOpId(), Options: resp.GetOptions()}}
		}
		if r := out[i].GetResponse(); r != nil && c.terse {
			r.OpId, r.Options = "", nil
		}
	}
	p.write(out)
}

// barrier waits until every concurrent call has completed.
func (p *pipe) barrier() {
	p.wg.Wait()
	clear(p.last)
}

// startConcurrent starts a call of one operation on a key, after the
// stream's earlier calls on the same key (the conflict rule), on a lane.
func (p *pipe) startConcurrent(id uint64, ns config.Namespace, in *synodpb.Request) {
	terse := in.GetTerse()
	l := p.idleLane()
	if l == nil {
		if l = p.waitLane(); l == nil {
			p.reply(failed(id, status.FromContextError(p.ctx.Err()).Err()))
			return
		}
	}
	l.seq++
	req, err := p.s.prepare(p.ctx, ns, automaton.RequestID{Client: l.client, Seq: l.seq}, in)
	if err != nil {
		p.lanes <- l
		p.reply(failed(id, err))
		return
	}
	req.Unanswered = l.seq // the lane's only request in flight (sessions.go)
	p.noteOwn(ns, req, l)
	run := p.startOn(id, ns, req, l, terse)
	go run()
}

// idleLane returns an idle lane, or a new one while fewer than maxLanes
// were made; nil when every lane is in use.
func (p *pipe) idleLane() *pipeLane {
	select {
	case l := <-p.lanes:
		return l
	default:
	}
	if p.made < maxLanes {
		p.made++
		return &pipeLane{client: randomClient()}
	}
	return nil
}

// waitLane waits for a lane to come back; nil when the stream ended.
func (p *pipe) waitLane() *pipeLane {
	select {
	case l := <-p.lanes:
		return l
	case <-p.ctx.Done():
		return nil
	}
}

// startOn prepares req, prepared under lane l's identity, and returns its
// run, to be started on a goroutine of its own: after the stream's
// earlier calls on its key.
func (p *pipe) startOn(id uint64, ns config.Namespace, req automaton.Request, l *pipeLane, terse bool) (run func()) {
	k := laneKey{ns.Name, req.Op.Key}
	prev := p.last[k]
	done := make(chan struct{})
	p.last[k] = done
	p.pruneLast()
	p.wg.Add(1)
	p.inflight.Add(1)
	return func() {
		defer p.wg.Done()
		defer p.inflight.Add(-1)
		defer close(done)
		if prev != nil {
			<-prev
		}
		r := p.runOne(id, ns.Name, req, terse)
		p.lanes <- l
		p.reply(r)
	}
}

// pruneLast forgets the keys whose latest call completed, once the map
// has grown.
func (p *pipe) pruneLast() {
	if len(p.last) > 4*maxLanes {
		for k, d := range p.last {
			select {
			case <-d:
				delete(p.last, k)
			default:
			}
		}
	}
}

// submitLone runs a lone message's one call, taken by its receiver as the
// executor (the stream idle, nothing queued, no concurrent call in
// flight), without waiting for it: a single operation of an atomic
// namespace (a batch of one; a named message's under its identity) or on
// a key (a concurrent call) is handed over with SubmitReply under the
// stream's next seq, and the goroutine that completes it writes its reply (sendNow,
// else a goroutine of its own) and gives up the executor's role, starting
// an executor for what was queued meanwhile; the receiver goes back to
// receiving at once. So a lone Pipeline call, as a lone Do, wakes no
// goroutine besides the network's (no worker kicked to receive, no
// executor parked in Do). A call that is not such an operation is left to
// the executor as before (false).
func (p *pipe) submitLone(c *synodpb.Call, named automaton.RequestID) bool {
	in := c.GetRequest()
	if in == nil || in.GetClientId() != 0 || in.GetSeq() != 0 || in.GetTxn() != nil || in.GetFanout() {
		return false
	}
	ns, _, err := p.s.namespace(in.GetNamespace())
	if err != nil {
		return false
	}
	k := kind(ns, in)
	isNamed := named != (automaton.RequestID{})
	if (k != joinBatch && k != concurrent) || (isNamed && (k != joinBatch || named.Client == 0 || named.Seq == 0)) {
		return false
	}
	id := c.GetId()
	rid := named
	if !isNamed {
		p.seq++
		rid = automaton.RequestID{Client: p.client, Seq: p.seq}
	}
	req, err := p.s.prepare(p.ctx, ns, rid, in)
	if err == nil && k == joinBatch {
		// A batch of one, as runBatchAs makes it.
		req.Opts = automaton.AssignOptions(gateway.RequestOptionSpecs(ns.Protocol), rid, automaton.Options{Read: req.Opts.Read})
	}
	if err == nil && !isNamed {
		req.Unanswered = rid.Seq // the stream's only request in flight (sessions.go)
		p.noteOwn(ns, req, nil)
	}
	if err != nil {
		p.answerLone(loneReply{r: failed(id, err)})
		return true
	}
	lc := p.lone
	if lc == nil || !lc.arm(id, ns.Name, req, in.GetTerse()) {
		lc = newLoneCtx(p)
		p.lone = lc
		if !lc.arm(id, ns.Name, req, in.GetTerse()) {
			// The stream ended (its context's AfterFunc ran first): not
			// handed over, answered as a withdrawn call is.
			lc.answer(automaton.Response{}, lc.Err())
			return true
		}
	}
	if !lc.rb.SubmitReply(lc, ns.Name, req, lc.answerFn) {
		go func() {
			res, err := p.s.b.Do(lc, ns.Name, req)
			lc.answer(res, err)
		}()
	}
	return true
}

// loneCtx is a lone call's context (submitLone): the pipe's context ended
// also by RequestTimeout, as context.WithTimeout(p.ctx, RequestTimeout)
// would make it, with the same ends (the timeout, the stream's end, Close)
// and the same withdrawal (Abandon, then the answer with its error). One
// lone call at a time holds the pipe's executor's role, so one loneCtx
// serves them all, re-armed per call (arm), until it ends (its Done is
// then closed for good, and the next call gets a new one): a lone call no
// longer costs a timer context, a timer, an AfterFunc and four closures
// (12 of a lone get's 91 allocations, BenchmarkGRPCParity; branch grpc50).
// A late firing of the timer for an earlier call finds the current one's
// deadline not yet passed, or no call, and does nothing.
type loneCtx struct {
	p        *pipe
	rb       gateway.ReplyBackend
	timer    *time.Timer
	stop     func() bool                     // the pipe context's AfterFunc
	answerFn func(automaton.Response, error) // answer, bound once
	done     chan struct{}                   // closed when it ends

	mu       sync.Mutex
	err      error     // set when it ended
	deadline time.Time // the current call's
	live     bool      // a call is in flight: handed over, not yet answered
	id       uint64
	ns       string
	req      automaton.Request
	terse    bool
}

func newLoneCtx(p *pipe) *loneCtx {
	lc := &loneCtx{p: p, rb: p.s.b.(gateway.ReplyBackend), done: make(chan struct{})}
	lc.answerFn = lc.answer
	lc.timer = time.AfterFunc(time.Hour, func() { lc.end(context.DeadlineExceeded, true) })
	lc.timer.Stop()
	lc.stop = context.AfterFunc(p.ctx, func() { lc.end(p.ctx.Err(), false) })
	return lc
}

// arm makes lc the context of a new lone call, unless lc ended (false:
// the call is recorded, not live; a call made live is withdrawn by end).
func (lc *loneCtx) arm(id uint64, ns string, req automaton.Request, terse bool) bool {
	d := lc.p.s.opts.RequestTimeout
	lc.mu.Lock()
	lc.id, lc.ns, lc.req, lc.terse = id, ns, req, terse
	if lc.err != nil {
		lc.mu.Unlock()
		return false
	}
	lc.deadline = time.Now().Add(d)
	if pd, ok := lc.p.ctx.Deadline(); ok && pd.Before(lc.deadline) {
		lc.deadline = pd // the stream's end comes first (stop)
	}
	lc.live = true
	lc.mu.Unlock()
	lc.timer.Reset(d)
	return true
}

// end ends lc with err (the timer's: only once the current call's deadline
// passed) and withdraws the call in flight, answering it with err, unless
// its answer is on its way.
func (lc *loneCtx) end(err error, timer bool) {
	lc.mu.Lock()
	if lc.err != nil || (timer && (!lc.live || time.Now().Before(lc.deadline))) {
		lc.mu.Unlock()
		return
	}
	lc.err = err
	close(lc.done)
	live, ns, id := lc.live, lc.ns, lc.req.ID
	lc.mu.Unlock()
	lc.timer.Stop()
	lc.stop()
	if live && lc.rb.Abandon(ns, id) {
		lc.answer(automaton.Response{}, err)
	}
}

// answer answers the call in flight (the Backend's callback, or end's
// after a withdrawal: exactly one of them calls it per call).
func (lc *loneCtx) answer(res automaton.Response, err error) {
	lc.mu.Lock()
	id, req, terse := lc.id, lc.req, lc.terse
	lc.live, lc.req = false, automaton.Request{}
	lc.mu.Unlock()
	lc.timer.Stop() // before the role is given up (answerLone): the next call re-arms it
	p := lc.p
	if err != nil {
		_, err = p.s.response(p.ctx, lc, req, res, err, terse)
		p.answerLone(loneReply{r: failed(id, err)})
		return
	}
	p.answerLone(loneReply{id: id, req: req, res: res, terse: terse})
}

// loneReply is a lone call's reply: r, or (r nil) the answer res to req,
// written by hand where answerLone writes it at once (appendFrame:
// replycodec.go) and made a message only where it is queued or sent as one
// (msg): three or four allocations fewer per lone call.
type loneReply struct {
	r     *synodpb.CallReply
	id    uint64
	req   automaton.Request
	res   automaton.Response
	terse bool
}

// msg is the reply as a message.
func (lr loneReply) msg(s *Server) *synodpb.CallReply {
	if lr.r != nil {
		return lr.r
	}
	out, err := s.response(context.Background(), context.Background(), lr.req, lr.res, nil, lr.terse)
	if err != nil {
		return failed(lr.id, err)
	}
	return &synodpb.CallReply{Id: lr.id, Response: out}
}

// appendFrame appends the framed PipelineResponse of the one reply,
// using p's buffers (the caller holds smu).
func (lr loneReply) appendFrame(p *pipe, b []byte) ([]byte, error) {
	if lr.r != nil {
		p.oneReplies[0] = lr.r
		p.oneResp = synodpb.PipelineResponse{Replies: p.oneReplies[:]}
		b, err := synodpb.AppendFrame(b, &p.oneResp)
		p.oneReplies[0] = nil
		return b, err
	}
	resp := appendResponse(p.oneWire[:0], lr.req, lr.res, lr.terse)
	if cap(resp) <= maxKeptFrame {
		p.oneWire = resp[:0]
	}
	// PipelineResponse{replies = 1: CallReply{id = 1, response = 4}}.
	cr := protowire.SizeTag(4) + protowire.SizeBytes(len(resp))
	if lr.id != 0 {
		cr += protowire.SizeTag(1) + protowire.SizeVarint(lr.id)
	}
	at := len(b)
	b = append(b, 0, 0, 0, 0, 0)
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(cr))
	if lr.id != 0 {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, lr.id)
	}
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	b = protowire.AppendBytes(b, resp)
	n := len(b) - at - 5
	if n > synodpb.MaxMessageSize {
		return nil, status.Errorf(codes.ResourceExhausted, "grpc: trying to send message larger than max (%d vs. %d)", n, synodpb.MaxMessageSize)
	}
	binary.BigEndian.PutUint32(b[at+1:at+5], uint32(n))
	return b, nil
}

// Deadline implements context.Context.
func (lc *loneCtx) Deadline() (time.Time, bool) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.deadline, true
}

// Done implements context.Context.
func (lc *loneCtx) Done() <-chan struct{} { return lc.done }

// Err implements context.Context.
func (lc *loneCtx) Err() error {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.err
}

// Value implements context.Context: the pipe context's values.
func (lc *loneCtx) Value(key any) any { return lc.p.ctx.Value(key) }

// answerLone answers a lone call (submitLone) on the goroutine that has
// its answer, and gives up the executor's role (doneExecuting), never
// waiting there but for the reply locks' short sections (the goroutine
// may be a namespace loop's). With no reply being written, it becomes the
// writer (writing) and holds the send lock (smu) across giving up the
// role and writing, so every later reply is written after this one (the
// executor's own writes wait for smu, the others queue behind writing):
// written now if that cannot wait (sendNow), else by a goroutine of its
// own that takes the writer's role over (Pipeline's end waits for it:
// wg); the replies queued meanwhile are written by a goroutine of its
// own (drain). With a reply being written (the previous call's writer
// finishing), the reply is queued for that writer, which writes it
// before it ends, and the role is given up at once: so the caller's
// next message, sent once it has this reply, finds the stream idle.
func (p *pipe) answerLone(lr loneReply) {
	p.rmu.Lock()
	if p.writing {
		// Given up before the writer can take the reply (rmu held: the
		// writer drains under it), so the caller's next message, sent once
		// it has this reply, finds the stream idle. Lock order rmu, wmu:
		// nobody takes rmu holding wmu.
		p.queued = append(p.queued, lr.msg(p.s))
		p.doneExecuting()
		p.rmu.Unlock()
		return
	}
	if !p.smu.TryLock() {
		p.rmu.Unlock()
		p.answerLater(lr.msg(p.s))
		return
	}
	p.writing = true
	p.rmu.Unlock()
	// The frame is the pipe's, reused under smu (sendNow copies it into
	// the connection's buffer).
	b, err := lr.appendFrame(p, p.oneFrame[:0])
	if cap(b) <= maxKeptFrame {
		p.oneFrame = b[:0]
	}
	p.wg.Add(1)
	p.doneExecuting()
	if err == nil && !p.sendFailed && p.sendNow(b) {
		p.smu.Unlock()
		p.rmu.Lock()
		if len(p.queued) == 0 {
			p.writing = false
			p.rmu.Unlock()
			p.wg.Done()
			return
		}
		p.rmu.Unlock()
		go func() {
			defer p.wg.Done()
			p.drain()
		}()
		return
	}
	// The message is the pipe's, reused under smu (Send marshals it); made
	// here, so that the goroutine does not take lr (which would move it to
	// the heap on every call).
	p.oneReplies[0] = lr.msg(p.s)
	p.oneResp = synodpb.PipelineResponse{Replies: p.oneReplies[:]}
	go func() {
		defer p.wg.Done()
		if !p.sendFailed {
			if err := p.stream.Send(&p.oneResp); err != nil {
				p.sendFailed = true
				p.fail(err)
			}
		}
		p.oneReplies[0] = nil
		p.smu.Unlock()
		p.drain()
	}()
}

// maxKeptFrame bounds the frame buffer a pipe keeps for its next lone
// reply (answerLone).
const maxKeptFrame = 64 << 10

// answerLater answers a lone call on a goroutine of its own, behind the
// replies queued or being written, then gives up the executor's role.
func (p *pipe) answerLater(r *synodpb.CallReply) {
	go func() {
		p.reply(r)
		p.doneExecuting()
	}()
}

// doneExecuting gives up the executor's role a lone call held
// (submitLone), or hands it to a new executor for what was queued
// meanwhile.
func (p *pipe) doneExecuting() {
	p.wmu.Lock()
	if len(p.queue) > 0 {
		p.wmu.Unlock()
		go func() {
			if tail := p.execute(); tail != nil {
				tail()
			}
		}()
		return
	}
	p.stopExecuting()
	p.wmu.Unlock()
}
