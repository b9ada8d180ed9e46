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
type deadlines struct {
	busy  atomic.Bool
	cur   atomic.Pointer[cmdCtx]
	timer *time.Timer // created on first use; owned by the slot's holder
}

// acquire returns a context for one request bounded by timeout with
// parent's values and cancellation, and the function that ends it. It
// uses the connection's slot when free, else context.WithTimeout. parent
// is s.ctx or carries only values over it (clusterCtx): its cancellation
// is the server's.
func (d *deadlines) acquire(s *Server, parent context.Context, timeout time.Duration) (context.Context, func()) {
	if ctx, end, ok := d.tryAcquire(s, parent, timeout); ok {
		return ctx, end
	}
	return context.WithTimeout(parent, timeout)
}

// tryAcquire is acquire without its fallback: ok false when the slot is
// taken.
func (d *deadlines) tryAcquire(s *Server, parent context.Context, timeout time.Duration) (context.Context, func(), bool) {
	if !d.busy.CompareAndSwap(false, true) {
		return nil, nil, false
	}
	c := &cmdCtx{parent: parent, deadline: time.Now().Add(timeout), done: make(chan struct{})}
	d.cur.Store(c)
	if d.timer == nil {
		d.timer = time.AfterFunc(timeout, d.fire)
	} else {
		d.timer.Reset(timeout)
	}
	// After publishing c: a Close that cancelled s.ctx before this load
	// sees c in its sweep or c sees its error here (both atomics).
	if err := s.ctx.Err(); err != nil {
		c.cancel(err)
	}
	return c, func() { d.release(c) }, true
}

// batchDeadline is acquire for a pipeline batch in flight (batchAsync): a
// connection has up to maxBatchesInFlight of them at once, each taking a
// slot of its own (c.bdl) while one is free, then context.WithTimeout.
func (c *conn) batchDeadline() (context.Context, func()) {
	for i := range c.bdl {
		if ctx, end, ok := c.bdl[i].tryAcquire(c.s, c.s.ctx, c.s.opts.RequestTimeout); ok {
			return ctx, end
		}
	}
	return context.WithTimeout(c.s.ctx, c.s.opts.RequestTimeout)
}

// release ends c (context.Canceled, as a cancel func would) and frees
// the slot.
func (d *deadlines) release(c *cmdCtx) {
	d.timer.Stop()
	d.cur.Store(nil)
	c.cancel(context.Canceled)
	d.busy.Store(false)
}

// fire is the timer's callback: it cancels the current command if its
// deadline has passed (a late firing for an earlier command does not).
func (d *deadlines) fire() {
	if c := d.cur.Load(); c != nil && !time.Now().Before(c.deadline) {
		c.cancel(context.DeadlineExceeded)
	}
}

// stop cancels the current command (the server is stopping).
func (d *deadlines) stop() {
	if c := d.cur.Load(); c != nil {
		c.cancel(context.Canceled)
	}
}

// cmdCtx is one command's context from the connection's slot: parent's
// values, a deadline, and a Done closed by the first of the timer, the
// server's stop and the command's end.
type cmdCtx struct {
	parent   context.Context
	deadline time.Time
	done     chan struct{}
	mu       sync.Mutex
	err      error
	after    func(*cmdCtx, error) // run once Done closes (setAfter)
}

func (c *cmdCtx) cancel(err error) {
	c.mu.Lock()
	var after func(*cmdCtx, error)
	if c.err == nil {
		c.err = err
		close(c.done)
		after, c.after = c.after, nil
	}
	c.mu.Unlock()
	if after != nil {
		after(c, err)
	}
}

// setAfter has f run with the context's error once Done closes: here and
// now if it has (a reply written off the connection's goroutine, whose
// request nobody waits for on Done: replyfn.go).
func (c *cmdCtx) setAfter(f func(*cmdCtx, error)) {
	c.mu.Lock()
	err := c.err
	if err == nil {
		c.after = f
	}
	c.mu.Unlock()
	if err != nil {
		f(c, err)
	}
}

func (c *cmdCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *cmdCtx) Done() <-chan struct{}       { return c.done }
func (c *cmdCtx) Value(key any) any           { return c.parent.Value(key) }

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
