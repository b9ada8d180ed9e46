package node

import (
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/release"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/storage"
	"github.com/synod-dev/synod/transport"
)

// event is one input for a namespace's event loop.
type event struct {
	in  automaton.Input
	gen uint64 // TimerFired only: the generation of the timer that fired
	// lazy: a slack timer's firing, or a peer message that came in a
	// coalesced batch; the messages its step sends are coalesced too
	// (coalesce.go).
	lazy bool
}

// maxFreeTimers bounds the cancelled timer entries kept for reuse (an
// entry cancelled or fired is out of the timer heap and can serve the
// next arming: ABD arms one timer per operation and cancels it when the
// operation ends).
const maxFreeTimers = 1024

// batch is the Persist records one pass of the event loop produced, and the
// sequence number of the last of them.
type batch struct {
	persists []automaton.Persist
	last     uint64
}

func (b *batch) reset() {
	clear(b.persists)
	b.persists = b.persists[:0]
	b.last = 0
}

// commitQueueLen bounds the batches handed to the committer and not yet
// taken into a commit; when it is full the loop is parked with its next
// batch (flush, unpark) until the committer takes some. It also bounds the
// outputs the interpreter holds (nsLoop.rel), since each waits for one of
// those batches or for the one being committed.
const commitQueueLen = 256

// nsLoop runs one namespace's automaton. Fields under "loop only" are touched
// only by the goroutine running a pass (under pass): a pool worker (sched.go), or
// one running a direct pass (directPass).
type nsLoop struct {
	n     *Node
	ns    config.Namespace
	svc   service.Service
	a     automaton.Automaton
	store storage.Store // used by the committer goroutine only, after Load
	// keysNext: noteKeys looks at the node's key-count clock only from
	// then on (under pass: a pass ends with it).
	keysNext time.Time
	// out carries the namespace's peer messages: the TCP transport or a
	// gRPC sender (config.Namespace.Transport). Set before the loop starts.
	out   transport.Sender
	log   *slog.Logger
	inbox *inQueue // inqueue.go: grows on demand, bounded at InboxLen
	// reqIn carries client requests and batches (Node.Do, DoBatch): they
	// have no order among them, so a direct pass may drain it too
	// (directPass); inbox carries the inputs whose order is kept (peer
	// messages, effects' results), drained by pool passes only.
	reqIn *inQueue
	// reqIn is read only under pass, so that the requests are stepped
	// in the order they were put in.

	// sched is the loop's state in the node's step pool (sched.go):
	// loopIdle or loopQueued. fired (under fmu) holds the timers that
	// fired since the last pass (timerHeap.fire); firedSpare is the
	// previous pass's list, reused.
	sched      atomic.Int32
	fmu        sync.Mutex
	fired      []event
	firedSpare []event

	// pass is held by whoever runs a pass of the loop: the loop
	// goroutine, or a goroutine running a direct pass (directPass). The
	// fields under "loop only" are touched under it. live (under pass):
	// Start was stepped and the loop has not ended; ended is closed when
	// a storage failure). startEv: the Start the first pass steps.
	// dead: the loop has ended (end); no pass runs any more. direct:
	// this loop runs direct passes.
	pass    sync.Mutex
	live    bool
	startEv *automaton.Start
	begun   atomic.Bool // start was called
	retired atomic.Bool // stopped at run time: this node was removed from the group (groups.go)
	outside atomic.Bool // the replica's executed configuration leaves this node out (placemembers.go noteOwnMembership)
	dead    bool
	endOnce sync.Once
	direct  bool
	directs atomic.Uint64 // direct passes run
	inlines atomic.Uint64 // inline passes run (sched.go, inlinePass)
	yields  atomic.Uint64 // drains that yielded for requests (yieldForRequests)

	// loop only
	timers     map[automaton.TimerID]*timerEntry
	freeTimers []*timerEntry // cancelled or fired: out of the timer heap
	gen        uint64
	cur        *batch // the records of the batch being stepped
	steps      int
	// early: the batch being stepped offered an Early Send.
	early bool
	// batches: the protocol steps client batches; reqs holds the pass's
	// client requests not yet stepped (take, stepReqs).
	batches bool
	reqs    []automaton.Request
	// reqEv: the event take unwrapped reqs[0] from when it was a lone
	// ClientRequest that came through the queue, so that stepReqs steps
	// a lone request in the box it came in instead of boxing it again.
	reqEv event
	// lastReqs: the client requests the last pass that stepped any
	// stepped (stepReqs); yieldForRequests does not yield for a lone
	// read after a lone request.
	lastReqs int

	// Pipeline between the loop and its committer goroutine, which runs
	// only while batches wait (ensureCommitter; committing: it runs, cwg:
	// waits for it; committed: the last record committed, committer
	// only).
	commitQ    chan *batch // batches waiting for (or in) a commit, in order
	committing atomic.Bool
	cwg        sync.WaitGroup
	// cwgMu orders a caller's commit (commitOnCaller) against end's
	// cwg.Wait: once ended is set no caller adds to cwg (sched.go).
	cwgMu     sync.Mutex
	cwgEnded  bool
	committed uint64
	// commitHere (loop only): the pass's caller commits its batch
	// (sched.go, passHereCommit): flush queues it without starting a
	// committer and sets deferred.
	commitHere, deferred bool
	// over (loop only): a batch flush could not queue because commitQ
	// was full; the loop is parked (park, sched.go: no pass steps it, a
	// worker never waits for a commit) until the committer makes room.
	over *batch
	park atomic.Int32
	// held: batches a committer held for lazy commit and parked when it
	// returned (committer only); holding: held is not empty.
	held    []*batch
	holding atomic.Bool
	// commitRecs (committer only, like held): the buffer a commit of
	// several batches lists their records in (groupRecs, keepRecs).
	commitRecs []automaton.Persist
	// groupBuf (committer only): the empty group list the last committer
	// left when it returned, reused by the next one (not held's: a list
	// parked in held is the next committer's group itself).
	groupBuf []*batch
	// loopHolds counts the batches flush held itself (holdInLoop).
	loopHolds atomic.Uint64
	// idleCommitters counts the committer goroutines that returned
	// without a commit (they only parked held records, or found nothing).
	idleCommitters atomic.Uint64
	needed         chan struct{} // offer's wake-up of a committer holding records nobody waits for
	free           chan *batch   // recycled batches
	failed         atomic.Bool   // a Commit failed (any namespace's): release nothing any more
	// eager is the number of the last record of a batch that offered an
	// Early Send: the committer commits it without waiting for an output
	// to need it (lazy commit would start the leader's fsync only when
	// the answer that needs it is ready, in sequence instead of in
	// parallel with the round the Early Send began).
	eager atomic.Uint64

	// rel interprets the automaton's outputs (package release, the
	// interpreter the simulator, the model checker and the harness run
	// too): it numbers the Persists, holds each Send, Respond and Effect
	// until the records it waits for are durable, and checks the contract.
	// Under rmu, which is also held while outputs are released, so that
	// they leave in emission order whichever goroutine releases them (the
	// loop at step time, the committer after a commit).
	rmu sync.Mutex
	rel *release.Interp

	// A pass's peer messages, under rmu (send runs under it), for a
	// protocol that steps client batches (batches) on the TCP transport
	// (fs: out's FrameSender form; nil otherwise). While the loop runs a
	// pass (turn), send encodes each message into its destination's
	// buffer; the pass's end sends each destination's in one
	// FrameSender.SendFrames, one write system call for all when the
	// connection is idle (issue 28 item 3: the messages one loop turn
	// sends to a peer leave as one frame... in one write). A send outside
	// a pass (the committer's releases) sends what is buffered first, so
	// each peer's messages keep their release order. Passes buffer only
	// for those protocols: Multi-Paxos formed smaller instances when its
	// Accepts waited for the pass's end (docs/COSTS.md, "Tried and taken
	// out"). The committer's release of the outputs a commit made durable
	// is a turn of its own for every protocol on a FrameSender transport
	// (setDurable): a Multi-Paxos follower's Accepteds of one commit leave
	// in one write, not one each.
	turn    bool
	turnOut []turnPeer
	fs      transport.FrameSender
	// ofs: fs's OwnedFrameSender form (nil otherwise): a destination's
	// buffer is handed over, not copied, and swapped for a spare one.
	ofs transport.OwnedFrameSender

	wmu     sync.Mutex
	waiters map[automaton.RequestID]waiterSet
	// aside, asideCalls: under rmu, the committer's release in progress
	// and the callback waiters it answered (replyfn.go, setDurable).
	aside      bool
	asideCalls []asideCall

	requests, responses, orphans       atomic.Uint64
	persisted, fsyncs, msgsIn, msgsOut atomic.Uint64
	badSends, stepped                  atomic.Uint64

	// lr is the automaton's leader hint (nil if it has none); leader is its
	// latest answer, noted after each batch of steps (leader.go).
	eff effects // effect.go

	lr     automaton.LeaderReporter
	leader atomic.Pointer[automaton.NodeID]
	// lazy (under rmu): the outputs being released are a lazy event's
	// (event.lazy); its sends are coalesced (coalesce.go).
	lazy bool
	// term is the automaton's term (automaton.TermReporter) when leader
	// was last noted, 0 without one: the order of leader claims between
	// nodes (leadergossip.go).
	term atomic.Uint64

	mRequests, mResponses, mPersists, mFsyncs, mIn, mOut prometheus.Counter
	mLatency, mCommit, mBatchIn, mBatchPersist           prometheus.Observer
}

