package pb

import (
	"fmt"
	"hash/fnv"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// The replicated state (the Grid Services thesis III.B: what extract_state and
// inject_state move): the service state, the count of entries applied, a
// digest chain over them, and the duplicate table. The table is part of
// the replicated state, so that a request resubmitted to a new primary
// after a fail-over gets "the result computed by the old primary" (III.A)
// instead of running again.

// dedupWindow is how many write outcomes are kept per client (a gateway
// connection has at most 32 requests in flight, the simulator's clients one).
const dedupWindow = 64

// dedupClients bounds the table's rows; beyond it the least recently active
// tenth is evicted, deterministically (by last index, then id).
const dedupClients = 100000

// recorded is a write's outcome and the index of its entry.
type recorded struct {
	out   outcome
	index uint64
}

// session is one client's row (proto.Session): its recent writes'
// outcomes by sequence number, and Last the index of its latest write.
type session = proto.Session[recorded]

type machine struct {
	svc     service.Service
	st      service.State
	applied uint64 // entries applied
	chain   uint64 // digest chain over entries 1..applied
	clients proto.Sessions[recorded]
	// closed: the clients whose session ended (automaton.SessionEnd), by
	// id, with the index of the entry that ended it; a later write under
	// the id is refused, never executed (package doc, "Client sessions").
	// Bounded as the rows are: beyond dedupClients the oldest tenth goes.
	closed map[uint64]uint64
}

func newMachine(svc service.Service) *machine {
	return &machine{svc: svc, st: svc.NewState(), clients: proto.Sessions[recorded]{}, closed: map[uint64]uint64{}}
}

// lookup returns the recorded outcome of write id.
func (m *machine) lookup(id automaton.RequestID) (recorded, bool) {
	return m.clients.Lookup(id)
}

// refused answers a write the table can no longer run: one below its
// client's window or bound (its outcome forgotten), or of a client whose
// session ended. It is answered with an error, never executed.
func (m *machine) refused(id automaton.RequestID) (service.Result, bool) {
	if m.clients.Forgotten(id) {
		return service.Errorf("ERR request %v is below what its client still waits for, or older than its duplicate window (%d writes): its outcome is forgotten and it was not executed", id, dedupWindow), true
	}
	if _, gone := m.closed[id.Client]; gone && m.clients[id.Client] == nil {
		return service.Errorf("ERR request %v: its client's session ended; it was not executed", id), true
	}
	return service.Result{}, false
}

// record notes entry e's write in the table (the same on every replica:
// the request's bound and a session end are part of the entry): a
// session end removes the client's row and leaves a tombstone; a write
// drops its client's outcomes below the bound, then records its own.
func (m *machine) record(e entry) {
	id := e.id
	if e.end {
		delete(m.clients, id.Client)
		if _, ok := m.closed[id.Client]; !ok {
			m.closed[id.Client] = e.index
			m.evictClosed()
		}
		return
	}
	s, created := m.clients.Row(id.Client, dedupWindow)
	if created {
		m.evict()
	}
	if e.low > 0 {
		s.ForgetBelow(min(e.low, id.Seq)) // a request waits for itself
	}
	s.Record(id.Seq, recorded{out: e.out, index: e.index}, e.index, dedupWindow)
}

func (m *machine) evict() {
	if len(m.clients) <= dedupClients {
		return
	}
	m.clients.EvictIdle(len(m.clients) / 10)
}

// evictClosed keeps the tombstones within dedupClients
// (proto.EvictTombstones).
func (m *machine) evictClosed() { proto.EvictTombstones(m.closed, dedupClients) }

// entry is one state update: the change one write made at the primary.
type entry struct {
	index   uint64
	id      automaton.RequestID
	full    bool   // payload is a snapshot
	payload []byte // delta or snapshot
	out     outcome
	chain   uint64 // the digest chain after it (local, not sent)
	// Client sessions (package doc): low is the request's
	// automaton.Request.Unanswered (0: not told), end marks a session end
	// (no state change: payload empty). Both travel after the outcome,
	// only when set, so an entry without them is encoded as before.
	low uint64
	end bool
}

// encodeSession appends an entry's session fields when set (encodeEntry's
// and the update message's tail).
func encodeSession(w *wire.Encoder, low uint64, end bool) {
	if low > 0 || end {
		w.Uvarint(low)
		w.Bool(end)
	}
}

// decodeSession reads what encodeSession wrote, if anything is left.
func decodeSession(d *wire.Decoder) (low uint64, end bool) {
	if d.Err() == nil && len(d.B) > 0 {
		return d.Uvarint(), d.Bool()
	}
	return 0, false
}

// digest chains entry e onto chain c: the index, the request, the payload
// and the outcome, so that two replicas with equal chains applied the same
// updates.
func digest(c uint64, e entry) uint64 {
	h := fnv.New64a()
	w := wire.Encoder{B: make([]byte, 0, 32+len(e.payload))}
	w.Uvarint(c)
	w.Uvarint(e.index)
	w.Uvarint(e.id.Client)
	w.Uvarint(e.id.Seq)
	w.Bool(e.full)
	w.Bytes(e.payload)
	encodeOutcome(&w, e.out)
	encodeSession(&w, e.low, e.end)
	h.Write(w.B)
	return h.Sum64()
}

// execute runs a write at the primary (the Grid Services thesis III.B, EXECUTE: service.op
// then extract_state): the operations in the request's environment, then
// the change as a delta since the version before (service.DeltaState) or,
// for services without deltas, the whole resulting state. It returns the
// entry, not yet applied to the chain or the table (apply does that).
func (m *machine) execute(req automaton.Request) entry {
	if automaton.IsSessionEnd(req.Op) && len(req.Ops) == 0 {
		return entry{index: m.applied + 1, id: req.ID, out: outcome{res: service.OK()}, end: true}
	}
	var since uint64
	ds, delta := m.st.(service.DeltaState)
	if delta {
		since = ds.Version()
	}
	var out outcome
	if len(req.Ops) > 0 {
		out = outcome{res: service.OK(), results: automaton.ApplyGroup(m.st, req.Ops, req.Env)}
	} else {
		out = outcome{res: service.ApplyEnv(m.st, req.Op, req.Env)}
	}
	e := entry{index: m.applied + 1, id: req.ID, out: out, low: req.Unanswered}
	if delta {
		if d, err := ds.Delta(since); err == nil {
			e.payload = d
			return e
		}
	}
	e.full, e.payload = true, m.st.Snapshot()
	return e
}

// commitLocal counts an entry the primary executed itself.
func (m *machine) commitLocal(e entry) {
	m.applied = e.index
	m.chain = digest(m.chain, e)
	m.record(e)
}

// inject applies an entry made by the primary (the Grid Services thesis III.B,
// STATE_HANDLER: inject_state). An error means the update does not fit the
// state (it cannot happen between replicas of one view); the caller then
// rejoins.
func (m *machine) inject(e entry) error {
	if e.index != m.applied+1 {
		return fmt.Errorf("entry %d on a state at %d", e.index, m.applied)
	}
	var err error
	if e.end {
		// a session end changes no state
	} else if e.full {
		err = m.st.Restore(e.payload)
	} else if ds, ok := m.st.(service.DeltaState); ok {
		err = ds.ApplyDelta(e.payload)
	} else {
		err = fmt.Errorf("a delta for a service without deltas")
	}
	if err != nil {
		return err
	}
	m.commitLocal(e)
	return nil
}

// read answers a read-only request from the state.
func (m *machine) read(req automaton.Request) outcome {
	if len(req.Ops) > 0 {
		return outcome{res: service.OK(), results: automaton.ApplyGroup(m.st, req.Ops, req.Env)}
	}
	return outcome{res: service.ApplyEnv(m.st, req.Op, req.Env)}
}

// encode is the state transfer's image: applied, chain, the duplicate
// table (clients by id) and the service snapshot.
func (m *machine) encode() []byte {
	snap := m.st.Snapshot()
	e := recordHeader.Record(64 + len(snap))
	e.Uvarint(m.applied)
	e.Uvarint(m.chain)
	ids := m.clients.IDs()
	e.Uvarint(uint64(len(ids)))
	for _, id := range ids {
		s := m.clients[id]
		e.Uvarint(id)
		e.Uvarint(s.Floor)
		e.Uvarint(s.Last)
		e.Uvarint(uint64(len(s.Seqs)))
		for _, seq := range s.Seqs {
			r := s.Res[seq]
			e.Uvarint(seq)
			e.Uvarint(r.index)
			encodeOutcome(&e, r.out)
		}
	}
	e.Bytes(snap)
	// The tombstones (client sessions), after the snapshot and only when
	// there are any: an image without them is encoded as before.
	proto.EncodeTombstones(&e, m.closed)
	return e.B
}

// decodeMachine restores an image encode made.
func decodeMachine(svc service.Service, b []byte) (*machine, error) {
	d, err := recordHeader.OpenRecord(b, "state image")
	if err != nil {
		return nil, err
	}
	m := newMachine(svc)
	m.applied = d.Uvarint()
	m.chain = d.Uvarint()
	n := d.Count(1<<30, 4)
	for i := 0; i < n && d.Err() == nil; i++ {
		id := d.Uvarint()
		s := &session{Floor: d.Uvarint(), Last: d.Uvarint(), Res: map[uint64]recorded{}}
		k := d.Count(dedupWindow+1, 3)
		for j := 0; j < k && d.Err() == nil; j++ {
			seq := d.Uvarint()
			r := recorded{index: d.Uvarint()}
			r.out = decodeOutcome(d)
			s.Res[seq] = r
			s.Seqs = append(s.Seqs, seq)
		}
		m.clients[id] = s
	}
	snap := d.Bytes()
	if closed := proto.DecodeTombstones(d); closed != nil {
		m.closed = closed
	}
	if err := d.Done(); err != nil {
		return nil, err
	}
	if err := m.st.Restore(snap); err != nil {
		return nil, err
	}
	return m, nil
}
