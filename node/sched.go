package node

import (
	"container/heap"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synod-dev/synod/automaton"
)

// Stepping groups by a fixed pool (issue 33 item 1: "idle groups cost next
// to nothing ... groups stepped by a fixed pool, not a goroutine set
// each").
//
// A node steps all its namespace loops (groups) with a fixed set of
// worker goroutines (stepPool, about GOMAXPROCS) and fires all their
// protocol timers from one heap (timerHeap, one runtime timer armed at the
// earliest deadline). A loop that has nothing to do owns no goroutine and
// no runtime timer: its state is its inbox (a queue whose buffer grows
// as inputs come and is given back when an idle group's queue empties,
// inqueue.go), its armed timers (heap entries) and its committer, which
// runs only while records wait for a commit (committer).
//
// Scheduling. Whatever gives a loop work (a peer message or an effect's
// result in its inbox, a client request in reqIn, a fired timer) puts it
// there, then calls wake: a loop that is idle becomes queued and goes to
// the back of the pool's ready queue (one FIFO for the node); a loop that
// is queued or being stepped is left as it is. A worker takes the loop at
// the front and runs one pass (poolPass: at most Options.BatchLimit inputs,
// so one busy group cannot hold a worker while others wait: after its pass
// it goes to the back of the queue if more work waits). When the pass ends
// the loop is idle again, and is queued again at once if work came
// meanwhile (wake's check after the state change: no wake-up is lost). A
// loop is therefore in the queue at most once and stepped by at most one
// worker at a time; every pass also holds the loop's pass lock, which the
// direct passes (directPass: a client request that finds its loop idle is
// stepped on its own goroutine) take too, so a group's steps stay serial
// and in order.
//
// How Dragonboat does it, and why not the same: Dragonboat binds each
// shard to one step worker by a fixed partitioner (shard id modulo the
// worker count); a worker keeps a ready set per partition and a wake-up
// channel, and steps every ready shard of its partition per wake-up. That
// makes a shard's steps serial without a per-shard flag, but a busy shard
// delays every shard of its partition while other workers idle. Here the
// queue is shared and the per-loop state (nsLoop.sched) gives the same
// serial guarantee, so any free worker takes the next ready group.
// Dragonboat ticks every shard from one node-wide ticker (every RTT);
// here timers stay the protocols' own (automaton.SetTimer), kept in one
// heap per node, so an idle group costs no wake-up between its timers.
//
// A worker never waits for I/O inside a pass (Dragonboat's split: its
// step workers hand records to separate commit workers and never block on
// them). Records go to the group's committer (loop.go, flush); when its
// queue is full (commitQueueLen batches waiting for an fsync) the pass
// does not wait: the batch stays in the loop and the loop is parked
// (nsLoop.park: wake leaves it, hasWork is false, direct passes refuse)
// until the committer takes batches and makes it ready (roomMade); its
// next pass queues the parked batch first, then steps. So a group stuck
// behind a slow or blocked commit holds back its own inputs (the same
// backpressure as before: its inbox fills, then its clients and peer
// readers wait) and no worker (TestStuckCommitDelaysNoOtherGroup).
// Peer sends do not wait either: the TCP transport's inline write is one
// non-blocking write system call (what the socket does not take goes to
// the peer's writer goroutine), and otherwise a message is queued or
// dropped (transport.Transport.Send, the gRPC senders).

// Loop scheduling states (nsLoop.sched).
const (
	loopIdle   int32 = iota // no pass running, not in the ready queue
	loopQueued              // in the ready queue or being stepped
)

// stepPool is a node's fixed set of workers and its queue of loops ready
// for a pass.
type stepPool struct {
	mu      sync.Mutex
	cond    sync.Cond
	ready   []*nsLoop // FIFO: ready[head:]
	head    int
	stopped bool
	wg      sync.WaitGroup
	// queued is len(ready[head:]), read without mu: a pass's sends go
	// through the transport's writer while other loops wait (send).
	queued atomic.Int32
}