func (n *Node) newLoop(ns config.Namespace, svc service.Service, a automaton.Automaton) *nsLoop {
	l := &nsLoop{
		n: n, ns: ns, svc: svc, a: a,
		log:     n.log.With("namespace", ns.Name),
		inbox:   newInQueue(n.opts.InboxLen),
		reqIn:   newInQueue(n.opts.InboxLen),
		timers:  map[automaton.TimerID]*timerEntry{},
		waiters: map[automaton.RequestID]waiterSet{},
		cur:     &batch{},
		commitQ: make(chan *batch, commitQueueLen),
		needed:  make(chan struct{}, 1),
		free:    make(chan *batch, commitQueueLen),
		rel:     release.New(release.Config{Self: n.id}),
	}
	l.lr, _ = a.(automaton.LeaderReporter)
	l.batches = automaton.StepsClientBatches(ns.Protocol)
	l.direct = l.batches && !n.opts.noDirect
	m := n.m
	l.mRequests = m.requests.WithLabelValues(ns.Name)
	l.mResponses = m.responses.WithLabelValues(ns.Name)
	l.mPersists = m.persists.WithLabelValues(ns.Name)
	l.mFsyncs = m.fsyncs.WithLabelValues(ns.Name)
	l.mIn = m.msgsIn.WithLabelValues(ns.Name)
	l.mOut = m.msgsOut.WithLabelValues(ns.Name)
	l.mLatency = m.latency.WithLabelValues(ns.Name)
	l.mCommit = m.commit.WithLabelValues(ns.Name)
	l.mBatchIn = m.batchInputs.WithLabelValues(ns.Name)
	l.mBatchPersist = m.batchPersist.WithLabelValues(ns.Name)
	return l
}

// push hands an input to the loop, waiting while the inbox is full, and
// wakes it (sched.go). It returns false when the node is stopping.
func (l *nsLoop) push(ev event) bool {
	if l.retired.Load() {
		return false // never stepped again: its inbox must not fill
	}
	if l.inbox.put(ev, l.n.stopping, nil, nil) >= 0 {
		return false
	}
	l.wake()
	return true
}

// noteRequest wakes the loop for a request just put into requestQueue
// (sched.go: queued for a pool worker unless queued or stepped already).
func (l *nsLoop) noteRequest() {
	l.wake()
}

// requestQueue is the queue client requests go to: reqIn in a loop
// that runs direct passes, else the inbox (in arrival order with the
// other inputs, as a protocol that does not step client batches has
// always had them).
func (l *nsLoop) requestQueue() *inQueue {
	if l.direct {
		return l.reqIn
	}
	return l.inbox
}

// start begins the loop: its first pass (on a pool worker, sched.go)
// steps Start, and every later one takes every input already queued (up
// to BatchLimit) and hands the pass's records to the committer (flush).
// A pass does not wait for the commit: while the committer's fsync runs,
// the next passes step the next inputs, and the committer commits
// everything queued behind the running commit in one storage batch when
// it finishes (group commit). The node counts the loop (n.wg) until end.
//
// Release rule, the finest the automaton contract allows, decided by the
// interpreter every runtime runs (package release): every Persist gets the
// next sequence number, and every Send, Respond or Effect requires the
// number of the last Persist emitted before it, in its own step or any
// earlier one (an Early Send: what the last output before it that was not
// Early required). The committer reports the number of the last durable
// Persist after each commit (setDurable). Outputs leave in emission order,
// each as soon as its requirement is durable: at step time when nothing
// earlier waits and its requirement is durable already (whatever later
// records are pending), and otherwise from the committer, after the commit
// that makes its requirement durable.
func (l *nsLoop) start(st automaton.Start) {
	l.fs, _ = l.out.(transport.FrameSender)
	l.ofs, _ = l.out.(transport.OwnedFrameSender)
	l.pass.Lock()
	l.startEv = &st
	l.pass.Unlock()
	l.begun.Store(true)
	l.wake()
}

