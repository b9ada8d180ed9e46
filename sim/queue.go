package sim

import (
	"container/heap"
	"time"

	"github.com/synod-dev/synod/automaton"
)

// evKind is the kind of a scheduled event.
type evKind uint8

const (
	evPeer          evKind = iota // a peer message arrives at node
	evClientReq                   // a client request arrives at node
	evClientResp                  // a response arrives at client
	evTimer                       // a timer of node expires
	evFsync                       // an fsync of node completes
	evClientNext                  // client issues its next operation
	evClientRetry                 // client retries after finding no live node
	evClientTimeout               // client's request attempt times out
	evConnLost                    // client learns that its node crashed
	evNemesis                     // the fault injector acts
	evRestart                     // a crashed node restarts
	evResume                      // a paused node resumes
	evHealPartition               // a partition heals
	evWindowEnd                   // a loss/dup/reorder/slow window ends
	evDeadline                    // MaxTime: stop issuing operations
	evDrainEnd                    // end of the drain period: stop the run
)

// event is one scheduled action. Fields are used according to kind.
type event struct {
	at   time.Duration
	seq  uint64
	kind evKind

	node    int    // target node index
	inc     uint64 // node incarnation the event belongs to
	from    int    // sending node (evPeer)
	msg     []byte // evPeer
	arrived bool   // evPeer/evClientReq queued at a paused node: already past the network
	timer   automaton.TimerID
	gen     uint64 // timer generation, window generation
	upto    uint64 // evFsync: last persist sequence covered
	client  int
	opSeq   uint64 // client events: the operation's sequence number
	attempt int    // client events: the attempt number
	req     automaton.Request
	resp    automaton.Response
	window  windowKind
	effect  *effectDone // evEffect
}

// eventQueue is a min-heap ordered by (at, seq): events at the same virtual
// time run in the order they were scheduled, so the run is deterministic.
type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	*q = old[:n-1]
	return e
}

// schedule queues e at virtual time at.
func (s *simulator) schedule(at time.Duration, e *event) {
	if at < s.now {
		at = s.now
	}
	e.at = at
	s.seq++
	e.seq = s.seq
	heap.Push(&s.q, e)
}

// after queues e d after now.
func (s *simulator) after(d time.Duration, e *event) { s.schedule(s.now+d, e) }