// poolWorkers is the number of workers a node's pool runs: GOMAXPROCS,
// at least 2 (a worker blocked on a write or a full commit queue leaves
// another for the other groups).
func poolWorkers() int {
	return max(runtime.GOMAXPROCS(0), 2)
}

func newStepPool() *stepPool {
	p := &stepPool{}
	p.cond.L = &p.mu
	return p
}

// start runs k workers.
func (p *stepPool) start(k int) {
	for range k {
		p.wg.Add(1)
		go p.worker()
	}
}

// stop ends the workers and waits for them. Every loop has ended (what
// is still queued is dropped).
func (p *stepPool) stop() {
	p.mu.Lock()
	p.stopped = true
	p.cond.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *stepPool) enqueue(l *nsLoop) {
	p.mu.Lock()
	if p.head > 0 && p.head == len(p.ready) {
		clear(p.ready)
		p.ready, p.head = p.ready[:0], 0
	}
	p.ready = append(p.ready, l)
	p.queued.Add(1)
	p.mu.Unlock()
	p.cond.Signal()
}

// next waits for a ready loop; nil when the pool stops.
func (p *stepPool) next() *nsLoop {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.head == len(p.ready) && !p.stopped {
		p.cond.Wait()
	}
	if p.stopped {
		return nil
	}
	l := p.ready[p.head]
	p.ready[p.head] = nil
	p.head++
	p.queued.Add(-1)
	return l
}

func (p *stepPool) worker() {
	defer p.wg.Done()
	for {
		l := p.next()
		if l == nil {
			return
		}
		live := l.poolPass()
		l.sched.Store(loopIdle)
		if live && l.hasWork() {
			l.wake()
		}
	}
}

// inlinePass runs, on the calling goroutine, the pass a pool worker would
// run for a client request just put into the inbox of a loop that does
// not run direct passes (Multi-Paxos and the other protocols that do not
// step client batches), when the loop is idle: neither queued nor being
// stepped (issue 28 item 5: a request that finds its loop idle is not
// passed through a chain of wake-ups). It takes the loop's state as a
// worker does (idle to queued), so a group's passes stay serial, runs the
// same pass (poolPass: the inbox in its order, the fired timers, flush,
// the turn's frames), and leaves the loop as a worker leaves it (idle,
// queued again if work came meanwhile). The request therefore costs no
// enqueue, no condition-variable signal and no worker wake-up (often an
// OS thread's futex too) on its way in. A loop that is queued or running
// a pass already is left to it: under load the request joins the next
// pass as before, so what a pass gathers does not shrink where inputs
// accumulate. It reports whether it ran the pass.
func (l *nsLoop) inlinePass() bool { return l.inlinePassCommit(false) }

// inlinePassCommit is inlinePass; with commit (a lone callback request
// with fsync and no committer running: callerCommits), the pass's records
// are committed on the calling goroutine too (passHereCommit), as a direct
// pass's are for ESDS and ABD. A Multi-Paxos leader's lone put: the
// connection's goroutine steps the request, writes the Early Accepts, then
// writes and syncs the leader's own acceptance itself, instead of starting
// a committer goroutine for it (a wake-up, often another thread's futex,
// between the Accepts' writes and the leader's fdatasync); the reply is
// written by whoever releases it last, the reader that steps the first
// Accepted or this goroutine after its sync (runAside's lone call).
func (l *nsLoop) inlinePassCommit(commit bool) bool {
	if l.direct || l.n.opts.noDirect || l.n.opts.unserialized || l.park.Load() == parkWaiting {
		return false
	}
	return l.passHereCommit(commit)
}

// passHere runs the pool's pass of l on the calling goroutine if l is idle
// (idle to queued, the pass, then idle and queued again if work came, as
// a worker does); it reports whether it ran it (inlinePass, readerPass).
func (l *nsLoop) passHere() bool { return l.passHereCommit(false) }