// end ends the loop (the node stops, or a pass failed to flush): no pass
// runs any more; the committer commits and releases what it holds
// (unless a commit failed) before the node closes storage; then the
// effects are waited for and the timers cancelled. Once; it may block.
func (l *nsLoop) end() {
	l.endOnce.Do(func() {
		defer l.n.wg.Done()
		l.pass.Lock()
		l.live = false
		l.dead = true
		if l.retired.Load() {
			l.leader.Store(nil) // it claims no leadership any more (leadergossip.go)
		}
		over := l.over
		l.over = nil
		if over != nil {
			l.ensureCommitter() // commitQ is still open
		}
		l.pass.Unlock()
		if over != nil {
			// The parked batch goes last (a clean shutdown loses no
			// record); the running committer makes room.
			l.commitQ <- over
		}
		close(l.commitQ)
		if l.committing.CompareAndSwap(false, true) {
			l.cwg.Add(1)
			l.committer() // drains what is queued, if anything
		}
		l.cwgMu.Lock()
		l.cwgEnded = true // no caller commits from here (commitOnCaller)
		l.cwgMu.Unlock()
		l.cwg.Wait()
		// A running committer that had found the queue open and empty may
		// have parked its held records (lazy commit) after the close,
		// seeing nothing queued: commit them now. This committer takes
		// them back, finds the queue closed and commits; it never parks.
		if l.holding.Load() && l.committing.CompareAndSwap(false, true) {
			l.cwg.Add(1)
			l.committer()
		}
		l.closeEffects() // after the committer's last releases
		l.stopTimers()
	})
}

// renote wakes the loop again when a direct pass leaves requests in
// reqIn (BatchLimit). Under pass.
func (l *nsLoop) renote() {
	if l.reqIn.len() > 0 {
		l.noteRequest()
	}
}

// endPass steps the pass's client requests, notes the leader, flushes
// the pass's records and sends its buffered messages; false after a
// storage failure. Under pass.
func (l *nsLoop) endPass() bool {
	l.stepReqs()
	l.noteLeader()
	ok := l.flush()
	l.endTurn()
	return ok
}

// Direct passes (issue 28 item 5: a request that finds its loop idle is
// not passed through a chain of wake-ups). In a loop of a protocol that
// steps client batches (abd, esds), the goroutine that has a client
// request (the connection's goroutine in Node.Do, DoBatch) runs the pass
// itself when no pass is running (pass.TryLock) instead of handing the
// request to the pool and waking a worker: one goroutine wake-up
// (often an OS thread's futex too) fewer. The pass is a pool
// pass, with the requests only: it takes the client requests
// already queued (reqIn), then its own, then those that come meanwhile
// (after one yield, as the loop does, so that other connections'
// requests join its batch), steps them as one ClientBatch, flushes and
// sends the pass's frames. Order is kept: a client request has no order
// with any other input but the requests its goroutine handed over before
// it (Node.Submit: a connection's pipeline, in order) and those of its
// own batch (take steps a pass's requests after its other inputs
// anyway). So requests come through their own channel (reqIn), read
// only under pass (a pool worker is woken by noteRequest, then takes
// the pass and reads it), so that they are stepped in the order they
// were put in, and a direct pass steps the queued ones, which hold any
// its goroutine handed over before, ahead of its own. Peer messages,
// timers and effects' results keep the inbox's order, which only the
// pool's passes drain. A peer
// message is not stepped by a direct pass on the transport's reader
// goroutine: tried, it doubled the peer writes per operation (the reader
// read and stepped its frames one at a time, where the loop gathers the
// frames that arrived meanwhile into one pass and one reply frame); the
// reader runs a pool pass instead once it has read every frame waiting
// (readerpass.go). Multi-Paxos
// and the other protocols keep the pool's passes (their
// batching depends on inputs accumulating in the inbox). It reports
// whether it stepped reqs (not when the pass filled up on queued requests
// with more still queued: the caller queues reqs); with commit, the pass's
// flush queues its batch without starting a committer, and deferred
// reports that it did, stepped or not: the caller then commits it
// (commitOnCaller; replyfn.go, callerCommits).
// The requests come as themselves, not as an event: a direct pass only
// runs where the loop batches (direct implies batches), where take would
// unwrap an event's ClientRequest into reqs at once, so boxing it into the
// event's interface was an allocation per request for nothing.
func (l *nsLoop) directPass(commit bool, reqs ...automaton.Request) (stepped, deferred bool) {
	if !l.direct || !l.pass.TryLock() {
		return false, false
	}
	defer l.pass.Unlock()
	if !l.live || l.over != nil { // parked: the pool steps it once unparked
		return false, false
	}
	l.commitHere, l.deferred = commit, false
	defer func() {
		deferred = l.deferred
		l.commitHere, l.deferred = false, false
	}()
	l.directs.Add(1)
	l.beginTurn()
	// The requests queued before ev first: they may include ones its
	// goroutine handed over before it (Node.Submit).
	for l.steps+len(l.reqs) < l.n.opts.BatchLimit {
		q, ok := l.reqIn.take()
		if !ok {
			break
		}
		l.take(q)
	}
	// The pass is full and requests are still queued: they may include
	// ones this goroutine handed over before reqs, which reqs must not
	// overtake (TestSubmitKeepsOrderDirectFullPass; session 58: reqs were
	// stepped here all the same). The pass steps the queued ones it took;
	// the caller queues reqs behind the rest (stepped false).
	behind := l.steps+len(l.reqs) >= l.n.opts.BatchLimit && l.reqIn.len() > 0
	if !behind {
		// take's ClientRequest and ClientBatch case
		l.reqs = append(l.reqs, reqs...)
	}
	l.drain(nil) // a direct pass leaves the inbox to the pool's pass
	if !l.endPass() {
		l.live = false
		go l.end()
	}
	l.renote()
	return !behind, false
}

// turnPeer is one destination's messages of a pass, encoded as frames
// (transport.AppendFrame).
type turnPeer struct {
	to     automaton.NodeID
	frames []byte
	n      int
}

// maxTurnFrames bounds a destination's buffered frames: past it they are
// sent at once. A message larger than it is sent alone, after the buffer.
const maxTurnFrames = 256 << 10

func (l *nsLoop) beginTurn() {
	if l.fs == nil || !l.batches {
		return
	}
	l.rmu.Lock()
	l.turn = true
	l.rmu.Unlock()
}

