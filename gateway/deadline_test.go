package gateway

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// The connection's deadline slot (deadline.go): a command's context ends
// at its deadline, at its release and when the server closes; a late
// firing of the timer armed for an earlier command does not end a later
// one; a second request in flight gets a context of its own.
func TestDeadlineSlot(t *testing.T) {
	s := NewServer(gatewaytest.KV(), ServerOptions{})
	defer s.Close()
	nc, peer := net.Pipe()
	defer peer.Close()
	c := s.newConn(nc, 1)

	// The deadline.
	ctx, end := c.dl.acquire(s, s.ctx, 20*time.Millisecond)
	if _, ok := ctx.(*cmdCtx); !ok {
		t.Fatalf("a free slot gave %T, want *cmdCtx", ctx)
	}
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > 20*time.Millisecond {
		t.Errorf("deadline %v %v", dl, ok)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the deadline did not end the command")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("after the deadline: %v, want DeadlineExceeded", ctx.Err())
	}
	end()

	// The release; a second request while the slot is taken.
	ctx, end = c.dl.acquire(s, s.ctx, time.Hour)
	ctx2, end2 := c.dl.acquire(s, s.ctx, time.Hour)
	if _, ok := ctx2.(*cmdCtx); ok {
		t.Error("a taken slot was given again")
	}
	end2()
	if ctx.Err() != nil {
		t.Errorf("the other request's end ended this one: %v", ctx.Err())
	}
	// A late firing (the timer of an earlier command whose callback had
	// started): the current command's deadline is an hour away.
	c.dl.fire()
	if ctx.Err() != nil {
		t.Errorf("a late firing ended a command before its deadline: %v", ctx.Err())
	}
	end()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("after its end: %v, want Canceled", ctx.Err())
	}
	if c.dl.busy.Load() {
		t.Error("the slot stayed taken after the end")
	}

	// The server's close ends the command in flight.
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	ctx, end = c.dl.acquire(s, s.ctx, time.Hour)
	s.Close()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the server's close did not end the command in flight")
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("after the close: %v, want Canceled", ctx.Err())
	}
	// A command begun after the close is ended at once.
	end()
	ctx, end = c.dl.acquire(s, s.ctx, time.Hour)
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("begun after the close: %v, want Canceled", ctx.Err())
	}
	end()
}

// A pipeline batch in flight (batchAsync) takes a deadline slot of its
// own, one per batch up to maxBatchesInFlight, then falls back to
// context.WithTimeout; the server's close ends the batches in flight.
func TestBatchDeadlineSlots(t *testing.T) {
	s := NewServer(gatewaytest.KV(), ServerOptions{RequestTimeout: time.Hour})
	defer s.Close()
	nc, peer := net.Pipe()
	defer peer.Close()
	c := s.newConn(nc, 1)
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()

	var ctxs []context.Context
	var ends []func()
	for range maxBatchesInFlight {
		ctx, end := c.batchDeadline()
		if _, ok := ctx.(*cmdCtx); !ok {
			t.Fatalf("batch %d of %d in flight got %T, want a slot's *cmdCtx", len(ctxs)+1, maxBatchesInFlight, ctx)
		}
		ctxs, ends = append(ctxs, ctx), append(ends, end)
	}
	extra, endExtra := c.batchDeadline()
	if _, ok := extra.(*cmdCtx); ok {
		t.Error("a batch beyond the slots got a taken slot")
	}
	endExtra()
	if c.dl.busy.Load() {
		t.Error("a batch took the connection's command slot")
	}
	// A batch's end frees its slot for the next batch and ends no other.
	ends[0]()
	if ctxs[1].Err() != nil {
		t.Errorf("one batch's end ended another: %v", ctxs[1].Err())
	}
	ctx, end := c.batchDeadline()
	if _, ok := ctx.(*cmdCtx); !ok {
		t.Fatalf("a freed slot was not taken again: %T", ctx)
	}
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) < 59*time.Minute {
		t.Errorf("deadline %v %v, want RequestTimeout (an hour) away", dl, ok)
	}
	s.Close()
	for _, x := range []context.Context{ctx, ctxs[1]} {
		select {
		case <-x.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the server's close did not end a batch in flight")
		}
	}
	end()
	ends[1]()
}

