package abd

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// The client's coordinator (the ABD report §3.1.2, the "ABD capable client"), as
// a pure state machine (automaton.ClientCoordinator) that the simulator
// (sim --client-driven) and the Go client (client.ABD) both drive.
//
//   - Write (set KEY VALUE, del KEY): query every replica, wait for a
//     majority, take the highest tag (ts, w); store (value or tombstone)
//     with (ts+1, this client's writer id, the operation's sequence
//     number), wait for a majority; answer. DEL answers 1 when the highest
//     tag held a value (a hint, as for the node's coordinator).
//   - Read (get, exists): query, take the highest tag; unless a majority of
//     the answers already carries it, store it back (the write-back the
//     seed's read lacks, §3.1.2: without it reads are not linearizable);
//     answer its value. abd-broken-clientnowriteback skips the write-back.
//
// A phase's answers are counted once per replica; the phase ends with the
// first majority, (N/2)+1 (the seed's semaphore). Retrying a phase is safe:
// a query has no effect, and a store of one tag installs one value however
// often it arrives.

// Coordinate implements automaton.ClientCoordinator.
func (p protocol) Coordinate(op service.Op, writer, seq uint64, n int) (automaton.Coordination, error) {
	return NewCoordinator(op, ClientWriter(writer), seq, n, p.clientNoWriteBack)
}

// Coordinator runs one client-driven operation (see above).
type Coordinator struct {
	op        service.Op
	write     bool
	writer    string
	seq       uint64
	n, quorum int
	noWB      bool // broken: reads never write back

	phase    automaton.CoordPhase
	storing  bool // the current phase is a store
	done     bool
	result   service.Result
	answered []bool // n places, cleared per phase
	got      int
	// The query phase's highest answer and how many answers carry its tag.
	max  QueryAnswer
	nMax int
}

// NewCoordinator returns the coordinator of op (get, exists, set KEY VALUE
// or del KEY) for the writer id writer (ClientWriter), sequence number seq
// and n replicas. noWriteBack makes reads skip the write-back (the seed's
// one-phase read; broken, for the checkers).
func NewCoordinator(op service.Op, writer string, seq uint64, n int, noWriteBack bool) (*Coordinator, error) {
	c := &Coordinator{op: op, writer: writer, seq: seq, n: n, quorum: automaton.Majority(n), noWB: noWriteBack}
	switch {
	case op.Kind == "get" || op.Kind == "exists":
	case (op.Kind == "set" && len(op.Args) == 1) || op.Kind == "del":
		c.write = true
	default:
		return nil, fmt.Errorf("abd: client-driven ABD runs get, exists, set KEY VALUE and del KEY, not %s with %d arguments", op.Kind, len(op.Args))
	}
	if n < 1 {
		return nil, fmt.Errorf("abd: client-driven ABD needs at least one replica, got %d", n)
	}
	c.answered = make([]bool, n)
	c.startPhase(automaton.CoordPhase{Name: PhaseQuery, Op: service.Op{Kind: "get", Key: op.Key}, Ext: queryPhaseExt})
	return c, nil
}

// A query phase's options, shared by every coordinator, and a store
// phase's abd.phase list: a phase's Ext is read, never changed, by its
// users (the Go client, the simulator; automaton.Options are copied on
// write), so a put makes one options map (its store's) instead of two.
var (
	queryPhaseExt = map[string][]string{OptPhase: {PhaseQuery}}
	storePhase    = []string{PhaseStore}
)

// Phase implements automaton.Coordination.
func (c *Coordinator) Phase() automaton.CoordPhase { return c.phase }

// Done implements automaton.Coordination.
func (c *Coordinator) Done() bool { return c.done }

// Result implements automaton.Coordination.
func (c *Coordinator) Result() service.Result { return c.result }

// Write reports whether the operation writes; a write whose store phase
// was sent and did not complete has an unknown outcome.
func (c *Coordinator) Write() bool { return c.write }

