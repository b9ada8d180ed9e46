package node

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/storage"
)

// event is one input for a namespace's event loop.
type event struct {
	in  automaton.Input
	gen uint64 // TimerFired only: the generation of the timer that fired
}

type timerEntry struct {
	gen uint64
	t   *time.Timer
}

// nsLoop runs one namespace's automaton. Fields under "loop only" are touched
// only by the loop goroutine.
type nsLoop struct {
	n     *Node
	ns    config.Namespace
	svc   service.Service
	a     automaton.Automaton
	store storage.Store
	log   *slog.Logger
	inbox chan event

	// loop only
	timers   map[automaton.TimerID]*timerEntry
	gen      uint64
	persists []automaton.Persist
	pending  []automaton.Output // Sends and Responds, in emission order
	steps    int

	wmu     sync.Mutex
	waiters map[automaton.RequestID][]chan automaton.Response

	requests, responses, orphans       atomic.Uint64
	persisted, fsyncs, msgsIn, msgsOut atomic.Uint64
	badSends                           atomic.Uint64

	mRequests, mResponses, mPersists, mFsyncs, mIn, mOut prometheus.Counter
	mLatency, mCommit, mBatchIn, mBatchPersist           prometheus.Observer
}

func (n *Node) newLoop(ns config.Namespace, svc service.Service, a automaton.Automaton) *nsLoop {
	l := &nsLoop{
		n: n, ns: ns, svc: svc, a: a,
		log:     n.log.With("namespace", ns.Name),
		inbox:   make(chan event, n.opts.InboxLen),
		timers:  map[automaton.TimerID]*timerEntry{},
		waiters: map[automaton.RequestID][]chan automaton.Response{},
	}
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

// push hands an input to the loop, waiting while the inbox is full. It returns
// false when the node is stopping.
func (l *nsLoop) push(ev event) bool {
	select {
	case l.inbox <- ev:
		return true
	case <-l.n.stopping:
		return false
	}
}

// run is the event loop. It steps the automaton with Start, then repeatedly:
// takes one input (waiting for it), takes every further input that is already
// queued (up to BatchLimit), commits the batch's Persist records in one storage
// batch, and only then releases the batch's Sends and Responds, in order.
func (l *nsLoop) run(start automaton.Start) {
	defer l.n.wg.Done()
	defer l.stopTimers()
	l.step(event{in: start})
	if !l.flush() {
		return
	}
	for {
		select {
		case ev := <-l.inbox:
			l.step(ev)
		case <-l.n.stopping:
			return
		}
	more:
		for l.steps < l.n.opts.BatchLimit {
			select {
			case ev := <-l.inbox:
				l.step(ev)
			default:
				break more
			}
		}
		if !l.flush() {
			return
		}
	}
}

func (l *nsLoop) step(ev event) {
	if tf, ok := ev.in.(automaton.TimerFired); ok {
		e := l.timers[tf.ID]
		if e == nil || e.gen != ev.gen {
			return // cancelled or replaced after it fired
		}
		delete(l.timers, tf.ID)
	}
	l.steps++
	for _, o := range l.a.Step(ev.in) {
		switch o := o.(type) {
		case automaton.Persist:
			l.persists = append(l.persists, o)
		case automaton.Send, automaton.Respond:
			l.pending = append(l.pending, o)
		case automaton.SetTimer:
			l.setTimer(o)
		case automaton.CancelTimer:
			if e := l.timers[o.ID]; e != nil {
				e.t.Stop()
				delete(l.timers, o.ID)
			}
		default:
			l.log.Error("automaton emitted an unknown output; ignored", "output", o)
		}
	}
}

func (l *nsLoop) setTimer(o automaton.SetTimer) {
	if e := l.timers[o.ID]; e != nil {
		e.t.Stop()
	}
	l.gen++
	ev := event{in: automaton.TimerFired{ID: o.ID}, gen: l.gen}
	// A Stop that loses the race with the timer leaves a stale event in the
	// inbox; step drops it because its generation no longer matches.
	l.timers[o.ID] = &timerEntry{gen: l.gen, t: time.AfterFunc(max(o.After, 0), func() { l.push(ev) })}
}

func (l *nsLoop) stopTimers() {
	for id, e := range l.timers {
		e.t.Stop()
		delete(l.timers, id)
	}
}

// flush makes the batch's records durable, then releases its outputs. It
// returns false after a storage failure, which ends the loop (and the node).
func (l *nsLoop) flush() bool {
	if l.steps > 0 {
		l.mBatchIn.Observe(float64(l.steps))
		l.steps = 0
	}
	if len(l.persists) > 0 {
		t0 := time.Now()
		err := l.store.Commit(l.persists)
		if err != nil {
			// The batch's outputs are never released: a client must not see an
			// answer, nor a peer a message, that depends on a lost record.
			l.n.fatal(l.ns.Name, err)
			return false
		}
		l.mCommit.Observe(time.Since(t0).Seconds())
		l.mBatchPersist.Observe(float64(len(l.persists)))
		l.persisted.Add(uint64(len(l.persists)))
		l.mPersists.Add(float64(len(l.persists)))
		if l.n.durable {
			l.fsyncs.Add(1)
			l.mFsyncs.Inc()
		}
		clear(l.persists)
		l.persists = l.persists[:0]
	}
	for _, o := range l.pending {
		switch o := o.(type) {
		case automaton.Send:
			l.send(o)
		case automaton.Respond:
			l.respond(o.Resp)
		}
	}
	clear(l.pending)
	l.pending = l.pending[:0]
	return true
}

func (l *nsLoop) send(s automaton.Send) {
	if s.To == l.n.id {
		l.badSends.Add(1)
		l.log.Error("automaton sent a message to itself; dropped (protocol bug)", "to", s.To)
		return
	}
	if err := l.n.tr.Send(s.To, l.ns.Name, s.Msg); err != nil {
		// Drops are counted by the transport; unknown peers are protocol bugs.
		if l.badSends.Add(1) <= 10 {
			l.log.Debug("peer send failed", "to", s.To, "err", err)
		}
		return
	}
	l.msgsOut.Add(1)
	l.mOut.Inc()
}

// respond hands a response to every client waiting for its RequestID.
func (l *nsLoop) respond(r automaton.Response) {
	l.wmu.Lock()
	ws := l.waiters[r.ID]
	delete(l.waiters, r.ID)
	l.wmu.Unlock()
	if len(ws) == 0 {
		l.orphans.Add(1) // the client gave up, or a duplicate answer
		return
	}
	for _, ch := range ws {
		ch <- r // buffered, and each waiter receives at most one response
	}
	l.responses.Add(uint64(len(ws)))
	l.mResponses.Add(float64(len(ws)))
}

func (l *nsLoop) addWaiter(id automaton.RequestID, ch chan automaton.Response) {
	l.wmu.Lock()
	l.waiters[id] = append(l.waiters[id], ch)
	l.wmu.Unlock()
}

func (l *nsLoop) removeWaiter(id automaton.RequestID, ch chan automaton.Response) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	ws := l.waiters[id]
	for i, c := range ws {
		if c == ch {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
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
		n += len(ws)
	}
	return n
}