// endTurn sends the pass's buffered messages.
func (l *nsLoop) endTurn() {
	if l.fs == nil || !l.batches {
		return
	}
	l.rmu.Lock()
	l.turn = false
	l.sendTurn()
	l.rmu.Unlock()
}

// bufferSend adds a message to its destination's frames of this pass.
// Under rmu.
func (l *nsLoop) bufferSend(s automaton.Send) {
	var tp *turnPeer
	for i := range l.turnOut {
		if l.turnOut[i].to == s.To {
			tp = &l.turnOut[i]
			break
		}
	}
	if tp == nil {
		l.turnOut = append(l.turnOut, turnPeer{to: s.To})
		tp = &l.turnOut[len(l.turnOut)-1]
	}
	tp.frames = transport.AppendFrame(tp.frames, l.ns.Name, s.Msg)
	tp.n++
	if tr := l.n.opts.trace; tr != nil {
		tr(stageSend, s.To, msgKind(s.Msg))
	}
	if len(tp.frames) >= maxTurnFrames {
		l.sendFrames(tp)
	}
}

// sendTurn sends every destination's buffered frames. Under rmu.
func (l *nsLoop) sendTurn() {
	for i := range l.turnOut {
		if l.turnOut[i].n > 0 {
			l.sendFrames(&l.turnOut[i])
		}
	}
}

func (l *nsLoop) sendFrames(tp *turnPeer) {
	var err error
	if l.ofs != nil { // the buffer is the transport's now: its spare replaces it
		tp.frames, err = l.ofs.SendFramesOwned(tp.to, tp.frames, tp.n)
	} else {
		err = l.fs.SendFrames(tp.to, tp.frames, tp.n)
	}
	if err != nil {
		if l.badSends.Add(1) <= 10 {
			l.log.Debug("peer send failed", "to", tp.to, "messages", tp.n, "err", err)
		}
	} else {
		l.msgsOut.Add(uint64(tp.n))
		l.mOut.Add(float64(tp.n))
	}
	tp.frames, tp.n = tp.frames[:0], 0
	if cap(tp.frames) > 4*maxTurnFrames {
		tp.frames = nil
	}
}

// take steps an input of the pass, except that a protocol that steps
// client batches (automaton.BatchStepper) gets the pass's client requests
// together, as one ClientBatch (stepReqs) at the pass's end: the peer
// messages and timers of the pass step as they come, and the requests
// that arrived among them step after them, in their own arrival order.
// Inputs from different sources have no order but the inbox's, which is
// the scheduler's; a request stepped at the end of the pass is one that
// arrived a little later. Interleaved, a busy loop's requests would be
// cut into batches of one or two by the peer messages between them.
func (l *nsLoop) take(ev event) {
	if l.batches {
		switch in := ev.in.(type) {
		case automaton.ClientRequest:
			if len(l.reqs) == 0 {
				l.reqEv = ev
			}
			l.reqs = append(l.reqs, in.Req)
			return
		case automaton.ClientBatch: // Node.DoBatch: in order, together
			l.reqs = append(l.reqs, in.Reqs...)
			return
		}
	}
	l.step(ev)
}

// drain takes what is ready, up to BatchLimit inputs: client requests and,
// when inbox is not nil (a pool pass; nil for a direct pass, whose nil
// queue is always empty), peer messages and effects' results, one from
// each queue in turn while both hold some. It yields once for requests
// about to be handed over (yieldForRequests) before it stops.
func (l *nsLoop) drain(inbox *inQueue) {
	yielded, reqFirst := false, false
	for l.steps+len(l.reqs) < l.n.opts.BatchLimit {
		first, second := inbox, l.reqIn
		if reqFirst {
			first, second = second, first
		}
		reqFirst = !reqFirst
		ev, ok := first.take()
		if !ok {
			ev, ok = second.take()
		}
		if ok {
			l.take(ev)
			continue
		}
		if l.yieldForRequests(yielded) {
			yielded = true
			continue
		}
		return
	}
}

// yieldForRequests lets the goroutines that are ready to run go first,
// once per pass (yielded: already done), when the pass holds client
// requests for one ClientBatch (a protocol that steps client batches) and
// the inbox is empty: the clients' connection goroutines that have a
// request read but not yet handed over then hand it to this pass, and it
// joins the batch, so one round of peer messages (one frame and write
// per peer) serves more requests (issue 28 item 3: "the loop drains what
// is ready before it steps"). It reports whether the loop yielded.
//
// Not for a lone read after a lone request (the pass holds one request
// whose operations all read, and the last pass that stepped requests
// stepped one): one client's gets, one at a time. runtime.Gosched does
// not return at once there, as was thought: it puts the goroutine on the
// global run queue and wakes an idle P (wakep, a futex wake of another
// thread), which spins, finds nothing or takes the yielding goroutine,
// and sleeps again. A pb GET at its primary, a lone request on a direct
// pass since pb steps client batches (session 54, pipe54), cost 1.7
// context switches and 6-10 µs of CPU more per get with it
// (docs/costs/s56-lat56.md), and nothing could join the batch: the
// request that came in alone had no other queued with it. A lone write
// still yields: its step hands work to other goroutines (pbdurable's
// database transaction runs on an Effect's goroutine), and one client's
// pbdurable put without the yield had more context switches in 7 of 7
// alternated rounds and a higher p50 in 6 of 7 (same file; not
// understood: the P the yield wakes may be the one that runs the
// Effect). Once requests come together (a pass with two or more, or one
// after a batch) the loop yields as before, so a loaded loop's batches
// gather as they did.
func (l *nsLoop) yieldForRequests(yielded bool) bool {
	if yielded || len(l.reqs) == 0 || l.n.opts.noYield {
		return false
	}
	if len(l.reqs) == 1 && l.lastReqs <= 1 && !l.n.opts.loneYield && l.reads(l.reqs[0]) {
		return false
	}
	l.yields.Add(1)
	runtime.Gosched()
	return true
}

// reads reports whether request r only reads (automaton.IsReadRequest,
// by the namespace's service); a transaction's step never counts as a read.
func (l *nsLoop) reads(r automaton.Request) bool {
	return l.svc != nil && r.Txn == nil && automaton.IsReadRequest(l.svc, r)
}

// stepReqs steps the client requests take held: one as a ClientRequest,
// several as one ClientBatch.
func (l *nsLoop) stepReqs() {
	if len(l.reqs) > 0 {
		l.lastReqs = len(l.reqs)
	}
	switch len(l.reqs) {
	case 0:
		return
	case 1:
		ev := l.reqEv // reqs[0]'s own box, when it came in one (take)
		if ev.in == nil {
			ev = event{in: automaton.ClientRequest{Req: l.reqs[0]}}
		}
		l.step(ev)
	default:
		l.step(event{in: automaton.ClientBatch{Reqs: l.reqs}})
		l.steps += len(l.reqs) - 1 // inputs, for BatchLimit and the batch metric
	}
	clear(l.reqs)
	l.reqs, l.reqEv = l.reqs[:0], event{}
}

