package node

import (
	"sync"
	"sync/atomic"
)

// inQueue is a loop's queue of inputs (its inbox, its client requests):
// a FIFO bounded at max inputs whose buffer grows on demand (issue 33
// item 1, "idle groups cost next to nothing"). A channel of
// Options.InboxLen events allocates its whole buffer up front, 128 KiB at
// the default 4,096, two per group: about 256 MiB per node at 1,000
// groups that hold a handful of inputs each. Here an empty queue holds no
// buffer; it doubles as inputs come, up to max, and gives its buffer back
// when it empties after holding less than a quarter of it since it last
// emptied (a burst's buffer is not kept by an idle group; a busy group's
// is, so a steady load does not reallocate).
//
// Semantics are a buffered channel's: put waits while max inputs wait
// (backpressure, node/overload.go: a client's request waits for its
// timeout, a peer reader waits and TCP pushes back), and inputs leave in
// the order they were put. Anyone may put; only the loop's pass (under
// nsLoop.pass) takes. size is readable without the lock (hasWork, send):
// put stores it before the caller wakes the loop, so the pool's
// idle-then-hasWork check never misses an input.
type inQueue struct {
	mu   sync.Mutex
	buf  []event // ring: the inputs are buf[(head+i)%len(buf)], i < n
	head int
	n    int
	hw   int // the most inputs held since the queue last emptied
	max  int
	// room, when not nil, is closed by the next take: putters that found
	// the queue full wait on it, then try again.
	room chan struct{}
	size atomic.Int32
}

// minQueueBuf is the first buffer an empty queue allocates, and the size
// up to which a buffer is always kept.
const minQueueBuf = 16

func newInQueue(max int) *inQueue {
	return &inQueue{max: max}
}

// len is the number of inputs waiting (without the lock).
func (q *inQueue) len() int { return int(q.size.Load()) }

// tryPut adds ev unless the queue is full; full, it returns the channel
// that the next take closes.
func (q *inQueue) tryPut(ev event) (room <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n >= q.max {
		if q.room == nil {
			q.room = make(chan struct{})
		}
		return q.room
	}
	if q.n == len(q.buf) {
		q.grow()
	}
	q.buf[(q.head+q.n)%len(q.buf)] = ev
	q.n++
	q.hw = max(q.hw, q.n)
	q.size.Store(int32(q.n))
	return nil
}

// grow doubles the buffer (at most to max), keeping the order. Under mu.
func (q *inQueue) grow() {
	c := min(max(2*len(q.buf), minQueueBuf), q.max)
	nb := make([]event, c)
	k := copy(nb, q.buf[q.head:])
	copy(nb[k:], q.buf[:q.head])
	q.buf, q.head = nb, 0
}

// put adds ev, waiting while the queue is full until it has room or one
// of a, b, c is closed (nil: never). It returns -1 once ev is in, or
// which of a (0), b (1), c (2) ended the wait (ev is then not in).
func (q *inQueue) put(ev event, a, b, c <-chan struct{}) int {
	for {
		room := q.tryPut(ev)
		if room == nil {
			return -1
		}
		select {
		case <-room:
		case <-a:
			return 0
		case <-b:
			return 1
		case <-c:
			return 2
		}
	}
}

// take removes the oldest input; ok false when the queue is empty (or
// q is nil). Under the loop's pass.
func (q *inQueue) take() (ev event, ok bool) {
	if q == nil || q.size.Load() == 0 {
		return event{}, false // nothing (a put after this load wakes the loop again)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		return event{}, false
	}
	ev = q.buf[q.head]
	q.buf[q.head] = event{}
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	q.size.Store(int32(q.n))
	if q.room != nil {
		close(q.room)
		q.room = nil
	}
	if q.n == 0 {
		q.head = 0
		if len(q.buf) > minQueueBuf && 4*q.hw <= len(q.buf) {
			q.buf = nil
		}
		q.hw = 0
	}
	return ev, true
}