// passHereCommit is passHere; with commit, the pass's records are
// committed on the calling goroutine too (readerCommitPass): the pass
// queues its batch without starting a committer goroutine (flush,
// commitHere), and once the loop is left idle (so that other inputs are
// stepped by others meanwhile) the caller runs the committer itself
// (commitOnCaller) unless one runs already.
func (l *nsLoop) passHereCommit(commit bool) bool {
	if !l.sched.CompareAndSwap(loopIdle, loopQueued) {
		return false
	}
	l.inlines.Add(1)
	live, deferred := l.passWith(commit)
	l.sched.Store(loopIdle)
	if live && l.hasWork() {
		l.wake()
	}
	if deferred {
		l.commitOnCaller()
	}
	return true
}

// turnCommits reports whether the pass that Kick runs for the requests an
// event-loop turn of the gateway held (several clients' commands read in
// one turn) commits its records on the calling goroutine, the gateway's
// event loop (passHereCommit), as a turn with one client's command does
// (its direct pass's callerCommits), instead of handing them to a
// committer goroutine: Redis's rule with appendfsync always, one fsync
// per turn, written before the loop reads again, so that the commands that
// come meanwhile wait in their sockets and make the next turn's one
// batch. Only in loops with direct passes (ESDS, ABD), with fsync, when
// no committer runs; on by default since session 52, SYNOD_TURN_COMMIT=0
// in the node's environment turns it off (New). At 64 ESDS clients
// (reads=local, redis-benchmark -r 10000) it took a third of the nodes'
// hand-offs per SET away in 6 of 6 alternated rounds on the quiet
// machine (session 51, docs/costs/s51-quiet.md) and 6 of 6 again on the
// loaded one (0.13-0.15 against 0.18-0.22, docs/costs/s52-esds.md), with
// fewer sysmon wake-ups 6 of 6 and CPU per SET lower 5 of 6 and 4 of 6;
// one client's put p50 medians over 4 alternated rounds were not higher
// for esds, paxos and pb and within 2 % for abd (s52-esds.md). One
// client's put never takes this path (its turns have one command, served
// by SubmitReply).
func (l *nsLoop) turnCommits() bool {
	return !l.n.opts.noTurnCommit && l.direct && l.n.durable && !l.n.opts.noCallerCommit && !l.committing.Load()
}

// readerCommitPass is readerPass for a TCP reader that read one lone
// message for l (readerIdle), such as a one-client put's Accept at a
// follower: for a loop without direct passes (Multi-Paxos and the other
// protocols that do not step client batches), with fsync, the reader
// steps the message and then commits the pass's records itself
// (passHereCommit) when no committer runs, instead of handing the batch
// to a new committer goroutine. The follower's round was: the reader's
// step, flush starting `go committer()` (the runtime wakes an idle thread
// for it: a futex call on the reader's path), the reader's next read
// (EAGAIN) and park, then the committer's write and fdatasync; now the
// reader's write and fdatasync follow its step, and the Accepted leaves
// from the reader once it is durable. What leaves and when is package
// release's decision as before (setDurable after the commit). The reader
// reads nothing from that peer while it commits: so only a lone message,
// only when no committer runs (a busy loop's batches keep going to its
// committer while its readers read on), and one commit at most
// (committer, once: what is queued meanwhile goes to a committer
// goroutine).
func (l *nsLoop) readerCommitPass() bool {
	if l.direct || !l.n.durable || !l.n.opts.readerCommit || l.committing.Load() ||
		l.n.opts.readerCommitIdle && l.waiting() > 0 {
		return l.readerPass()
	}
	if l.n.opts.noDirect || l.n.opts.unserialized || l.park.Load() == parkWaiting {
		return false
	}
	return l.passHereCommit(true)
}