func (l *nsLoop) step(ev event) {
	if tf, ok := ev.in.(automaton.TimerFired); ok && !l.takeFired(tf.ID, ev.gen) {
		return // cancelled or replaced after it fired
	}
	l.steps++
	if tr := l.n.opts.trace; tr != nil {
		switch in := ev.in.(type) {
		case automaton.ClientRequest:
			tr(stageStepRequest, "", 0)
		case automaton.ClientBatch:
			for range in.Reqs {
				tr(stageStepRequest, "", 0)
			}
		case automaton.PeerMessage:
			tr(stageStepMsg, in.From, msgKind(in.Msg))
		}
	}
	if h := l.n.opts.onStep; h != nil {
		h(l, true)
	}
	outs := l.a.Step(ev.in)
	if h := l.n.opts.onStep; h != nil {
		h(l, false)
	}
	l.rmu.Lock()
	if l.failed.Load() {
		l.rel.Fail() // storage failed (storagefault.go): nothing leaves any more
	}
	io := loopIO{l}
	l.lazy = ev.lazy && !l.n.opts.noCoalesce
	for _, o := range outs {
		if err := l.rel.Output(o, io); err != nil {
			l.violation(err)
		}
	}
	l.lazy = false
	if l.rel.TakeEarly() {
		l.early = true
	}
	wait := l.rel.Waiting()
	l.rmu.Unlock()
	if wait {
		select { // a committer holding the records an output needs commits them now
		case l.needed <- struct{}{}:
		default:
		}
		if l.holding.Load() {
			l.ensureCommitter() // the held records were parked (committer)
		}
	}
	l.stepped.Add(1)
}

// violation logs an output that breaks the automaton contract (a protocol
// bug; the simulator fails a run on it). The output is dropped.
func (l *nsLoop) violation(err error) {
	if v, ok := err.(*release.Violation); ok {
		if _, send := v.Output.(automaton.Send); send {
			l.badSends.Add(1)
		}
	}
	l.log.Error("automaton broke the contract; output dropped (protocol bug)", "err", err)
}

// loopIO carries out, for the loop, what its interpreter decides
// (release.Runtime): records go into the batch being stepped, outputs
// leave through the transport, the waiters and the effect executors,
// timers are armed. Called under rmu.
type loopIO struct{ l *nsLoop }

func (io loopIO) Persist(seq uint64, p automaton.Persist) {
	b := io.l.cur
	b.persists = append(b.persists, p)
	b.last = seq
}

func (io loopIO) Release(o automaton.Output) { io.l.release1(o) }

func (io loopIO) SetTimer(o automaton.SetTimer) { io.l.setTimer(o) }

func (io loopIO) CancelTimer(id automaton.TimerID) {
	l := io.l
	if e := l.timers[id]; e != nil {
		l.n.timers.cancel(e)
		if len(l.freeTimers) < maxFreeTimers {
			l.freeTimers = append(l.freeTimers, e)
		}
		delete(l.timers, id)
	}
}

func (io loopIO) Members(o automaton.Members) {
	io.l.n.setMembers(io.l.ns.Name, o)   // membership.go
	io.l.noteOwnMembership(io.l.n.id, o) // placemembers.go
}

// takeFired removes the timer id that fired with generation gen from the
// loop's table, or reports false when it was cancelled or re-armed since.
// Under rmu: outputs released after an fsync (the committer's goroutine,
// not the pass) arm and cancel timers in the same table.
func (l *nsLoop) takeFired(id automaton.TimerID, gen uint64) bool {
	l.rmu.Lock()
	defer l.rmu.Unlock()
	e := l.timers[id]
	if e == nil || e.gen != gen {
		return false
	}
	delete(l.timers, id)
	if len(l.freeTimers) < maxFreeTimers {
		l.freeTimers = append(l.freeTimers, e) // out of the heap
	}
	return true
}

// setTimer arms a timer in the node's timer heap (sched.go). A firing
// already delivered (nsLoop.fired) for an earlier arming of the same id,
// or of the entry it reuses, carries an older generation, and step drops
// it.
func (l *nsLoop) setTimer(o automaton.SetTimer) {
	l.gen++
	after := o.After // never negative: the interpreter refuses that
	now := time.Now()
	if o.Slack > 0 && !l.n.opts.noCoalesce {
		after = coalesced(now, after, o.Slack)
	}
	e := l.timers[o.ID]
	if e == nil {
		if k := len(l.freeTimers); k > 0 {
			e = l.freeTimers[k-1]
			l.freeTimers[k-1] = nil
			l.freeTimers = l.freeTimers[:k-1]
		} else {
			e = &timerEntry{l: l, idx: -1}
		}
		l.timers[o.ID] = e
	}
	l.n.timers.arm(e, o.ID, now.Add(after), l.gen, o.Slack > 0)
}

// timerEpoch is the origin of the grid slack timers fire on (coalesce.go).
var timerEpoch = time.Now()

// coalesced is the delay from now to the first grid point (step: the
// largest 1-2-5 multiple of a millisecond not above slack) at or after
// now+after; after itself when slack is under a millisecond.
func coalesced(now time.Time, after, slack time.Duration) time.Duration {
	step := time.Duration(0)
	for d := time.Millisecond; d <= slack; d *= 10 {
		for _, m := range []time.Duration{1, 2, 5} {
			if d*m <= slack {
				step = d * m
			}
		}
	}
	if step == 0 {
		return after
	}
	if r := now.Add(after).Sub(timerEpoch) % step; r > 0 {
		after += step - r
	}
	return after
}

func (l *nsLoop) stopTimers() {
	l.rmu.Lock()
	defer l.rmu.Unlock()
	for id, e := range l.timers {
		l.n.timers.cancel(e)
		delete(l.timers, id)
	}
}

// outputsWait reports whether some output waits for a record that is not
// durable yet.
func (l *nsLoop) outputsWait() bool {
	l.rmu.Lock()
	defer l.rmu.Unlock()
	return l.rel.Waiting()
}

