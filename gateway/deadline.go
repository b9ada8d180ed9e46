package gateway

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A command's deadline without a runtime timer of its own.
//
// Every request the gateway hands to the Backend is bounded by
// ServerOptions.RequestTimeout. context.WithTimeout per command costs a
// timer created, armed and stopped, a registration in the server
// context's children (one mutex shared by every connection) and about five
// allocations: on the unpipelined path of many closed-loop clients that
// is paid once per command (issue 28). A connection instead keeps one
// timer (deadlines.timer) for the one request it usually has in flight:
// submitGroup takes the connection's slot when it is free and gets a
// cmdCtx, a small context whose Done closes at the deadline (the timer),
// when the server stops (Server.Close cancels s.ctx, whose AfterFunc
// cancels every connection's current cmdCtx) or when the command ends
// (release: as WithTimeout's cancel, so a goroutine that kept the
// context sees it done). A second request of the connection in flight at
// the same time (pipelined lanes, a multi-key command's concurrent
// operations) finds the slot taken and uses context.WithTimeout as before.
// Pipeline batches in flight (batchAsync, at most maxBatchesInFlight) have
// slots of their own (conn.bdl), one per batch.
//
// A timer armed for an earlier command may fire while a later one holds
// the slot (Reset cannot always stop a callback already started); the
// callback cancels the current command only when its deadline has passed,
// so a late firing is harmless and the later command's own firing still
// comes (Reset rescheduled it).
//
// Allocations (branch evloop49, session 49): acquire's end is bound once
// per slot (deadlines.end), not a closure per command, and a cmdCtx's Done
// channel is made when Done is first called. A request handed to a
// ReplyBackend (replyfn.go, the lone command's path) uses the slot's own
// cmdCtx (deadlines.own), reused from one command to the next: SubmitReply
// uses ctx only while it runs (ReplyBackend's contract), so after the
// command's end nobody but the gateway holds it, and the gateway tells one
// command's context from the next by its generation (cmdCtx.gen: the
// timer's firing and the after-hook check it under the context's lock).
// Such a context's end marks it ended without closing a Done channel that
// nobody waits on, so the channel too is kept until a deadline or the
// server's stop closes it. That path allocates nothing per command (was
// three: the cmdCtx, its channel, the end closure; pxget48 counted them).
// Do's and a batch's contexts are fresh per request (a Backend may keep a
// context it was given to Do after Do returns).
type deadlines struct {
	busy  atomic.Bool
	cur   atomic.Pointer[cmdCtx]
	timer *time.Timer // created on first use
	end   func()      // ends the current command (d.endCur), bound once
	own   cmdCtx      // the reused context of tryAcquire's reuse form
	// The timer stays armed across commands (session 56): tm guards
	// armed (a firing is pending) and armedAt (when, at the latest).
	// A command whose deadline is no earlier than armedAt leaves the
	// timer alone; the firing then finds it current and re-arms for its
	// deadline (fire). arms counts the timer's settings (tests).
	tm      sync.Mutex
	armed   bool
	armedAt time.Time
	arms    atomic.Uint64
}

// The timer used to be stopped at each command's end and set again at the
// next command's start. A stopped timer leaves the runtime's timer heap,
// and setting it again adds it back, which, when no thread waits in the
// network poller (a busy node), wakes an idle thread for the poller
// (runtime wakeNetPoller, wakep): a futex wake-up and a thread that spins
// and parks again, once per command on the command's own path. Counted at
// a Multi-Paxos leader serving one client's puts, 11 % of its futex calls
// (docs/costs/s56-plat56.md). Now one setting serves every command that
// begins before it fires: with a constant timeout about one firing, and
// one re-arm, per timeout period instead of a stop and a set per command.

// arm makes sure a firing is due no later than deadline (d.timer exists).
func (d *deadlines) arm(deadline time.Time) {
	d.tm.Lock()
	if !d.armed || d.armedAt.After(deadline) {
		d.armed, d.armedAt = true, deadline
		d.arms.Add(1)
		d.timer.Reset(max(time.Until(deadline), 0))
	}
	d.tm.Unlock()
}

// acquire returns a context for one request bounded by timeout with
// parent's values and cancellation, and the function that ends it. It
// uses the connection's slot when free, else context.WithTimeout. parent
// is s.ctx or carries only values over it (clusterCtx): its cancellation
// is the server's.
func (d *deadlines) acquire(s *Server, parent context.Context, timeout time.Duration) (context.Context, func()) {
	if ctx, end, ok := d.tryAcquire(s, parent, timeout, false); ok {
		return ctx, end
	}
	return context.WithTimeout(parent, timeout)
}

// tryAcquire is acquire without its fallback: ok false when the slot is
// taken. reuse: the context is the slot's own (d.own, see above), for a
// request whose Backend keeps no hold of it after the command's end.
func (d *deadlines) tryAcquire(s *Server, parent context.Context, timeout time.Duration, reuse bool) (context.Context, func(), bool) {
	if !d.busy.CompareAndSwap(false, true) {
		return nil, nil, false
	}
	deadline := time.Now().Add(timeout)
	var c *cmdCtx
	if reuse {
		c = &d.own
		c.mu.Lock()
		c.gen++
		c.parent, c.deadline, c.err, c.after, c.reused = parent, deadline, nil, nil, true
		if c.closed { // a closed channel ends its own command only
			c.done, c.closed = nil, false
		}
		c.mu.Unlock()
	} else {
		c = &cmdCtx{parent: parent, deadline: deadline}
	}
	d.cur.Store(c)
	if d.timer == nil {
		d.tm.Lock()
		d.armed, d.armedAt = true, deadline
		d.arms.Add(1)
		d.timer = time.AfterFunc(timeout, d.fire)
		d.end = d.endCur
		d.tm.Unlock()
	} else {
		d.arm(deadline) // after publishing c: a firing that missed c leaves armed false
	}
	// After publishing c: a Close that cancelled s.ctx before this load
	// sees c in its sweep or c sees its error here (both atomics).
	if err := s.ctx.Err(); err != nil {
		c.cancel(err)
	}
	return c, d.end, true
}

