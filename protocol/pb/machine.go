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
}

func newMachine(svc service.Service) *machine {
	return &machine{svc: svc, st: svc.NewState(), clients: proto.Sessions[recorded]{}}
}

// lookup returns the recorded outcome of write id.
func (m *machine) lookup(id automaton.RequestID) (recorded, bool) {
	return m.clients.Lookup(id)
}

// forgotten reports whether id is below its client's window.
func (m *machine) forgotten(id automaton.RequestID) bool {
	return m.clients.Forgotten(id)
}

// record notes write id's outcome at entry index (the same on every replica:
// it is part of the entry).
func (m *machine) record(id automaton.RequestID, out outcome, index uint64) {
	s, created := m.clients.Row(id.Client, dedupWindow)
	if created {
		m.evict()
	}
	s.Record(id.Seq, recorded{out: out, index: index}, index, dedupWindow)
}

func (m *machine) evict() {
	if len(m.clients) <= dedupClients {
		return
	}
	m.clients.EvictIdle(len(m.clients) / 10)
}

// entry is one state update: the change one write made at the primary.
type entry struct {
	index   uint64
	id      automaton.RequestID
	full    bool   // payload is a snapshot
	payload []byte // delta or snapshot
	out     outcome
	chain   uint64 // the digest chain after it (local, not sent)
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
	h.Write(w.B)
	return h.Sum64()
}

// execute runs a write at the primary (the Grid Services thesis III.B, EXECUTE: service.op
// then extract_state): the operations in the request's environment, then
// the change as a delta since the version before (service.DeltaState) or,
// for services without deltas, the whole resulting state. It returns the
// entry, not yet applied to the chain or the table (apply does that).
func (m *machine) execute(req automaton.Request) entry {
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
	e := entry{index: m.applied + 1, id: req.ID, out: out}
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
	m.record(e.id, e.out, e.index)
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
	if e.full {
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
	if err := d.Done(); err != nil {
		return nil, err
	}
	if err := m.st.Restore(snap); err != nil {
		return nil, err
	}
	return m, nil
}