// setDurable records that every Persist up to number d is durable and
// releases, in order, the waiting outputs that need nothing later. Outside
// a pass the release is a turn of its own (on a FrameSender transport): the
// messages it releases to one peer leave in one SendFrames at its end, one
// write when the connection is idle, instead of one write each (a Multi-Paxos
// follower's commit of several Accepts releases as many Accepteds;
// docs/COSTS.md, pxs46, session 46). The release runs without waiting, so
// nothing waits longer than the release itself.
//
// aside (the committer's releases): the callback waiters answered are run
// after the release, together, on a goroutine of their own (replyfn.go);
// with lone (a caller's one commit, commitLoop's once) a single one runs
// on the caller (runAside); else a single one is returned, for the
// committer to run once it leaves (keepAside).
func (l *nsLoop) setDurable(d uint64, aside, lone bool) (kept []asideCall) {
	l.rmu.Lock()
	if l.failed.Load() {
		l.rel.Fail() // storage failed (storagefault.go): nothing leaves any more
		l.rmu.Unlock()
		return nil
	}
	l.aside = aside
	if l.fs == nil || l.turn || l.lazy {
		l.rel.Durable(d, loopIO{l})
	} else {
		l.turn = true
		l.rel.Durable(d, loopIO{l})
		l.turn = false
		l.sendTurn()
	}
	l.aside = false
	calls := l.takeAside()
	l.rmu.Unlock()
	if l.keepAside(calls, lone) {
		return calls
	}
	l.runAside(calls, lone)
	return nil
}

// flush ends the current batch: it queues the batch's records, if any, for
// the committer. It returns false after a storage failure (or when the node
// stops while the committer's queue is full), which ends the loop.
func (l *nsLoop) flush() bool {
	if l.steps > 0 {
		l.mBatchIn.Observe(float64(l.steps))
		l.steps = 0
	}
	if l.failed.Load() {
		return false
	}
	b := l.cur
	if len(b.persists) == 0 {
		return true
	}
	if !l.n.durable {
		return l.commitInline(b)
	}
	if l.early {
		l.eager.Store(b.last)
		l.early = false
	} else if l.holdInLoop(b) {
		l.nextBatch()
		return true
	}
	// A queue with room takes the batch even when the node is stopping: an
	// output released before its step's records (a Respond emitted before a
	// Persist) may already have let the node's user close it, and a clean
	// shutdown loses no record (the committer commits what is queued).
	// A full queue does not make the pass wait (a pool worker waiting
	// for an fsync would leave one worker fewer for the node's other
	// groups): the batch waits in the loop, which is parked until the
	// committer makes room (unpark; end queues it at shutdown).
	select {
	case l.commitQ <- b:
		if l.commitHere {
			l.deferred = true // the pass's caller commits (passHereCommit)
		} else {
			l.ensureCommitter() // after the send: a committer finding the queue empty returns
		}
	default:
		l.over = b
		l.unpark()
	}
	if !l.deferred {
		l.n.handoff(1) // else counted if the caller does not commit it (commitOnCaller)
	}
	l.nextBatch()
	return true
}

func (l *nsLoop) nextBatch() {
	select {
	case l.cur = <-l.free:
	default:
		l.cur = &batch{}
	}
}

// holdInLoop parks batch b with the records held for lazy commit (held,
// commitLoop) when no committer runs and nothing needs b committed yet:
// no released output waits, no Early Send's batch is uncommitted, and the
// held batches stay below commitQueueLen. That is what a committer started
// for b would do on taking it (commitLoop's lazy commit): hold it, park it
// in the loop and return. A Multi-Paxos leader's "c" record after the
// answer it follows, once per put at one client, started a committer
// goroutine (a wake-up, often another thread's futex) only for that.
// Everything else is the lazy commit's: a step whose output needs the held
// records starts a committer (holding, step), so does the next batch that
// cannot be held, and the loop's end commits them. Only for loops without
// direct passes (Multi-Paxos and the others that do not step client
// batches): ESDS's one-client put p50 was higher in 2 of the first 3
// alternated rounds with it (lat50, load 31-34; its hand-offs per put
// 0.31 -> 0.21), so ESDS and ABD keep the committer's path, as for
// keepAside. Under pass.
func (l *nsLoop) holdInLoop(b *batch) bool {
	if l.direct || l.n.opts.noLoopHold || len(l.commitQ) > 0 || !l.committing.CompareAndSwap(false, true) {
		return false
	}
	// No committer runs, and none starts while committing is set: held is
	// this goroutine's until it clears committing.
	if len(l.held)+1 >= commitQueueLen || l.outputsWait() || l.eager.Load() > l.committed {
		l.committing.Store(false)
		return false
	}
	l.held = append(l.held, b)
	l.holding.Store(true)
	l.loopHolds.Add(1)
	l.committing.Store(false)
	if len(l.commitQ) > 0 || len(l.needed) > 0 {
		l.ensureCommitter() // as a committer parking them checks again
	}
	return true
}

// Parking states (nsLoop.park).
const (
	parkNone    int32 = iota
	parkWaiting       // over is set; the loop waits for the committer (wake skips it)
	parkReady         // the committer made room: the next pass queues over
)

// unpark queues the parked batch (over) if the commit queue has room and
// reports whether the loop may step (nothing is parked any more). If not,
// the loop stays parked: hasWork is false and wake leaves it until the
// committer, having taken batches, makes it ready (roomMade); a full
// queue always has a committer running (it returns only when the queue
// is empty). Under pass.
func (l *nsLoop) unpark() bool {
	if l.over == nil {
		return true
	}
	for try := 0; try < 2; try++ {
		select {
		case l.commitQ <- l.over:
			l.over = nil
			l.park.Store(parkNone)
			// After the send: the committer that made room may have
			// returned since, finding the queue empty.
			l.ensureCommitter()
			return true
		default:
		}
		// Waiting first, then once more: a committer that took a batch
		// after the failed send either left room for the second try or
		// finds the loop waiting (roomMade).
		l.park.Store(parkWaiting)
	}
	return false
}

// roomMade wakes a loop parked on a full commit queue: the committer has
// just taken batches from it.
func (l *nsLoop) roomMade() {
	if l.park.Load() == parkWaiting && l.park.CompareAndSwap(parkWaiting, parkReady) {
		l.wake()
	}
}

// commitInline commits a batch in the pass, for engines without
// fsync (durability memory): their Commit is a map update, so handing it to
// the committer would cost a goroutine wake-up per batch for nothing to
// overlap. The release rule is the same: the batch's waiting outputs leave
// after its records are committed, in emission order. The committer stays
// idle (commitQ is never fed), so nothing else commits concurrently.
func (l *nsLoop) commitInline(b *batch) bool {
	if !l.commit(b.persists) {
		l.failed.Store(true)
		b.reset()
		return false
	}
	last := b.last
	b.reset()
	l.setDurable(last, false, false)
	return true
}