// endCur is the slot's end function (d.end): it ends the current command.
func (d *deadlines) endCur() {
	if c := d.cur.Load(); c != nil {
		d.release(c)
	}
}

// batchDeadline is acquire for a pipeline batch in flight (batchAsync): a
// connection has up to maxBatchesInFlight of them at once, each taking a
// slot of its own (c.bdl) while one is free, then context.WithTimeout.
func (c *conn) batchDeadline() (context.Context, func()) {
	for i := range c.bdl {
		if ctx, end, ok := c.bdl[i].tryAcquire(c.s, c.s.ctx, c.s.opts.RequestTimeout, false); ok {
			return ctx, end
		}
	}
	return context.WithTimeout(c.s.ctx, c.s.opts.RequestTimeout)
}

// release ends c (context.Canceled, as a cancel func would) and frees
// the slot.
func (d *deadlines) release(c *cmdCtx) {
	d.cur.Store(nil) // the timer stays armed for the next command (arm)
	if c.reused {
		c.end()
	} else {
		c.cancel(context.Canceled)
	}
	d.busy.Store(false)
}

// fire is the timer's callback: it cancels the current command if its
// deadline has passed (a late firing for an earlier command does not; the
// check and the cancel are one step under the context's lock, so a
// reused context's next command is never ended by this one's deadline).
func (d *deadlines) fire() {
	d.tm.Lock()
	d.armed = false // before loading cur: a command published after this load arms the timer itself
	d.tm.Unlock()
	if c := d.cur.Load(); c != nil {
		if at, pending := c.expire(); pending {
			d.arm(at) // the command began after the firing was set: its own deadline
		}
	}
}

// close stops the timer of a connection that ended, so that it does not
// hold the connection until its last firing.
func (d *deadlines) close() {
	d.tm.Lock()
	if d.timer != nil {
		d.timer.Stop()
	}
	d.armed = false
	d.tm.Unlock()
}

// stop cancels the current command (the server is stopping).
func (d *deadlines) stop() {
	if c := d.cur.Load(); c != nil {
		c.cancel(context.Canceled)
	}
}

// cmdCtx is one command's context from the connection's slot: parent's
// values, a deadline, and a Done closed by the first of the timer, the
// server's stop and the command's end (a reused context's end: see
// deadlines).
type cmdCtx struct {
	parent   context.Context
	deadline time.Time
	mu       sync.Mutex
	gen      uint64        // the command's number on a reused context
	done     chan struct{} // made by Done; closedChan once closed before
	closed   bool          // done is closed
	reused   bool          // the slot's own context (deadlines.own)
	err      error
	after    func(*cmdCtx, uint64, error) // run once Done closes (setAfter), with gen
}

// closedChan is the Done of a context ended before anyone asked for it.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

func (c *cmdCtx) cancel(err error) {
	c.mu.Lock()
	c.cancelLocked(err)
}

// cancelLocked is cancel with c.mu held; it unlocks it.
func (c *cmdCtx) cancelLocked(err error) {
	var after func(*cmdCtx, uint64, error)
	gen := c.gen
	if c.err == nil {
		c.err = err
		if c.done == nil {
			c.done = closedChan
		} else {
			close(c.done)
		}
		c.closed = true
		after, c.after = c.after, nil
	}
	c.mu.Unlock()
	if after != nil {
		after(c, gen, err)
	}
}

// expire cancels c if its deadline has passed (deadlines.fire).
func (c *cmdCtx) expire() (deadline time.Time, pending bool) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return time.Time{}, false
	}
	if time.Now().Before(c.deadline) {
		deadline = c.deadline
		c.mu.Unlock()
		return deadline, true // not yet: the slot's timer is armed for it again
	}
	c.cancelLocked(context.DeadlineExceeded)
	return time.Time{}, false
}

// end is a reused context's end: Canceled from now on, and no after-hook;
// a Done channel nobody was woken by stays open for the next command.
func (c *cmdCtx) end() {
	c.mu.Lock()
	if c.err == nil {
		c.err = context.Canceled
		c.after = nil
	}
	c.mu.Unlock()
}

// setAfter has f run with the context's generation and error once Done
// closes: here and now if it has (a reply written off the connection's
// goroutine, whose request nobody waits for on Done: replyfn.go).
func (c *cmdCtx) setAfter(f func(*cmdCtx, uint64, error)) {
	c.mu.Lock()
	err, gen := c.err, c.gen
	if err == nil {
		c.after = f
	}
	c.mu.Unlock()
	if err != nil {
		f(c, gen, err)
	}
}

func (c *cmdCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *cmdCtx) Value(key any) any           { return c.parent.Value(key) }

// Done is made on first use; a reused context's open channel is kept
// for its next command (see deadlines).
func (c *cmdCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.err != nil {
			c.done, c.closed = closedChan, true
		} else {
			c.done = make(chan struct{})
		}
	}
	return c.done
}

func (c *cmdCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// stopCommands cancels every connection's current command: Close
// cancelled the server's context (an AfterFunc of s.ctx).
func (s *Server) stopCommands() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.dl.stop()
		for i := range c.bdl {
			c.bdl[i].stop()
		}
	}
}
