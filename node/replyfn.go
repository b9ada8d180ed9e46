package node

import (
	"context"
	"fmt"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway"
)

// Replies written by the goroutine that responds (issue 28 item 5).
//
// A request submitted with SubmitReply has a callback for a waiter
// instead of a channel: respond runs it on the goroutine that completes
// the request (a pool worker, a peer reader's pass, a client's direct
// pass, the committer), which renders and writes the reply there
// (gateway/replyfn.go). The connection's goroutine does not wait for the
// answer and is not woken to write it: one wake-up per operation less.
// The callback runs at most once: respond and Abandon remove the waiter
// under the loop's waiter lock, so exactly one of them gets it; a storage
// failure answers the callbacks still waiting as await answers its
// channel waiters (failCallbacks).

var _ gateway.ReplyBackend = (*Node)(nil)

// SubmitReply implements gateway.ReplyBackend. It returns false, having
// handed nothing over, where Submit would not hand the request over by
// itself (a shard group's or a sharded namespace's request) or the node
// takes no request now; the caller then uses Submit or Do. Otherwise done
// is called exactly once, unless Abandon withdraws the request first: on
// this goroutine when the request is refused or not handed over, else on
// the goroutine that responds.
func (n *Node) SubmitReply(ctx context.Context, ns string, req automaton.Request, done func(automaton.Response, error)) bool {
	l := n.loop(ns)
	if l == nil || n.opts.noReplyFn || n.shardOfLoop(ns) != nil || n.open() != nil {
		return false
	}
	req, refused, ok := n.admitOwned(l, req, true)
	if !ok {
		done(refused, nil)
		return true
	}
	if _, _, err := n.handOverTo(ctx, l, req, done); err != nil && l.removeCallback(req.ID) {
		done(automaton.Response{}, err)
	}
	return true
}

// stopped is failCallbacks' error when the node stops (await's).
func stopped(id automaton.RequestID) error {
	return fmt.Errorf("request %s: outcome unknown: %w", id, gateway.ErrShuttingDown)
}

// Abandon implements gateway.ReplyBackend: it withdraws the callback of
// request id of namespace ns (its deadline passed, its server stops) and
// reports whether it did; false: the callback has run or is running.
func (n *Node) Abandon(ns string, id automaton.RequestID) bool {
	l := n.loop(ns)
	return l != nil && l.removeCallback(id)
}

// addCallback registers fn as the waiter of request id (at most one
// callback per id: the gateway's ids are its connections' own).
func (l *nsLoop) addCallback(id automaton.RequestID, fn func(automaton.Response, error), t0 time.Time) {
	l.wmu.Lock()
	ws := l.waiters[id]
	ws.fn, ws.bfn, ws.t0 = fn, nil, t0
	l.waiters[id] = ws
	l.wmu.Unlock()
}

// removeCallback removes request id's callback; false when it had none.
func (l *nsLoop) removeCallback(id automaton.RequestID) bool {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	ws, ok := l.waiters[id]
	if !ok || ws.fn == nil {
		return false
	}
	ws.fn, ws.bfn = nil, nil
	if ws.first == nil {
		delete(l.waiters, id)
	} else {
		l.waiters[id] = ws
	}
	return true
}

// unwait removes channel waiter ch of request id, if any.
func (l *nsLoop) unwait(id automaton.RequestID, ch chan automaton.Response) {
	if ch != nil {
		l.removeWaiter(id, ch)
	}
}

// called runs ws's callback with response r (respond took ws out of the
// waiters), as await returns a response.
func (l *nsLoop) called(ws waiterSet, r automaton.Response) {
	l.mLatency.Observe(time.Since(ws.t0).Seconds())
	if tr := l.n.opts.trace; tr != nil {
		tr(stageDoDone, "", 0)
	}
	ws.answer(r, nil)
}

// answer runs ws's callback (fn, or a batch's bfn) with r, err.
func (ws waiterSet) answer(r automaton.Response, err error) {
	if ws.bfn != nil {
		ws.bfn(ws.bi, r, err)
		return
	}
	ws.fn(r, err)
}