// committer commits the batches the loop queues and then releases the
// outputs that waited for them. It takes every batch already queued behind
// the first and commits all their records in one Commit (one fsync), so
// commits grow with the load.
//
// Lazy commit: a group whose records no output waits for yet (a Persist with
// no later Send or Respond so far, such as Multi-Paxos's chosen-prefix
// record after the answers it follows) is held, not committed: it joins the
// next group, and is committed as soon as an output needs it (offer signals
// l.needed), the held batches reach commitQueueLen, a batch that offered an
// Early Send comes (l.eager), or the loop ends. Nothing
// observable depends on a record before an output that follows it is
// released, and commits stay in emission order, so what survives a crash is
// still a prefix of the records emitted: the durability rule of package
// automaton holds, with one fsync fewer wherever such a record used to be
// committed alone (issue 18: a Multi-Paxos put's "c" record cost the leader
// a second fsync per request at low load).
//
// The committer runs only while there is work (sched.go: an idle group
// owns no goroutine): flush starts it (ensureCommitter) and it returns
// when the queue is empty, parking the records it holds for lazy commit
// in the loop (held) for the next committer.
func (l *nsLoop) committer() { l.commitLoop(false) }

// commitLoop is the committer; once (a caller's commit, commitOnCaller):
// after its first commit it goes on only as far as a committer goes
// without committing: what was queued meanwhile is held and parked in the
// loop if no output needs it yet (lazy commit), and handed to a committer
// goroutine only if it is to be committed. A Multi-Paxos leader's "c"
// record, stepped while the caller's fsync ran (the first Accepted came
// before it ended), used to start a goroutine that only parked it (a
// goroutine start, often another thread's futex wake).
func (l *nsLoop) commitLoop(once bool) {
	defer l.cwg.Done()
	commits := 0
	defer func() {
		if !once && commits == 0 {
			l.idleCommitters.Add(1)
		}
	}()
	var reply []asideCall // kept by setDurable: run when this committer leaves (keepAside)
	defer func() { l.runAside(reply, true) }()
	group := l.held // parked by the previous committer, or nil
	if group == nil {
		group = l.groupBuf // the last committer's list, empty
	}
	l.held = nil
	l.holding.Store(false)
	committed := l.committed // the last record committed
	closed := false
	handed := false // once: the caller's commit is done, the next one is a goroutine's
	for !closed {
		if len(group) == 0 {
			var b *batch
			var ok bool
			select {
			case b, ok = <-l.commitQ:
			default:
				// Nothing to do: return, unless a batch came after the
				// check and its flush saw this committer running.
				l.committed = committed
				l.groupBuf = group[:0] // empty: the next committer's list
				l.committing.Store(false)
				if len(l.commitQ) == 0 || !l.committing.CompareAndSwap(false, true) {
					return
				}
				continue
			}
			if !ok {
				break
			}
			group = append(group, b)
		}
	more:
		for len(group) < commitQueueLen {
			select {
			case b2, ok := <-l.commitQ:
				if !ok {
					closed = true
					break more
				}
				group = append(group, b2)
			default:
				break more
			}
		}
		l.roomMade()
		if l.failed.Load() {
			l.recycle(group) // never released
			group = group[:0]
			continue
		}
		if !closed && len(group) < commitQueueLen && !l.outputsWait() && l.eager.Load() <= committed {
			// Hold the records until an output needs them or more come.
			select {
			case b2, ok := <-l.commitQ:
				if !ok {
					closed = true
				} else {
					group = append(group, b2)
				}
				continue
			case <-l.needed:
				continue
			default:
			}
			// Park them in the loop and return (an idle group owns no
			// goroutine): the next flush, or a step whose output needs
			// them (holding), starts a committer that takes them back.
			l.held, l.committed = group, committed
			l.holding.Store(true)
			l.committing.Store(false)
			if len(l.commitQ) == 0 && len(l.needed) == 0 || !l.committing.CompareAndSwap(false, true) {
				return
			}
			group, l.held = l.held, nil
			l.holding.Store(false)
			continue
		}
		if handed {
			// A caller's commit is done (once): what came meanwhile
			// needs a commit, which is a committer goroutine's. It
			// takes the group back as a committer takes held records.
			l.held, l.committed = group, committed
			l.cwg.Add(1)
			go l.committer()
			return
		}
		select { // the commit below covers whatever the token asked for
		case <-l.needed:
		default:
		}
		recs := l.groupRecs(group)
		last := group[len(group)-1].last
		l.runAside(reply, false) // more to commit: the reply does not wait for it
		reply = nil
		ok := l.commit(recs)
		commits++
		l.keepRecs(recs, group)
		l.recycle(group)
		group = group[:0]
		if !ok {
			// What waits is never released: a client must not see an
			// answer, nor a peer a message, that depends on a lost record.
			l.failed.Store(true)
			continue
		}
		committed = last
		reply = l.setDurable(last, true, once) // once: replyfn.go, runAside
		if once {
			// The caller's one commit is done. What came meanwhile is
			// looked at here, as a committer would: records no output
			// waits for yet (a Multi-Paxos leader's "c" record stepped
			// during its fsync) are held and parked in the loop without
			// a goroutine; anything to commit goes to a committer
			// goroutine (handed, above).
			handed = true
		}
	}
	if len(group) > 0 && !l.failed.Load() {
		// The loop ended: commit what is held (a clean shutdown loses
		// nothing the automaton persisted).
		recs := l.groupRecs(group)
		l.runAside(reply, false)
		reply = nil
		if l.commit(recs) {
			reply = l.setDurable(group[len(group)-1].last, true, false)
		} else {
			l.failed.Store(true)
		}
		l.keepRecs(recs, group)
		l.recycle(group)
	}
}

// maxCommitRecs bounds the capacity of the records buffer the committer
// keeps between commits (commitRecs): a commit of more records allocates
// its own, as every commit of several batches did before.
const maxCommitRecs = 4096

// groupRecs returns the records of a group of batches in order, for one
// Commit: a lone batch's own records, else the group's records copied into
// the committer's buffer (commitRecs), kept across commits and committer
// goroutines so that a group commit allocates nothing for its record list
// (session 60: a fresh list grown by append was ~5 % of an ESDS node's
// allocations at 64 clients with fsync). Committer only: whoever holds
// committing (a committer goroutine, or a caller's commit) owns commitRecs.
func (l *nsLoop) groupRecs(group []*batch) []automaton.Persist {
	if len(group) == 1 {
		return group[0].persists
	}
	recs := l.commitRecs[:0]
	for _, g := range group {
		recs = append(recs, g.persists...)
	}
	return recs
}

