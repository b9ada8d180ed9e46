package fastpaxos

import (
	"sync"

	"github.com/synod-dev/synod/automaton"
)

// Observation hook for experiments (package doc, "Statistics"): a run whose
// parameter observe names a Recorder (NewRecorder) reports each node's Stats
// after every step and, through Recorder.OnEvent, each vote an acceptor
// casts and each instance a learner learns. Observation only: nothing the
// automata do depends on it, and without the parameter nothing is called
// (behaviour and digests unchanged). An automaton has no clock: a caller
// that wants times stamps the events itself (the simulator's trace gives
// the virtual time of the step in progress).

// EventKind says what an Event reports.
type EventKind int

const (
	// Voted: Node's acceptor voted at Inst (phase 2b), Fast when in a fast
	// round.
	Voted EventKind = iota
	// Learned: Node's learner learned Inst from a quorum of votes, Fast
	// when from a fast quorum of a fast round.
	Learned
)

// Event is one observed vote or learning. Req is the request of the value
// (NoOp: the recovery's no-op).
type Event struct {
	Kind EventKind
	Node automaton.NodeID
	Inst uint64
	Fast bool
	Req  automaton.RequestID
	NoOp bool
}

// Recorder collects the nodes' Stats and events of the runs whose parameter
// observe names it. OnEvent, when set before the run, is called for every
// event, from the step that caused it (the simulator steps one node at a
// time; live nodes call it concurrently under the recorder's lock).
type Recorder struct {
	mu      sync.Mutex
	last    map[automaton.NodeID]Stats
	OnEvent func(Event)
}

var recorders sync.Map // name -> *Recorder

// NewRecorder registers a recorder under name (replacing any).
func NewRecorder(name string) *Recorder {
	r := &Recorder{last: map[automaton.NodeID]Stats{}}
	recorders.Store(name, r)
	return r
}

// DropRecorder forgets the recorder of name.
func DropRecorder(name string) { recorders.Delete(name) }

func lookupRecorder(name string) *Recorder {
	r, _ := recorders.Load(name)
	rec, _ := r.(*Recorder)
	return rec
}

// Nodes returns each node's latest Stats (its current incarnation).
func (r *Recorder) Nodes() map[automaton.NodeID]Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[automaton.NodeID]Stats, len(r.last))
	for k, v := range r.last {
		out[k] = v
	}
	return out
}

func (r *Recorder) record(n automaton.NodeID, s Stats) {
	r.mu.Lock()
	r.last[n] = s
	r.mu.Unlock()
}

func (r *Recorder) event(e Event) {
	if r.OnEvent == nil {
		return
	}
	r.mu.Lock()
	r.OnEvent(e)
	r.mu.Unlock()
}

// observe reports an event of kind k about instance i's value val.
func (a *FastPaxos) observe(k EventKind, i uint64, b Ballot, val []byte) {
	if a.rec == nil {
		return
	}
	id, ok := valueID(val)
	a.rec.event(Event{Kind: k, Node: a.cfg.Self, Inst: i, Fast: isFast(b), Req: id, NoOp: !ok})
}