// commitOnCaller runs the committer on the calling goroutine for one
// commit unless a committer runs (which then takes the queued batch).
//
// The caller is counted in cwg before it takes the committer's role, and
// only while end has not begun its cwg.Wait (cwgMu, cwgEnded): taking the
// role first and adding after let end's Wait, which found the role taken,
// return while the caller's commit was still to run (a WaitGroup Add
// concurrent with its Wait; -race caught it in TestReaderCommit). Once
// end waits, the queued batch is end's committer's (it drains commitQ).
func (l *nsLoop) commitOnCaller() {
	l.cwgMu.Lock()
	counted := !l.cwgEnded
	if counted {
		l.cwg.Add(1)
	}
	l.cwgMu.Unlock()
	if counted {
		if l.committing.CompareAndSwap(false, true) {
			l.commitLoop(true) // its deferred cwg.Done ends this count
			return
		}
		l.cwg.Done()
	}
	l.n.handoff(1) // the running committer takes the batch
}

// wake queues l for a pass unless it is queued or being stepped already.
// Callers put the work in first: a worker that ends l's pass sets it
// idle and then looks for work (hasWork), so one of the two queues it.
func (l *nsLoop) wake() {
	if l.park.Load() == parkWaiting {
		return // the committer wakes it when it makes room (roomMade)
	}
	if l.n.opts.unserialized {
		l.sched.Store(loopQueued)
		l.n.pool.enqueue(l)
		return
	}
	if l.sched.CompareAndSwap(loopIdle, loopQueued) {
		l.n.pool.enqueue(l)
	}
}

// hasWork reports whether inputs wait for l's next pass.
func (l *nsLoop) hasWork() bool {
	switch l.park.Load() {
	case parkWaiting:
		return false // parked on a full commit queue (loop.go, unpark)
	case parkReady:
		return true
	}
	if l.inbox.len() > 0 || l.reqIn.len() > 0 || l.startEv != nil {
		return true
	}
	l.fmu.Lock()
	defer l.fmu.Unlock()
	return len(l.fired) > 0
}

// poolPass is one pass of l run by a pool worker: Start first (the loop's
// first pass), then the inbox and the queued client requests, at most
// BatchLimit inputs, then the timers that fired, stepped and flushed as the
// loop goroutine's passes were. It reports false when the loop has ended
// (its inputs are then never stepped).
func (l *nsLoop) poolPass() bool {
	live, _ := l.passWith(false)
	return live
}

// passWith is poolPass; with commitHere, the pass's flush queues its batch
// without starting a committer, and deferred reports that it did: the
// caller must then see to the commit (passHereCommit).
func (l *nsLoop) passWith(commitHere bool) (live, deferred bool) {
	if !l.n.opts.unserialized {
		l.pass.Lock()
		defer l.pass.Unlock()
	}
	l.commitHere, l.deferred = commitHere, false
	defer func() {
		deferred = l.deferred
		l.commitHere, l.deferred = false, false
	}()
	return l.pass1(), false
}

func (l *nsLoop) pass1() bool {
	if l.dead {
		return false
	}
	if st := l.startEv; st != nil {
		l.startEv = nil
		l.step(event{in: *st})
		l.noteLeader()
		l.live = l.flush()
		if !l.live {
			go l.end()
			return false
		}
	}
	if !l.live {
		return false
	}
	if !l.unpark() {
		return true // still parked: nothing is stepped (loop.go, flush)
	}
	if l.reqIn.len() > 0 {
		if f := l.n.opts.reqNoted; f != nil {
			f()
		}
	}
	l.beginTurn()
	l.drain(l.inbox)
	// The timers that fired, after the inbox: a firing is stepped after
	// the messages that came before it, as when both went through the
	// inbox (a heartbeat that came before the election timer fired
	// re-arms it, and the firing is then stale). Stepping them first
	// started elections whenever passes lagged.
	l.fmu.Lock()
	fired := l.fired
	l.fired = l.firedSpare[:0]
	l.fmu.Unlock()
	for i, ev := range fired {
		l.take(ev)
		fired[i] = event{}
	}
	l.firedSpare = fired[:0]
	if !l.endPass() {
		l.live = false
		go l.end()
	}
	return l.live
}

