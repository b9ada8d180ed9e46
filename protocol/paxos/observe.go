package paxos

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
)

// Observation hook for experiments (package doc, "Parameters"; the same as
// protocol/fastpaxos's, on protocol/proto's Recorder): a run whose parameter
// observe names a Recorder (NewRecorder) reports, through Recorder.OnEvent,
// each instance a replica learns chosen, with the requests of its value.
// Observation only: nothing the automaton does depends on it, and without
// the parameter nothing is called (behaviour and digests unchanged). The
// automaton has no clock: a caller that wants times stamps the events
// itself (experiment seed002-fast-vs-classic-sim stamps them with the
// simulator's virtual time, the Grid Services thesis chapter V.B's time to learn L_c).

// How says how a replica learned an instance chosen.
type How int

const (
	// ByQuorum: the leader counted a majority of acceptances (phase 2b,
	// checkChosen): the seed's learner at the leader.
	ByQuorum How = iota
	// ByCommit: a commit notice on an Accept or heartbeat (learnCommit).
	ByCommit
	// ByCatchup: entries fetched from a peer (onCatchup).
	ByCatchup
)

// Event is one instance learned chosen at Node, once per incarnation (a
// restarted replica that learns it again reports it again). Reqs are the
// requests of its value, in batch order (none for a no-op or an
// undecodable value). The events of one step come in no particular order.
type Event struct {
	Node automaton.NodeID
	Inst uint64
	How  How
	Reqs []automaton.RequestID
}

// Recorder collects the events of the runs whose parameter observe names it.
type Recorder = proto.Recorder[Event]

var recorders proto.Recorders[Event]

// NewRecorder registers a recorder under name (replacing any).
func NewRecorder(name string) *Recorder { return recorders.New(name) }

// DropRecorder forgets the recorder of name.
func DropRecorder(name string) { recorders.Drop(name) }

// observe reports that instance i, holding val, was learned chosen here.
func (a *Paxos) observe(i uint64, how How, val []byte) {
	if a.rec == nil {
		return
	}
	e := Event{Node: a.cfg.Self, Inst: i, How: how}
	if cmds, err := decodeBatch(val); err == nil {
		for _, c := range cmds {
			e.Reqs = append(e.Reqs, c.ID)
		}
	}
	a.rec.Emit(e)
}
