package grpcserver

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Client-driven ABD phases in a compact form (api/synod.proto, rpc
// Phases; issue 28 item 6: client-driven ABD within 2x of node-coordinated
// ABD).
//
// A phase is the request a client-driven ABD client makes of one replica
// (protocol/abd, direct.go: get KEY with abd.phase=query; set KEY VALUE or
// del KEY with abd.phase=store and abd.tag=TAG). Over Do or Pipeline it is
// a whole Request: the options map decoded and encoded by reflection, its
// options parsed and checked, a lane and a goroutine per group of calls,
// and a query's answer as a generic Result array. Here it is a Phase: key,
// tag, value; the node makes the same automaton.Request of it (the same
// options, checked as Do checks them), so the protocol answers it exactly
// as it answers a phase over Do, and replies with a PhaseReply: tag,
// value.
//
//   - Batches. Every phase of a message goes to the namespace's loop in
//     one hand-off (BatchBackend.DoBatch), as a node-coordinated replica
//     takes the messages of a peer frame; their replies leave in one
//     message. The client sends, per replica, every phase its concurrent
//     operations queued while its previous message was in flight
//     (client/phases.go), so the batches grow with the load.
//   - Concurrency. A stream has maxPhaseMsgs workers; they take turns
//     receiving, and the one that received a message runs it (no hand-off
//     between receiving a message and handing it to the loop; over the
//     direct transport the receiving worker reads the connection itself,
//     the read turn of h2server.go, as Pipeline's receiver), so at most
//     maxPhaseMsgs messages of a stream run at once; then the stream stops
//     reading and HTTP/2 flow control holds the caller back. The phases of a message and of
//     different messages are independent (ABD needs no order: a query has
//     no effect, a store installs a tag's value once, in any order).
//   - Identity. A stream picks a random client id; each phase takes the
//     next seq (the node matches answers by request id; phases are never
//     deduplicated, protocol/abd answers each from the register).
//   - Checks, per phase, as Do's (prepare): the namespace exists and its
//     protocol declares abd.phase (NOT_FOUND, INVALID_ARGUMENT as Do's
//     option check, for the whole message), the operation is valid for the service and the tag
//     parses with TS >= 1 (INVALID_ARGUMENT), the user may run it
//     (PERMISSION_DENIED); a refused phase runs nothing, the others run.
//   - End. When the caller closes its side, every message received is
//     answered, then the stream ends OK; when the caller cancels or the
//     server closes, phases in flight are cut short as Pipeline's are.
const (
	// maxPhaseMsgs bounds a Phases stream's messages running at once.
	maxPhaseMsgs = 4
	// maxPhases bounds a Phases message's phases (the batch bound of
	// Pipeline, maxBatch); more are refused INVALID_ARGUMENT.
	maxPhases = 4 * maxBatch
)

// The request a phase stands for: protocol/abd's client-driven options
// (direct.go), named here as api/synod.proto names them; the gateway knows
// no protocol, it takes the options' specs from the registry (a namespace
// whose protocol declares no optPhase refuses phases) and checks a tag
// with the protocol's own optTag spec.
const (
	optPhase   = "abd.phase"
	optTag     = "abd.tag"
	phaseQuery = "query"
	phaseStore = "store"
)

// Phases implements synod.v1.Synod.
func (s *Server) Phases(stream synodpb.Synod_PhasesServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	ph := &phaser{s: s, stream: stream, ctx: ctx, cancel: cancel, client: randomClient(), received: make(chan struct{})}
	ph.batcher, _ = s.b.(gateway.BatchBackend)
	ph.replier, _ = s.b.(gateway.BatchReplyBackend)
	ph.owner, _ = s.b.(ownedArgsReplier)
	ph.workers.Store(maxPhaseMsgs)
	ph.free.Store(maxPhaseMsgs)
	for range maxPhaseMsgs {
		go ph.work()
	}
	select {
	case <-ph.received: // the caller closed its side, or the stream failed
	case <-ctx.Done():
	}
	// No message starts from now on; wait for those running (a worker
	// still blocked in Recv ends with the stream).
	ph.mu.Lock()
	ph.closed = true
	ph.mu.Unlock()
	ph.running.Wait()
	if s.ctx.Err() != nil {
		return refusal(synoderr.TryAgain, "%s", "node is shutting down; phases without a reply have an unknown outcome")
	}
	ph.mu.Lock()
	defer ph.mu.Unlock()
	return ph.err
}

// phaser is one Phases stream's state.
type phaser struct {
	s        *Server
	stream   synodpb.Synod_PhasesServer
	ctx      context.Context
	cancel   context.CancelFunc
	batcher  gateway.BatchBackend
	replier  gateway.BatchReplyBackend // the Backend's, when it answers batches through callbacks (runReply)
	owner    ownedArgsReplier          // the Backend's, when it also takes the phases' values without copying them
	client   uint64
	workers  atomic.Int32  // workers not yet returned
	free     atomic.Int32  // workers not running a message (one of them receives next)
	received chan struct{} // closed when every worker returned
	running  sync.WaitGroup

	rmu   sync.Mutex // held by the worker receiving
	ended bool       // receiving ended (under rmu)

	mu     sync.Mutex
	seq    uint64
	closed bool  // no message may start (Phases is returning)
	err    error // the stream's first failure, a status

	smu        sync.Mutex // held while sending
	sendFailed bool
	msg        synodpb.PhaseResponse // the message being sent (under smu; Send marshals it before returning)
}

// fail records the stream's first failure and ends the stream.
func (ph *phaser) fail(err error) {
	ph.mu.Lock()
	if ph.err == nil {
		ph.err = status.Convert(err).Err()
	}
	ph.mu.Unlock()
	ph.cancel()
}

// work receives a message, in turn with the stream's other workers, and
// runs it (the doc's "Concurrency": the goroutine that received a message
// runs it; the workers live as long as the stream, so that their stacks,
// grown by a run, are not grown again for every message).
func (ph *phaser) work() {
	defer func() {
		if ph.workers.Add(-1) == 0 {
			close(ph.received)
		}
	}()
	var wk *phaseWorker // made on the first message, when the Backend answers through callbacks
	for {
		ph.rmu.Lock()
		var m *synodpb.PhaseRequest
		for !ph.ended && len(m.GetPhases()) == 0 {
			var err error
			if m, err = ph.stream.Recv(); err != nil {
				if err != io.EOF {
					ph.fail(err)
				}
				ph.ended = true
			}
		}
		ended := ph.ended
		ph.rmu.Unlock()
		if ended {
			return
		}
		ph.mu.Lock()
		ok := !ph.closed
		if ok {
			ph.running.Add(1)
		}
		ph.mu.Unlock()
		if !ok {
			return
		}
		if wk == nil && ph.replier != nil {
			wk = newPhaseWorker(ph)
		}
		// The direct transport's read turn (h2server.go): the stream's
		// receiver reads the connection itself, so a free worker's Recv
		// reads the next message as soon as this one is received. When
		// every worker is running a message nobody receives for a while:
		// the connection is read on meanwhile (the turn's promise).
		if ph.free.Add(-1) == 0 {
			keepReading(ph.ctx)
		}
		ph.run(m, wk)
		ph.free.Add(1)
		ph.running.Done()
	}
}

// run checks and runs a message's phases as one batch and sends their
// replies; wk, the worker's scratch, when the Backend answers through
// callbacks (runReply).
func (ph *phaser) run(m *synodpb.PhaseRequest, wk *phaseWorker) {
	phases := m.GetPhases()
	var out []*synodpb.PhaseReply
	if wk != nil {
		out = wk.take(len(phases))
	} else {
		out = make([]*synodpb.PhaseReply, len(phases))
	}
	refuseAll := func(err error) {
		st := status.Convert(err)
		for i, p := range phases {
			out[i] = &synodpb.PhaseReply{Id: p.GetId(), Code: uint32(st.Code()), Message: st.Message()}
		}
		ph.send(out)
	}
	if len(phases) > maxPhases {
		refuseAll(refusal(synoderr.Invalid, "a Phases message holds at most %d phases (it has %d)", maxPhases, len(phases)))
		return
	}
	ns, svc, err := ph.s.namespace(m.GetNamespace())
	var tagSpec automaton.OptionSpec
	if err == nil {
		specs := gateway.RequestOptionSpecs(ns.Protocol)
		i := slices.IndexFunc(specs, func(o automaton.OptionSpec) bool { return o.Name == optTag })
		if i < 0 || !slices.ContainsFunc(specs, func(o automaton.OptionSpec) bool { return o.Name == optPhase }) {
			err = refusal(synoderr.Invalid, "namespace %q uses %s, which declares no %s option: client-driven ABD phases need an abd namespace", ns.Name, ns.Protocol, optPhase)
		} else {
			tagSpec = specs[i]
		}
	}
	if err == nil && svc == nil {
		err = refusal(synoderr.Unsupported, "namespace %q has service %q, which this node does not know", ns.Name, ns.Service)
	}
	if err != nil {
		refuseAll(err)
		return
	}
	ph.mu.Lock()
	seq := ph.seq
	ph.seq += uint64(len(phases))
	ph.mu.Unlock()
	var reqs []automaton.Request
	var idx []int // reqs[k] answers phases[idx[k]]
	if wk != nil {
		reqs, idx = wk.reqs[:0], wk.idx[:0]
	} else {
		reqs, idx = make([]automaton.Request, 0, len(phases)), make([]int, 0, len(phases))
	}
	sl := newPhaseSlabs(len(phases))
	for i, p := range phases {
		req, err := ph.request(ns, svc, tagSpec, automaton.RequestID{Client: ph.client, Seq: seq + uint64(i) + 1}, p, sl.at(i))
		if err != nil {
			st := status.Convert(err)
			out[i] = &synodpb.PhaseReply{Id: p.GetId(), Code: uint32(st.Code()), Message: st.Message()}
			continue
		}
		reqs = append(reqs, req)
		idx = append(idx, i)
	}
	if wk != nil {
		wk.reqs, wk.idx = reqs, idx // grown: kept for the next message
	}
	if len(reqs) > 0 && wk != nil && wk.run(ns.Name, reqs, idx, phases, out) {
		ph.send(out)
		wk.done()
		return
	}
	if len(reqs) > 0 {
		rctx, cancel := context.WithTimeout(ph.ctx, ph.s.opts.RequestTimeout)
		var resps []automaton.Response
		var errs []error
		if ph.batcher != nil {
			resps, errs = ph.batcher.DoBatch(rctx, ns.Name, reqs)
		} else {
			resps, errs = make([]automaton.Response, len(reqs)), make([]error, len(reqs))
			for k, req := range reqs {
				resps[k], errs[k] = ph.s.b.Do(rctx, ns.Name, req)
			}
		}
		replies := make([]synodpb.PhaseReply, len(idx)) // one array for the message's replies
		for k, i := range idx {
			out[i] = &replies[k]
			ph.reply(out[i], phases[i].GetId(), rctx, reqs[k], resps[k], errs[k])
		}
		cancel()
	}
	ph.send(out)
	if wk != nil {
		wk.done()
	}
}

// phaseWorker is a worker's scratch, when the Backend answers through
// callbacks (gateway.BatchReplyBackend: the node), reused message after
// message: its run hands a message's phases to the loop in one batch with
// SubmitReplyBatch and waits until every one is answered. Over DoBatch it
// spares per phase the node's copy of the options (a map and its lists:
// the requests are the Backend's from now on, Submit's contract, and
// nothing here changes them), a response channel and its waiter, and the
// worker's wake per answer (the goroutine that completes a phase fills its
// reply, and the last one wakes the worker once); per message, the
// context and timer of RequestTimeout (one timer per worker, reset), the
// callback (made once) and the lists of the message's requests and
// replies. When RequestTimeout passes or the stream ends first, the phases
// still held are withdrawn (Abandon) and answered as DoBatch's await
// answers them (DEADLINE_EXCEEDED, CANCELED).
type phaseWorker struct {
	ph     *phaser
	timer  *time.Timer
	signal chan struct{}                        // capacity 1: the message's last answer
	answer func(int, automaton.Response, error) // answered, made once

	// The message running (set before SubmitReplyBatch, read by the
	// callbacks; the worker reads out and replies after signal).
	reqs    []automaton.Request
	idx     []int
	phases  []*synodpb.Phase
	out     []*synodpb.PhaseReply
	replies []synodpb.PhaseReply

	mu   sync.Mutex
	left int // phases not yet answered
}

func newPhaseWorker(ph *phaser) *phaseWorker {
	wk := &phaseWorker{ph: ph, signal: make(chan struct{}, 1)}
	wk.answer = wk.answered
	wk.timer = time.NewTimer(time.Hour)
	wk.timer.Stop()
	return wk
}

// take returns the out list for a message of n phases (all nil: a
// message refused whole leaves its replies in it).
func (wk *phaseWorker) take(n int) []*synodpb.PhaseReply {
	if cap(wk.out) < n {
		wk.out = make([]*synodpb.PhaseReply, n)
	}
	out := wk.out[:n]
	clear(out)
	return out
}

// done drops the finished message's references (its replies were sent).
func (wk *phaseWorker) done() {
	clear(wk.out)
	clear(wk.reqs[:cap(wk.reqs)])
	wk.phases, wk.replies = nil, nil
}

// run hands reqs (the phases at idx of phases) to the loop and waits
// until each is answered into out; false, having handed nothing over,
// when the Backend does not take them so (then DoBatch).
func (wk *phaseWorker) run(ns string, reqs []automaton.Request, idx []int, phases []*synodpb.Phase, out []*synodpb.PhaseReply) bool {
	ph := wk.ph
	wk.reqs, wk.idx, wk.phases, wk.out = reqs, idx, phases, out
	wk.replies = make([]synodpb.PhaseReply, len(reqs)) // one array for the message's replies
	wk.left = len(reqs)
	var taken bool
	if ph.owner != nil {
		taken = ph.owner.SubmitReplyBatchOwned(ph.ctx, ns, reqs, false, wk.answer)
	} else {
		taken = ph.replier.SubmitReplyBatch(ph.ctx, ns, reqs, false, wk.answer)
	}
	if !taken {
		return false
	}
	wk.timer.Reset(ph.s.opts.RequestTimeout)
	var err error
	select {
	case <-wk.signal:
		wk.timer.Stop()
		return true
	case <-wk.timer.C:
		err = context.DeadlineExceeded
	case <-ph.ctx.Done():
		wk.timer.Stop()
		err = ph.ctx.Err()
	}
	for k, req := range reqs {
		if ph.replier.Abandon(ns, req.ID) {
			wk.answered(k, automaton.Response{}, err)
		}
	}
	<-wk.signal
	return true
}

// ownedArgsReplier is a BatchReplyBackend that also takes requests whose
// arguments are its own from then on (node.Node): a store phase's value
// is the decoder's copy (synodpb's hand decoder, or proto.Unmarshal's)
// and its argument list the message's phaseSlabs, made for it and never
// read or changed after, so the node need not copy them again.
type ownedArgsReplier interface {
	SubmitReplyBatchOwned(ctx context.Context, ns string, reqs []automaton.Request, held bool, done func(int, automaton.Response, error)) bool
}

// answered is the Backend's callback: reqs[k]'s answer.
func (wk *phaseWorker) answered(k int, res automaton.Response, err error) {
	i := wk.idx[k]
	r := &wk.replies[k]
	wk.ph.reply(r, wk.phases[i].GetId(), wk.ph.ctx, wk.reqs[k], res, err)
	wk.mu.Lock()
	wk.out[i] = r
	wk.left--
	last := wk.left == 0
	wk.mu.Unlock()
	if last {
		wk.signal <- struct{}{}
	}
}

// Query and store phases' options (shared: the node gives the automaton
// its own copy of a request's options, node.admit).
var (
	queryExt   = map[string][]string{optPhase: {phaseQuery}}
	storeValue = []string{phaseStore}
)

// phaseSlabs are a message's per-phase slices in one array (a store
// phase's tag option and its set's argument), so that a phase takes a
// place instead of allocating them: one allocation per message.
type phaseSlabs []phaseSlot

type phaseSlot struct {
	tag [1]string
	arg [1][]byte
}

// phaseSlab is one phase's places in its message's phaseSlabs.
type phaseSlab struct {
	tag  []string // length 1, capacity 1
	args [][]byte // length 1, capacity 1
}

func newPhaseSlabs(n int) phaseSlabs { return make(phaseSlabs, n) }

func (s phaseSlabs) at(i int) phaseSlab {
	return phaseSlab{tag: s[i].tag[:], args: s[i].arg[:]}
}

// request checks phase p of namespace ns as Do checks the request it
// stands for (its tag with tagSpec, the protocol's), and makes that
// request, identified as id.
func (ph *phaser) request(ns config.Namespace, svc service.Service, tagSpec automaton.OptionSpec, id automaton.RequestID, p *synodpb.Phase, sl phaseSlab) (automaton.Request, error) {
	req := automaton.Request{ID: id, Checked: true}
	switch {
	case p.GetTag() == "":
		req.Op = service.Op{Kind: "get", Key: p.GetKey()}
		req.Opts.Ext = queryExt
	default:
		sl.tag[0] = p.GetTag()
		tag, err := parseTag(tagSpec, sl.tag)
		if err != nil {
			return req, refusal(synoderr.Invalid, "namespace %q: phase %d: %v", ns.Name, p.GetId(), err)
		}
		sl.args[0] = p.GetValue()
		req.Op = service.Op{Kind: "set", Key: p.GetKey(), Args: sl.args}
		if p.GetTomb() {
			req.Op = service.Op{Kind: "del", Key: p.GetKey()}
		}
		req.Opts.Ext = map[string][]string{optPhase: storeValue, optTag: tag}
	}
	if err := ph.s.permit(ph.ctx, ns.Name, req); err != nil {
		return req, err
	}
	if err := automaton.ValidateRequest(svc, req); err != nil {
		return req, refusal(synoderr.Invalid, "namespace %q (service %s): %v", ns.Name, ns.Service, err)
	}
	return req, nil
}

// parseTag is tagSpec.Parse(tag) for a tag of one value (a phase's):
// Parse's checks (its size, the protocol's Validate), without Parse's
// copy of the list, which is the message's slab place already (a store
// phase allocated it once per phase).
func parseTag(tagSpec automaton.OptionSpec, tag []string) ([]string, error) {
	if tagSpec.Type != automaton.OptString || len(tag) != 1 || len(tag[0]) > automaton.MaxOptionBytes {
		return tagSpec.Parse(tag)
	}
	if tagSpec.Validate != nil {
		if err := tagSpec.Validate(tag); err != nil {
			return nil, fmt.Errorf("option %s: %w", tagSpec.Name, err)
		}
	}
	return tag, nil
}

// reply sets out (a zero PhaseReply) to the Backend's answer to a phase
// (res, or err made within rctx).
func (ph *phaser) reply(out *synodpb.PhaseReply, id uint64, rctx context.Context, req automaton.Request, res automaton.Response, err error) {
	out.Id = id
	if err != nil {
		st := status.Convert(ph.s.doError(ph.ctx, rctx, req.ID, err))
		out.Code, out.Message = uint32(st.Code()), st.Message()
		return
	}
	r := res.Result
	switch {
	case r.Type == service.ResultErr:
		out.Err = synoderr.Text(r.Err)
	case r.Type == service.ResultArray && len(r.Elems) == 2 && r.Elems[0].Type == service.ResultBytes:
		// A query's [tag, value] (protocol/abd queryResult). The tag's
		// bytes are the answer's, which nothing changes once answered
		// (queryResult makes them for it): out, marshalled by send and
		// then dropped, reads them in place instead of a copy.
		out.Tag = bytesString(r.Elems[0].Bytes)
		if v := r.Elems[1]; v.Type == service.ResultBytes {
			out.Value, out.Present = v.Bytes, true
		}
	case r.Type == service.ResultOK:
	default:
		out.Err = "ERR internal error: a phase answered " + r.String()
	}
}

// bytesString is b as a string, without a copy: b must not change while
// the string is in use.
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// send writes a message's replies, in messages of at most about
// maxReplyBytes. After a failure it sends nothing.
func (ph *phaser) send(rs []*synodpb.PhaseReply) {
	ph.smu.Lock()
	defer ph.smu.Unlock()
	msg := &ph.msg
	size := 0
	flush := func() {
		if len(msg.Replies) > 0 && !ph.sendFailed {
			if err := ph.stream.Send(msg); err != nil {
				ph.sendFailed = true
				ph.fail(err)
			}
		}
		msg.Replies, size = nil, 0
	}
	for _, r := range rs {
		size += replySize(r)
	}
	if size <= maxReplyBytes {
		// One message (the usual case): rs as it is, no list made.
		msg.Replies = rs
		flush()
		return
	}
	size = 0
	for _, r := range rs {
		n := replySize(r)
		if size > 0 && size+n > maxReplyBytes {
			flush()
		}
		msg.Replies = append(msg.Replies, r)
		size += n
	}
	flush()
}

// replySize is about the bytes r takes in a PhaseResponse (send's bound).
func replySize(r *synodpb.PhaseReply) int {
	return 64 + len(r.GetMessage()) + len(r.GetErr()) + len(r.GetTag()) + len(r.GetValue())
}