// endLoops ends every loop that started (shutdown, once stopping is
// closed; a group started at run time meanwhile ends itself, startGroup).
func (n *Node) endLoops() {
	for _, l := range n.loopList() {
		if l.begun.Load() {
			go l.end()
		}
	}
}

// timerHeap is a node's protocol timers, all loops', ordered by deadline,
// with one runtime timer armed at the earliest. Timers that fall due
// together (the grid of slack timers, coalesce.go) fire in one callback.
type timerHeap struct {
	mu sync.Mutex
	h  timerEntries
	t  *time.Timer
	at time.Time // when t fires; zero: not armed
}

// timerEntry is one armed timer of a loop: in the heap (idx >= 0) until it
// fires or is cancelled. Its fields are under timerHeap.mu; gen and id are
// also read by the loop under pass (it is their only writer).
type timerEntry struct {
	l    *nsLoop
	id   automaton.TimerID
	gen  uint64
	lazy bool
	when time.Time
	idx  int
}

type timerEntries []*timerEntry

func (h timerEntries) Len() int           { return len(h) }
func (h timerEntries) Less(i, j int) bool { return h[i].when.Before(h[j].when) }
func (h timerEntries) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *timerEntries) Push(x any) {
	e := x.(*timerEntry)
	e.idx = len(*h)
	*h = append(*h, e)
}
func (h *timerEntries) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.idx = -1
	return e
}

// arm (re)arms e to fire at when with generation gen.
func (th *timerHeap) arm(e *timerEntry, id automaton.TimerID, when time.Time, gen uint64, lazy bool) {
	th.mu.Lock()
	e.id, e.when, e.gen, e.lazy = id, when, gen, lazy
	if e.idx >= 0 {
		heap.Fix(&th.h, e.idx)
	} else {
		heap.Push(&th.h, e)
	}
	th.rearm()
	th.mu.Unlock()
}

// cancel takes e out of the heap; its firing, if already delivered, is
// dropped by the loop (its generation is stale).
func (th *timerHeap) cancel(e *timerEntry) {
	th.mu.Lock()
	if e.idx >= 0 {
		heap.Remove(&th.h, e.idx)
	}
	th.mu.Unlock()
}

// rearm sets the runtime timer to the earliest deadline. Under mu.
func (th *timerHeap) rearm() {
	if len(th.h) == 0 {
		return // a firing with nothing due is harmless
	}
	when := th.h[0].when
	if !th.at.IsZero() && !when.Before(th.at) {
		return // armed earlier already: it rearms when it fires
	}
	th.at = when
	d := time.Until(when)
	if th.t == nil {
		th.t = time.AfterFunc(d, th.fire)
		return
	}
	th.t.Reset(d)
}

// fire delivers every timer due to its loop and rearms.
func (th *timerHeap) fire() {
	now := time.Now()
	var woken []*nsLoop
	th.mu.Lock()
	th.at = time.Time{}
	for len(th.h) > 0 && !th.h[0].when.After(now) {
		e := heap.Pop(&th.h).(*timerEntry)
		l := e.l
		l.fmu.Lock()
		l.fired = append(l.fired, event{in: automaton.TimerFired{ID: e.id}, gen: e.gen, lazy: e.lazy})
		first := len(l.fired) == 1
		l.fmu.Unlock()
		if first {
			woken = append(woken, l)
		}
	}
	th.rearm()
	th.mu.Unlock()
	for _, l := range woken {
		l.n.handoff(1)
		l.wake()
	}
}

// stop stops the runtime timer (the node's loops have ended).
func (th *timerHeap) stop() {
	th.mu.Lock()
	if th.t != nil {
		th.t.Stop()
	}
	th.at = time.Time{}
	th.mu.Unlock()
}