// batchCallback marks a waiterSet whose callback is bfn (fn not nil
// keeps every "has a callback" test as it was); it is never called.
func batchCallback(automaton.Response, error) { panic("node: batchCallback called") }

// failCallbacks answers every callback still waiting with errOf(its
// request), as await answers its channel waiters when storage fails
// (outcome unknown; a response released before the failure was taken by
// respond already) or the node stops.
func (n *Node) failCallbacks(errOf func(automaton.RequestID) error) {
	for _, l := range n.loopList() {
		l.wmu.Lock()
		var fns []waiterSet
		var ids []automaton.RequestID
		for id, ws := range l.waiters {
			if ws.fn != nil {
				fns, ids = append(fns, ws), append(ids, id)
				ws.fn, ws.bfn = nil, nil
				if ws.first == nil {
					delete(l.waiters, id)
				} else {
					l.waiters[id] = ws
				}
			}
		}
		l.wmu.Unlock()
		for i, ws := range fns {
			ws.answer(automaton.Response{}, errOf(ids[i]))
		}
	}
}

// asideCall is a callback waiter answered by the committer's release, run
// after it (setDurable).
type asideCall struct {
	ws waiterSet
	r  automaton.Response
}

// call runs callback waiter ws with response r here, or, in the
// committer's release (l.aside, under rmu), sets it aside: the committer
// does not write its clients' replies one by one between two commits
// (measured: ESDS with fsync, 64 clients, slower and more context switches
// per put when it did); they are written together on one goroutine after
// the release, one hand-off per commit instead of one per request.
func (l *nsLoop) call(ws waiterSet, r automaton.Response) {
	if l.aside {
		l.asideCalls = append(l.asideCalls, asideCall{ws, r})
		return
	}
	l.called(ws, r)
}

// takeAside returns the calls set aside and empties the list (under rmu).
func (l *nsLoop) takeAside() []asideCall {
	calls := l.asideCalls
	l.asideCalls = nil
	return calls
}

// runAside runs calls, if any, on a goroutine of their own; with lone (a
// caller's one commit: commitLoop's once) a single call runs here
// (callerCommits: the connection's own reply).
func (l *nsLoop) runAside(calls []asideCall, lone bool) {
	if len(calls) == 0 {
		return
	}
	if lone && len(calls) == 1 {
		l.called(calls[0].ws, calls[0].r)
		return
	}
	l.n.handoff(1)
	go func() {
		for _, c := range calls {
			l.called(c.ws, c.r)
		}
	}()
}

// keepAside reports whether the committer's release keeps calls, its
// only call, to run on the committer itself once it has left
// (commitLoop's reply) instead of on a goroutine of its own: one client's
// reply released by its commit, such as a Multi-Paxos leader's answer
// when its own fdatasync ends after the first Accepted came (about a
// third of one client's puts; docs/COSTS.md, lat46 and lat48) or an ESDS
// put whose batch went to a running committer. Written there, the reply
// leaves without a goroutine start and its wake-up (often a futex wake of
// another thread, then that thread's run). After the committer has left,
// not inside the release: the client's next request, which may come as
// soon as the reply is written, then finds no committer running (an ESDS
// connection commits it itself: callerCommits); written inside, it went
// to the committer still running (measured: ESDS one client, more
// hand-offs per put and 3 of 6 rounds slower). A reply write never
// blocks on the client (gateway/replyfn.go: a non-blocking write, else
// the connection's output buffer). A committer that has more to commit
// first hands it to a goroutine as before (commitLoop). Only for loops
// without direct passes (Multi-Paxos and the others that do not step
// client requests on the connection's goroutine): with ESDS, whose lone
// puts are committed by their callers, one client's put p50 was higher in
// 5 of 6 alternated rounds with it (lat48: 0.348 -> 0.448 ms medians at
// load 32-44; inside the release, 3 of 6 and +9 %); not understood, so
// ESDS and ABD keep the goroutine.
func (l *nsLoop) keepAside(calls []asideCall, lone bool) bool {
	return len(calls) == 1 && !lone && !l.direct && !l.n.opts.noCommitterReply
}

