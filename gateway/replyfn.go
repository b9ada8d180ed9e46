package gateway

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Replies written by the goroutine that completes the request (issue 28
// item 5; branch reply46, session 46).
//
// Before, a lone command's connection goroutine handed the request to the
// namespace loop and parked on the answer; the goroutine that completed
// the request (a pool worker, a peer reader's pass, the committer) woke it,
// and it wrote the reply and went back to its read, where the client's next
// command woke it again: two wake-ups per operation where Redis's event
// loop has one. Where the Backend can answer through a callback
// (ReplyBackend: the node), such a command now goes this way: the
// connection goroutine submits it and goes straight back to its read; the
// goroutine that completes the request renders the reply and writes it
// (conn.replied: the connection's writer, its direct non-blocking write
// where it has a raw socket, the output buffer and the writer goroutine
// otherwise: TLS; it never blocks on the client, and the output buffer's
// limits apply as to any reply).
//
// Which commands: a command served alone (nothing buffered behind it,
// nothing pipelined in flight, no unflushed reply counted), planned to
// exactly one operation without guards (plan.concurrent), with no keyspace
// notification to send and not a script, on a connection of the default
// user with replies on (CLIENT REPLY ON), no MULTI or WATCH, no
// interactive transaction, no subscription, no request option set, not
// in cluster mode; every check exec makes before running a plan (login,
// MONITOR's feed, BUSY, OOM, MULTI's queue) is made as before, on the
// connection's goroutine. Anything else takes the path it took.
//
// Order: a connection has at most one such request in flight, and its
// goroutine waits for that reply to be written (awaitReply) before it
// serves the next command it reads, whatever that command is; so replies
// stay in command order, an error answers its own command, and a client
// that pipelines pays the old wake-up (the command read behind it waits),
// then is served by the pipelining paths as before.
//
// Ends: the request's deadline is the connection's deadline slot
// (deadline.go); its timer, or the server stopping, cancels the slot's
// context, whose after-hook (replyCancel) withdraws the request from the
// Backend (Abandon) and, if withdrawn, answers it as Do's error would be
// answered (TRYAGAIN, outcome unknown). A connection that ends with a
// reply pending waits for that reply first (as its goroutine waited in Do
// before), bounded by the same deadline. A write that fails is reported to
// the connection's goroutine, which ends the connection as before.
// Clients blocked on a key (BLPOP, ...) must be woken by a write before
// its reply (blockReg.touched), which may wait for them: when any client
// is blocked, that part runs on a goroutine of its own, not on the loop's.

// replyConn is a connection's request answered by replied.
type replyConn struct {
	may       bool // serve: the command exec runs may go this way (replyFirst)
	submitted bool // the command went this way: serve writes nothing for it
	// loop: exec runs on the event loop (evloop.go), which must not wait:
	// a command that would be run here and waited for is left in detour
	// for a goroutine instead (wmu held).
	loop   bool
	detour func()

	state  atomic.Int32 // replyIdle, replyPending, replyWaited
	wake   chan struct{}
	done   func(automaton.Response, error) // c.replied, bound once
	cancel func(*cmdCtx, uint64, error)    // c.replyCancel, bound once

	mu  sync.Mutex // ctx, gen, ns, req: replyCancel reads them off the connection's goroutine
	ctx *cmdCtx
	gen uint64 // ctx's generation (deadline.go: the slot's context is reused)
	ns  string
	req automaton.Request

	p       plan
	rs      [1]service.Result
	name    string
	start   time.Time
	errs    int
	release func()
	err     error // the reply's write failed
}

const (
	replyIdle       = iota // no request in flight this way
	replyPending           // in flight
	replyWaited            // in flight, and the connection goroutine waits for it
	replyLoopWaited        // in flight, and the event loop has the next command (evloop.go)
)

// replyFirst reports whether the command serve is about to exec may be
// answered by replied, as far as the connection's state tells (replyAsync
// checks the plan). wmu is held.
func (c *conn) replyFirst() bool {
	_, ok := c.s.b.(ReplyBackend)
	return ok && !c.s.noReplyFn && c.reply == replyOn && !c.sink.muted && c.r.Buffered() == 0 && !c.pl.inFlight() &&
		c.user == nil && c.sub.count() == 0 && !c.txn.open && !c.multi.open && len(c.multi.watch) == 0 &&
		len(c.opts.sticky) == 0 && len(c.opts.pending) == 0 && !c.cluster.aware && !c.quit
}

// replyAsync runs plan p (exec's, not yet checked) of command name, which
// started at start with errs error replies: when it qualifies (above) and
// the Backend takes it, it is handed over with c.replied for its answer,
// wmu released, and c.as.submitted set; else it runs as runPlan runs it.
func (c *conn) replyAsync(name string, p plan, start time.Time, errs int) {
	p = c.check(p)
	c.mu.Lock()
	ns, svc, read := c.ns, c.svc, c.read
	c.mu.Unlock()
	if !p.concurrent() || p.note != nil || p.ops[0].Kind == "eval" || svc == nil || len(ns.Shards) > 0 ||
		(c.as.loop && !c.loopMayWrite(p.ops[0])) { // evloop.go: the loop never waits
		c.runCheckedOff(name, p, start, errs)
		return
	}
	ctx, end, ok := c.dl.tryAcquire(c.s, c.s.ctx, c.s.opts.RequestTimeout, true) // reused: SubmitReply keeps no hold of ctx
	if !ok {
		c.runCheckedOff(name, p, start, errs)
		return
	}
	a := &c.as
	if a.wake == nil {
		a.wake = make(chan struct{}, 1)
		a.done, a.cancel = c.replied, c.replyCancel
	}
	id := automaton.RequestID{Client: c.client, Seq: c.nextSeq()}
	req := automaton.Request{ID: id, Op: p.ops[0], Opts: c.requestOptions(read, id), Checked: true} // validated in check
	if c.owed > 0 {                                                                                 // a serial command's reply, before this one's
		a.err = c.w.Flush()
		c.out.addReplies(c.owed)
		c.owed = 0
	}
	req.Unanswered = id.Seq // its client id's only request in flight (sessions.go)
	c.noteOwn(svc, req.Op, nil)
	cc := ctx.(*cmdCtx)
	a.mu.Lock()
	a.ctx, a.gen, a.ns, a.req = cc, cc.gen, ns.Name, req
	a.mu.Unlock()
	a.p, a.name, a.start, a.errs = p, name, start, errs
	c.orderWrite(req.Op, nil)                     // arrived ordered commands first (order.go)
	a.release = c.s.blk.writeGate(c, req.Op, nil) // no write to a waited key during a round (blocking.go)
	a.state.Store(replyPending)
	c.wmu.Unlock()                         // replied takes it; it may run on this goroutine, inside SubmitReply
	if !c.submitReply(ctx, ns.Name, req) { // evloop.go: held for the turn's pass on the event loop
		a.state.Store(replyIdle) // nothing was handed over: as submitGroup
		a.release()
		end()
		c.wmu.Lock()
		c.submitOff(ns.Name, req, name, p, start, errs)
		return
	}
	a.submitted = true
	cc.setAfter(a.cancel) // deadline.go: the timer, the server's stop
}

// submitOff runs request req of plan p (command name, started at start
// with errs error replies) through c.submit when SubmitReply did not take
// it: here, or left in detour on the event loop (c.submit waits). wmu is
// held. It is replyAsync's fallback in a function of its own because its
// closures capture p and req: in replyAsync they moved both to the heap
// on every call, two allocations per command on the path that never
// runs them (go build -gcflags=-m: "moved to heap: p", "moved to heap: req").
func (c *conn) submitOff(ns string, req automaton.Request, name string, p plan, start time.Time, errs int) {
	a := &c.as
	run := func() {
		a.rs[0] = c.submit(ns, req)
		c.writeResult(p.render(a.rs[:]))
		a.p, a.rs = plan{}, [1]service.Result{}
	}
	if a.loop { // evloop.go: c.submit waits
		a.detour = func() {
			run()
			c.s.cmds.called(name, time.Since(start), c.errReplies > errs)
		}
		return
	}
	run()
}

// runCheckedOff is runChecked(name, p), left for a goroutine when exec
// runs on the event loop (c.as.loop): the plan may wait for the Backend.
func (c *conn) runCheckedOff(name string, p plan, start time.Time, errs int) {
	if !c.as.loop {
		c.runChecked(name, p)
		return
	}
	c.as.detour = func() {
		c.runChecked(name, p)
		c.s.cmds.called(name, time.Since(start), c.errReplies > errs)
	}
}

// replied is the answer to the connection's request handed over by
// replyAsync (the Backend calls it once, on whatever goroutine completes
// the request): it writes the reply (see above).
func (c *conn) replied(res automaton.Response, err error) {
	if c.s.blk.blocked.Load() != 0 {
		go c.writeReplied(res, err) // touched may wait for the clients it wakes
		return
	}
	c.writeReplied(res, err)
}

func (c *conn) writeReplied(res automaton.Response, err error) {
	a := &c.as
	a.release()
	a.mu.Lock()
	req, ctx := a.req, a.ctx
	a.mu.Unlock()
	a.rs[0], _ = c.answered(req, res, err)
	c.dl.release(ctx) // the deadline slot, as submitGroup's end
	c.wmu.Lock()
	c.writeResult(a.p.render(a.rs[:]))
	werr := c.w.Flush()
	c.out.addReplies(1)
	errored := c.errReplies > a.errs
	c.wmu.Unlock()
	c.s.cmds.called(a.name, time.Since(a.start), errored)
	a.p, a.rs, a.release = plan{}, [1]service.Result{}, nil
	if werr != nil && a.err == nil {
		a.err = werr
	}
	switch a.state.Swap(replyIdle) {
	case replyWaited:
		a.wake <- struct{}{}
	case replyLoopWaited:
		c.s.ev.ready(c) // evloop.go: the loop serves the command it holds
	}
}

// replyCancel is the after-hook of the request's context (deadline.go):
// its deadline passed or the server stops. If the Backend still holds the
// request, it is withdrawn and answered with ctx's error as Do's would be;
// else its answer is on its way (replied).
func (c *conn) replyCancel(ctx *cmdCtx, gen uint64, err error) {
	a := &c.as
	a.mu.Lock()
	ns, id, cur := a.ns, a.req.ID, a.ctx == ctx && a.gen == gen
	a.mu.Unlock()
	if !cur || !c.s.b.(ReplyBackend).Abandon(ns, id) {
		return // an earlier request's context, or answered
	}
	c.replied(automaton.Response{}, fmt.Errorf("request %s: outcome unknown: %w", id, err))
}

// awaitReply waits until the reply of the request in flight through
// replied, if any, is written, and returns the write's error, if any.
// Connection goroutine only.
func (c *conn) awaitReply() error {
	a := &c.as
	for {
		st := a.state.Load()
		if st == replyIdle {
			break
		}
		if (st == replyPending || st == replyLoopWaited) && a.state.CompareAndSwap(st, replyWaited) {
			<-a.wake
			break
		}
	}
	err := a.err
	a.err = nil
	return err
}

var _ context.Context = (*cmdCtx)(nil)