// The slot's reused context (tryAcquire's reuse form, the ReplyBackend
// path): the next command gets it back not ended, with a new generation;
// its end runs no after-hook; a late firing or an earlier generation's
// deadline ends no later command; a closed Done is not handed on; and a
// command costs no allocation (was three: cmdCtx, channel, end closure).
func TestDeadlineSlotReused(t *testing.T) {
	s := NewServer(gatewaytest.KV(), ServerOptions{})
	defer s.Close()
	nc, peer := net.Pipe()
	defer peer.Close()
	c := s.newConn(nc, 1)

	ctx, end, ok := c.dl.tryAcquire(s, s.ctx, time.Hour, true)
	if !ok {
		t.Fatal("a free slot was refused")
	}
	cc := ctx.(*cmdCtx)
	g1 := cc.gen
	hooked := 0
	cc.setAfter(func(*cmdCtx, uint64, error) { hooked++ })
	d1 := ctx.Done()
	end()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("after its end: %v, want Canceled", ctx.Err())
	}
	if hooked != 0 {
		t.Error("a command's end ran its after-hook")
	}
	ctx2, end2, _ := c.dl.tryAcquire(s, s.ctx, time.Hour, true)
	if ctx2 != ctx || cc.gen == g1 {
		t.Fatalf("got %p gen %d, want the slot's context %p with a generation after %d", ctx2, cc.gen, ctx, g1)
	}
	if ctx2.Err() != nil || ctx2.Done() != d1 {
		t.Errorf("the next command starts ended (%v) or with another open channel", ctx2.Err())
	}
	c.dl.fire() // a late firing: the deadline is an hour away
	if ctx2.Err() != nil {
		t.Errorf("a late firing ended the next command: %v", ctx2.Err())
	}
	end2()

	if n := testing.AllocsPerRun(100, func() {
		ctx, end, _ := c.dl.tryAcquire(s, s.ctx, time.Hour, true)
		ctx.Done()
		end()
	}); n != 0 {
		t.Errorf("%v allocations per command on the reused context, want 0", n)
	}

	ctx3, end3, _ := c.dl.tryAcquire(s, s.ctx, time.Millisecond, true)
	gens := make(chan uint64, 2)
	g3 := cc.gen
	ctx3.(*cmdCtx).setAfter(func(_ *cmdCtx, gen uint64, _ error) { gens <- gen })
	select {
	case gen := <-gens:
		if gen != g3 {
			t.Errorf("the after-hook got generation %d, want %d", gen, g3)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the deadline did not end the command")
	}
	<-ctx3.Done()
	if !errors.Is(ctx3.Err(), context.DeadlineExceeded) {
		t.Errorf("after the deadline: %v, want DeadlineExceeded", ctx3.Err())
	}
	end3()
	ctx4, end4, _ := c.dl.tryAcquire(s, s.ctx, time.Hour, true)
	select {
	case <-ctx4.Done():
		t.Error("the next command got the closed channel of a command ended by its deadline")
	default:
	}
	if ctx4.Err() != nil {
		t.Errorf("the command after a deadline starts ended: %v", ctx4.Err())
	}
	end4()
}

// The slot's timer stays armed across commands (deadline.go, arm): a
// command that begins while a firing is due no later than its own deadline
// leaves the timer alone, so 200 commands of a connection set it once, not
// once each (a stopped timer set again is added back to the runtime's
// timer heap, which wakes an idle thread for the network poller on a busy
// process: a futex wake-up per command). A command is still ended at its
// own deadline: the firing due for an earlier command finds it current
// and re-arms for it, and a command with a shorter timeout than the
// pending firing's sets the timer earlier. Fails with the timer stopped
// and set per command ("timer set 200 times for 200 commands") and with a
// firing that does not re-arm (the second command never ends).
func TestDeadlineTimerStaysArmed(t *testing.T) {
	s, c := slotTestConn(t)
	d := &c.dl
	for i := range 200 {
		ctx, end, ok := d.tryAcquire(s, s.ctx, time.Hour, i%2 == 0)
		if !ok {
			t.Fatal("the slot was taken")
		}
		if ctx.Err() != nil {
			t.Fatalf("command %d ended at its start: %v", i, ctx.Err())
		}
		end()
	}
	if n := d.arms.Load(); n > 2 {
		t.Fatalf("timer set %d times for 200 commands, want 1", n)
	}

	// A shorter timeout than the pending firing's: the timer is set earlier.
	t0 := time.Now()
	ctx, end := d.acquire(s, s.ctx, 50*time.Millisecond)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a command with a shorter timeout than the pending firing's did not end at its deadline")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || time.Since(t0) < 50*time.Millisecond {
		t.Fatalf("ended after %v with %v, want DeadlineExceeded after 50ms", time.Since(t0), ctx.Err())
	}
	end()

	// A command that begins while the firing set for an earlier one is
	// due: that firing re-arms for it, and it ends at its own deadline.
	ctx, end = d.acquire(s, s.ctx, 100*time.Millisecond)
	end() // a firing stays due at about +100ms
	time.Sleep(40 * time.Millisecond)
	t1 := time.Now()
	arms := d.arms.Load()
	ctx, end = d.acquire(s, s.ctx, 100*time.Millisecond) // its deadline: t1+100ms
	if d.arms.Load() != arms {
		t.Errorf("a command whose deadline is after the pending firing's set the timer")
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the command that began while a firing was due never ended: the firing did not re-arm for it")
	}
	if el := time.Since(t1); !errors.Is(ctx.Err(), context.DeadlineExceeded) || el < 100*time.Millisecond {
		t.Fatalf("ended %v after its start with %v, want DeadlineExceeded after 100ms (not at the earlier command's firing)", el, ctx.Err())
	}
	end()
}

// slotTestConn is a server and one of its connections (over a pipe), both
// closed at the test's end.
func slotTestConn(t *testing.T) (*Server, *conn) {
	s := NewServer(gatewaytest.KV(), ServerOptions{})
	t.Cleanup(func() { s.Close() })
	nc, peer := net.Pipe()
	t.Cleanup(func() { peer.Close() })
	return s, s.newConn(nc, 1)
}