// callerCommits reports whether the direct pass of a request answered
// through callback fn (SubmitReply) commits its records on the calling
// goroutine (directPass's commit, then commitOnCaller) instead of handing
// them to a committer goroutine: with fsync, when no committer runs (a
// lone client's put; under load the batches keep going to the running
// committer). The connection's goroutine then steps the request, writes
// and syncs its records and writes the reply (runAside: a single call of
// a caller's commit runs here) before it goes back to its read: no
// goroutine wake-up on a lone client's put. Before, flush started a
// committer goroutine (a wake-up) and, since f273c75, the connection's
// goroutine went back to its read (an EAGAIN read, a park) before that
// committer could run on its P; the reply then came from the committer's
// release, by a goroutine of its own (docs/COSTS.md, lat47, session 47:
// ESDS's one-client put p50 rose 8 % with f273c75). A RESP connection has
// nothing else to serve meanwhile: its command is alone
// (gateway/replyfn.go), and the next one it reads waits for this reply
// anyway (awaitReply). The gRPC direct transport's reader
// (grpcserver/doreply.go) reads its connection's other streams only after
// the commit (before, it read them and queued their batches behind it):
// not measured (lat47 notes).
func (l *nsLoop) callerCommits(fn func(automaton.Response, error)) bool {
	return fn != nil && l.n.durable && !l.n.opts.noCallerCommit && !l.committing.Load()
}

// Held requests (gateway.TurnBackend; branch evloop49, session 49): the
// gateway's event loop reads many clients' commands in one turn and
// submitted each with SubmitReply, whose direct or inline pass on the
// loop's goroutine stepped that one request alone (the next clients'
// commands were not read yet): at 64 ESDS clients, 0.16 peer messages per
// SET against 0.10 with a goroutine per connection. SubmitReplyHeld puts
// the request in the namespace's queue without a pass and without waking
// a worker; the caller calls Kick once the turn's requests are all in,
// and one pass steps them together.

var _ gateway.TurnBackend = (*Node)(nil)

// SubmitReplyHeld is SubmitReply without the pass: the request waits in
// the queue for Kick (or any pass before it). A full queue, or a request
// SubmitReply would not take, goes as SubmitReply's would.
func (n *Node) SubmitReplyHeld(ctx context.Context, ns string, req automaton.Request, done func(automaton.Response, error)) bool {
	l := n.loop(ns)
	if l == nil || n.opts.noReplyFn || (len(n.groupOf) > 0 && n.groupOf[ns] != nil) || n.open() != nil {
		return false
	}
	req, refused, ok := n.admitOwned(l, req, true)
	if !ok {
		done(refused, nil)
		return true
	}
	if tr := n.opts.trace; tr != nil {
		tr(stageDo, "", 0)
	}
	l.addCallback(req.ID, done, time.Now())
	if l.requestQueue().tryPut(event{in: automaton.ClientRequest{Req: req}}) == nil {
		l.requests.Add(1)
		l.mRequests.Inc()
		return true
	}
	// Full: as SubmitReply (its hand-over waits for room, after a pass).
	if _, _, err := n.handOverTo(ctx, l, req, done); err != nil && l.removeCallback(req.ID) {
		done(automaton.Response{}, err)
	}
	return true
}

// Kick steps the requests SubmitReplyHeld left in namespace ns's queue:
// a pass on the calling goroutine if the loop is idle, else the loop is
// woken as for any request (the pass running or queued takes them).
func (n *Node) Kick(ns string) {
	l := n.loop(ns)
	if l == nil {
		return
	}
	if n.opts.noDirect || n.opts.unserialized || l.park.Load() == parkWaiting || !l.passHereCommit(l.turnCommits()) { // sched.go
		l.noteRequest()
		n.handoff(1)
	}
}