// Storing reports whether the current phase is a store.
func (c *Coordinator) Storing() bool { return c.storing }

func (c *Coordinator) startPhase(p automaton.CoordPhase) {
	c.phase = p
	c.storing = p.Ext[OptPhase][0] == PhaseStore
	clear(c.answered)
	c.got = 0
}

// Answer implements automaton.Coordination.
func (c *Coordinator) Answer(replica int, res service.Result) (bool, error) {
	if c.done || replica < 0 || replica >= c.n || c.answered[replica] {
		return false, nil
	}
	if res.IsErr() {
		return false, fmt.Errorf("abd: replica %d answered the %s phase with %s", replica, c.phase.Name, res.Err)
	}
	if c.storing {
		if res.Type != service.ResultOK {
			return false, fmt.Errorf("abd: replica %d acknowledged a store with %v", replica, res)
		}
		return c.counted(replica), nil
	}
	q, err := ParseQueryAnswer(res)
	if err != nil {
		return false, fmt.Errorf("abd: replica %d: %w", replica, err)
	}
	return c.AnswerQuery(replica, q)
}

// AnswerQuery is Answer with a query phase's answer already read (the Go
// client reads its replies' tag and value without making the [tag, value]
// result ParseQueryAnswer reads): the coordinator keeps q.Value.
func (c *Coordinator) AnswerQuery(replica int, q QueryAnswer) (bool, error) {
	if c.done || replica < 0 || replica >= c.n || c.answered[replica] {
		return false, nil
	}
	if c.storing {
		return false, fmt.Errorf("abd: replica %d answered the %s phase with a query's answer", replica, c.phase.Name)
	}
	switch {
	case c.got == 0 || c.max.Tag.Less(q.Tag, false):
		c.max, c.nMax = q, 1
	case q.Tag == c.max.Tag:
		c.nMax++
	}
	return c.counted(replica), nil
}

// counted counts replica's answer to the current phase and reports
// whether it ended the phase (a majority).
func (c *Coordinator) counted(replica int) bool {
	c.answered[replica] = true
	c.got++
	if c.got < c.quorum {
		return false
	}
	if c.storing {
		c.finish()
		return true
	}
	c.queried()
	return true
}

// queried ends the query phase with a majority's answers (the ABD report
// §3.1.2): a write stores with a higher tag; a read writes back the
// highest tag unless a majority already carries it.
func (c *Coordinator) queried() {
	if c.write {
		c.startStore(Tag{TS: c.max.Tag.TS + 1, Node: c.writer, Seq: c.seq}, c.op.Kind == "del", valueOf(c.op))
		return
	}
	if c.nMax >= c.quorum || c.noWB {
		c.finish()
		return
	}
	c.startStore(c.max.Tag, c.max.Tomb, c.max.Value)
}

func valueOf(op service.Op) []byte {
	if op.Kind == "set" {
		return op.Args[0]
	}
	return nil
}

// startStore starts the store phase of (tag, value), or of a tombstone.
func (c *Coordinator) startStore(tag Tag, tomb bool, value []byte) {
	op := service.Op{Kind: "set", Key: c.op.Key, Args: [][]byte{value}}
	if tomb {
		op = service.Op{Kind: "del", Key: c.op.Key}
	}
	c.startPhase(automaton.CoordPhase{Name: PhaseStore, Op: op,
		Ext: map[string][]string{OptPhase: storePhase, OptTag: {FormatTag(tag)}}})
}

// finish sets the operation's answer from the query phase's highest tag.
func (c *Coordinator) finish() {
	c.done = true
	switch {
	case c.op.Kind == "set":
		c.result = service.OK()
	case c.op.Kind == "del" || c.op.Kind == "exists":
		c.result = service.Int(0)
		if c.max.Present() {
			c.result = service.Int(1)
		}
	case c.max.Present():
		c.result = service.Bytes(c.max.Value)
	default:
		c.result = service.Nil()
	}
}