// keepRecs is groupRecs's other half, after the Commit: the store keeps no
// reference to recs (it copies what it keeps), so a list that was the
// committer's buffer is cleared and kept for the next group (unless it
// grew beyond maxCommitRecs); a lone batch's records are recycle's.
func (l *nsLoop) keepRecs(recs []automaton.Persist, group []*batch) {
	if len(group) == 1 {
		return
	}
	clear(recs)
	if cap(recs) <= maxCommitRecs {
		l.commitRecs = recs[:0]
	}
}

// ensureCommitter starts the committer unless it runs. Under pass (the
// loop is live: commitQ is open).
func (l *nsLoop) ensureCommitter() {
	if l.committing.CompareAndSwap(false, true) {
		l.cwg.Add(1)
		go l.committer()
	}
}

// recycle forgets a group of batches the committer is done with.
func (l *nsLoop) recycle(group []*batch) {
	for i, g := range group {
		g.reset()
		select {
		case l.free <- g:
		default:
		}
		group[i] = nil
	}
}

// commit makes recs durable. It reports a failure to the node, which then
// acknowledges nothing more (storagefault.go).
func (l *nsLoop) commit(recs []automaton.Persist) bool {
	tr := l.n.opts.trace
	if tr != nil {
		tr(stageCommitStart, "", 0)
	}
	t0 := time.Now()
	if err := l.store.Commit(recs); err != nil {
		l.n.fatal(l.ns.Name, err)
		return false
	}
	if tr != nil {
		tr(stageCommitEnd, "", 0)
	}
	l.mCommit.Observe(time.Since(t0).Seconds())
	l.mBatchPersist.Observe(float64(len(recs)))
	l.persisted.Add(uint64(len(recs)))
	l.mPersists.Add(float64(len(recs)))
	if l.n.durable {
		l.fsyncs.Add(1)
		l.mFsyncs.Inc()
	}
	return true
}

// release1 sends a message, answers a client or starts an effect. Called
// under rmu.
func (l *nsLoop) release1(o automaton.Output) {
	switch o := o.(type) {
	case automaton.Send:
		l.send(o)
	case automaton.Respond:
		l.respond(o.Resp)
	case automaton.Effect:
		l.runEffect(o) // effect.go
	case automaton.Announce:
		l.n.announce(l.ns.Name, o) // pubsub.go
	}
}

func (l *nsLoop) send(s automaton.Send) {
	if l.fs != nil && !l.lazy {
		if l.turn && transport.FrameSize(l.ns.Name, s.Msg) <= maxTurnFrames {
			l.bufferSend(s)
			return
		}
		l.sendTurn() // what the pass buffered leaves first
	}
	var err error
	if l.lazy && l.out == transport.Sender(l.n.tr) {
		l.n.sendCoalesced(s.To, l.ns.Name, s.Msg) // coalesce.go
	} else if qs, ok := l.out.(transport.QueuedSender); ok && (l.inbox.len() > 0 || l.n.pool.queued.Load() > 0) {
		// Busy: more inputs wait, and their messages will follow, or
		// other groups wait for a pool worker (sched.go). The writer
		// sends them in batches (one system call for many) instead of
		// the loop writing each itself, which is for an idle node
		// (transport.Transport.Send's inline write; issue 18: inline
		// writes on a loaded leader made its loop the bottleneck).
		err = qs.SendQueued(s.To, l.ns.Name, s.Msg)
	} else {
		err = l.out.Send(s.To, l.ns.Name, s.Msg)
	}
	if err != nil {
		// Drops are counted by the transport; unknown peers are protocol bugs.
		if l.badSends.Add(1) <= 10 {
			l.log.Debug("peer send failed", "to", s.To, "err", err)
		}
		return
	}
	l.msgsOut.Add(1)
	l.mOut.Inc()
	if tr := l.n.opts.trace; tr != nil {
		tr(stageSend, s.To, msgKind(s.Msg))
	}
}

// waiterSet is the clients waiting for one RequestID: almost always one
// (first), held in the map's value so that registering it allocates nothing;
// a retry that shares the id goes to more.
type waiterSet struct {
	first chan automaton.Response
	more  []chan automaton.Response
	// fn is a callback waiter (Node.SubmitReply, replyfn.go), run by
	// respond on the goroutine that responds; t0 its submission time.
	fn func(automaton.Response, error)
	t0 time.Time
	// bfn, with fn batchCallback: a batch's callback (SubmitReplyBatch),
	// answering its request bi; no closure per request.
	bfn func(int, automaton.Response, error)
	bi  int
}

func (w waiterSet) len() int {
	n := 0
	if w.first != nil {
		n = 1 + len(w.more)
	}
	if w.fn != nil {
		n++
	}
	return n
}

// respond hands a response to every client waiting for its RequestID.
func (l *nsLoop) respond(r automaton.Response) {
	l.wmu.Lock()
	ws := l.waiters[r.ID]
	delete(l.waiters, r.ID)
	l.wmu.Unlock()
	if ws.first == nil && ws.fn == nil {
		l.orphans.Add(1) // the client gave up, or a duplicate answer
		return
	}
	if tr := l.n.opts.trace; tr != nil {
		tr(stageRespond, "", 0)
	}
	if ws.first != nil {
		ws.first <- r // buffered, and each waiter receives at most one response
		for _, ch := range ws.more {
			ch <- r
		}
		l.n.handoff(1 + len(ws.more))
	}
	if ws.fn != nil {
		l.call(ws, r) // replyfn.go: here, no hand-off (or set aside)
	}
	n := ws.len()
	l.responses.Add(uint64(n))
	l.mResponses.Add(float64(n))
}

func (l *nsLoop) addWaiter(id automaton.RequestID, ch chan automaton.Response) {
	l.wmu.Lock()
	ws := l.waiters[id]
	if ws.first == nil {
		ws.first = ch
	} else {
		ws.more = append(ws.more, ch)
	}
	l.waiters[id] = ws
	l.wmu.Unlock()
}

func (l *nsLoop) removeWaiter(id automaton.RequestID, ch chan automaton.Response) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	ws := l.waiters[id]
	switch {
	case ws.first == ch:
		ws.first = nil
		if len(ws.more) > 0 {
			ws.first, ws.more = ws.more[0], ws.more[1:]
		}
	default:
		for i, c := range ws.more {
			if c == ch {
				ws.more = append(ws.more[:i:i], ws.more[i+1:]...)
				break
			}
		}
	}
	if ws.first == nil && ws.fn == nil {
		delete(l.waiters, id)
	} else {
		l.waiters[id] = ws
	}
}

func (l *nsLoop) waiting() int {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	n := 0
	for _, ws := range l.waiters {
		n += ws.len()
	}
	return n
}