// Batches answered by callback (gateway.BatchReplyBackend; branch pipe52,
// session 52, issue 28 item 2): a pipelined read's independent requests
// (ABD, ESDS) go to the loop in one hand-off, one ClientBatch, as DoBatch
// hands them over, but each with a callback for a waiter (SubmitReply's)
// instead of a channel that the connection's goroutine waits on, so the
// event loop hands the batch over without waiting and the goroutines that
// complete its requests answer them.

var _ gateway.BatchReplyBackend = (*Node)(nil)

// SubmitReplyBatch implements gateway.BatchReplyBackend. It returns
// false, having handed nothing over, where DoBatch would not hand reqs
// over as one batch (a protocol that does not step client batches, a
// shard group, a sharded namespace) or the node takes no request now.
// Else done(i, ...) is called exactly once for each reqs[i], unless
// Abandon withdraws reqs[i] first; held: as SubmitReplyHeld, the batch
// waits in the queue for Kick (a full queue: handed over as without).
// reqs[i].Ops is the node's once called (Submit's contract).
func (n *Node) SubmitReplyBatch(ctx context.Context, ns string, reqs []automaton.Request, held bool, done func(int, automaton.Response, error)) bool {
	return n.submitReplyBatch(ctx, ns, reqs, held, false, done)
}

// SubmitReplyBatchOwned is SubmitReplyBatch for requests whose operation's
// arguments (req.Op.Args, the list and the bytes its entries point to) are
// the node's too once called: the caller neither reads nor changes them
// after, so the node keeps them instead of copying them (admit's copy: a
// list and a buffer per request). gRPC's Phases (gateway/grpcserver) hands
// over so the values it decoded into buffers of their own.
func (n *Node) SubmitReplyBatchOwned(ctx context.Context, ns string, reqs []automaton.Request, held bool, done func(int, automaton.Response, error)) bool {
	return n.submitReplyBatch(ctx, ns, reqs, held, true, done)
}

func (n *Node) submitReplyBatch(ctx context.Context, ns string, reqs []automaton.Request, held, ownArgs bool, done func(int, automaton.Response, error)) bool {
	l := n.loop(ns)
	if l == nil || !l.batches || n.opts.noReplyFn || n.shardOfLoop(ns) != nil || (len(n.groupOf) > 0 && n.groupOf[ns] != nil) || n.open() != nil {
		return false
	}
	batch := make([]automaton.Request, 0, len(reqs))
	var idx []int // batch[k] is reqs[idx[k]]; nil while that is reqs[k] (nothing refused)
	t0 := time.Now()
	for i, req := range reqs {
		req, refused, ok := n.admitArgs(l, req, true, ownArgs)
		if !ok {
			if idx == nil {
				idx = make([]int, len(batch), len(reqs))
				for k := range idx {
					idx[k] = k
				}
			}
			done(i, refused, nil)
			continue
		}
		l.wmu.Lock() // addCallback's, with the batch's callback and i: no closure per request
		ws := l.waiters[req.ID]
		ws.fn, ws.bfn, ws.bi, ws.t0 = batchCallback, done, i, t0
		l.waiters[req.ID] = ws
		l.wmu.Unlock()
		batch = append(batch, req)
		if idx != nil {
			idx = append(idx, i)
		}
	}
	if len(batch) == 0 {
		return true
	}
	if tr := n.opts.trace; tr != nil {
		for range batch {
			tr(stageDo, "", 0)
		}
	}
	ev := event{in: automaton.ClientBatch{Reqs: batch}}
	count := func() {
		l.requests.Add(uint64(len(batch)))
		l.mRequests.Add(float64(len(batch)))
	}
	if held && l.requestQueue().tryPut(ev) == nil {
		count()
		return true
	}
	err := n.handOverBatch(ctx, l, batch)
	if err != nil {
		for k, req := range batch {
			if idx != nil {
				k = idx[k]
			}
			if l.removeCallback(req.ID) {
				done(k, automaton.Response{}, fmt.Errorf("request %s not submitted: %w", req.ID, err))
			}
		}
		return true
	}
	count()
	return true
}
