package paxos

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// dedupWindow is how many write results are kept per client. A gateway
// connection has at most 32 requests in flight, the simulator's clients one.
const dedupWindow = 64

// outcome is the answer to one command: its result, and for an atomic group
// one result per operation (Result is then OK; automaton.Response).
type outcome struct {
	res     service.Result
	results []service.Result
}

// session is one client's row in the deduplication table (proto.Session):
// the outcomes of its most recent writes (single writes and groups that
// write), by sequence number, and Last the instance of its latest write.
type session = proto.Session[outcome]

// machine is the replicated state machine: the service state plus the
// deduplication table. Every replica applies the same commands in the same
// order, so every replica holds the same table.
type machine struct {
	svc        service.Service
	st         service.State
	clients    proto.Sessions[outcome]
	maxClients int
	// closed: the clients whose session ended (automaton.SessionEnd), by
	// id, with the instance it ended at; a later write under the id is
	// refused, never executed. At most maxClients, the oldest forgotten
	// first (evictClosed).
	closed map[uint64]uint64
	// dropEarly: paxos-broken-dropearly (broken_dropearly.go).
	dropEarly bool
	// conf is the configuration after the executed prefix (membership.go).
	conf *conf
	// parts: the results so far of groups executed part by part
	// (paxos-broken-splitgroup only; not in snapshots).
	parts map[automaton.RequestID][]service.Result
	// owner is the token of the automaton that may change the machine in
	// place; any other shares it read-only and copies it before a change
	// (Paxos.ownMachine: CloneModel shares the machine, which most steps
	// do not change).
	owner *ownerToken
}

// ownerToken is an automaton's identity as a machine's owner: a token,
// not a pointer to the automaton, so that mc's reflective walk hashes
// every token alike (its content) and its copier maps an automaton's and
// its machine's tokens to one new token.
type ownerToken struct{ _ byte }

// ownMachine returns a.sm to be changed in place: first a copy of a's own
// when a shares it with the automaton it was copied from (CloneModel).
func (a *Paxos) ownMachine() *machine {
	if a.sm.owner != a.tok {
		a.sm = a.sm.cloneModel()
		a.sm.owner = a.tok
	}
	return a.sm
}

func newMachine(svc service.Service, maxClients int, boot *conf) *machine {
	return &machine{svc: svc, st: svc.NewState(), clients: proto.Sessions[outcome]{}, maxClients: maxClients, conf: boot}
}

// lookup returns the remembered outcome of a write, if the table has it.
func (m *machine) lookup(id automaton.RequestID) (outcome, bool) {
	return m.clients.Lookup(id)
}

// reads reports whether command c only reads (a group: every operation).
func (m *machine) reads(c cmd) bool {
	if len(c.Ops) > 0 {
		for _, op := range c.Ops {
			if !m.svc.IsRead(op) {
				return false
			}
		}
		return true
	}
	return !automaton.IsMemberOp(c.Op) && !automaton.IsSessionEnd(c.Op) && m.svc.IsRead(c.Op)
}

// run applies c's operations to the service state in c's environment: an
// atomic group through automaton.ApplyGroup, in one go, so nothing
// interleaves (the Grid Services thesis VI: one log value, one state transition).
func (m *machine) run(c cmd) outcome {
	if len(c.Ops) > 0 {
		return outcome{res: service.OK(), results: automaton.ApplyGroup(m.st, c.Ops, c.Env)}
	}
	return outcome{res: service.ApplyEnv(m.st, c.Op, c.Env)}
}

// apply executes one command of instance i exactly once: a write (or a
// group that writes) already in the table returns its first outcome; a
// write the table forgot (below the client's lowest unanswered request, or
// older than its window) or of a client whose session ended is refused
// with an error and not applied (package doc, "Client sessions"). Reads
// are not recorded: running one twice has no effect; except a nested read
// (the Eve/Adam thesis §3), recorded like a write so that every copy of
// its id gets the first answer. done is false only for a part of a group
// that paxos-broken-splitgroup executes part by part, before its last
// part.
func (m *machine) apply(c cmd, i uint64) (r outcome, done bool) {
	if c.parts > 0 {
		return m.applyPart(c, i)
	}
	if automaton.IsSessionEnd(c.Op) && len(c.Ops) == 0 {
		return m.endSession(c.ID.Client, i), true
	}
	s := m.clients[c.ID.Client]
	if s != nil && c.low > 0 {
		m.forget(s, min(c.low, c.ID.Seq)) // a request waits for itself
	}
	if m.reads(c) && !c.nested {
		return m.run(c), true
	}
	if s != nil {
		if r, ok := s.Get(c.ID.Seq); ok {
			return r, true
		}
		if s.Forgotten(c.ID.Seq) {
			return outcome{res: service.Errorf("ERR request %v is below what its client still waits for, or older than its deduplication window (%d writes): its outcome is forgotten and it was not executed", c.ID, dedupWindow)}, true
		}
	} else {
		if _, gone := m.closed[c.ID.Client]; gone {
			return outcome{res: service.Errorf("ERR request %v: its client's session ended; it was not executed", c.ID)}, true
		}
		s = m.newSession(c.ID.Client)
	}
	if automaton.IsMemberOp(c.Op) && len(c.Ops) == 0 {
		r = outcome{res: m.applyChange(c.Op, i)}
	} else {
		r = m.run(c)
	}
	m.record(s, c.ID.Seq, r, i)
	return r, true
}

// forget drops the outcomes of client s's writes below low, its lowest
// unanswered request (automaton.Request.Unanswered): the client asks for
// none of them again (Dragonboat's RespondedTo). A copy of one still in
// flight is then refused, not executed (Forgotten).
func (m *machine) forget(s *session, low uint64) {
	if m.dropEarly {
		// The bug: the bound taken as inclusive, and the floor left at it,
		// so that the lowest unanswered request's own outcome is dropped
		// and a retry of it runs again.
		s.ForgetBelow(low + 1)
		s.Floor = min(s.Floor, low)
		return
	}
	s.ForgetBelow(low)
}

// endSession executes automaton.SessionEnd of client at instance i: its
// row goes, and a tombstone stays so that no later copy of one of its
// writes executes (it is refused: the Raft thesis §6.3's expired session).
// Tombstones are bounded like rows (evictClosed).
func (m *machine) endSession(client uint64, i uint64) outcome {
	delete(m.clients, client)
	if m.closed == nil {
		m.closed = map[uint64]uint64{}
	}
	if _, ok := m.closed[client]; !ok {
		m.closed[client] = i
		m.evictClosed()
	}
	return outcome{res: service.OK()}
}

// evictClosed keeps at most maxClients tombstones: past it, the tenth
// ended earliest (by instance, then id) is forgotten, on every replica
// alike. A write of such a client delayed past that many later session
// ends would run again: the documented bound, as for rows (evict).
func (m *machine) evictClosed() { proto.EvictTombstones(m.closed, m.maxClients) }

func (m *machine) newSession(client uint64) *session {
	s, _ := m.clients.Row(client, dedupWindow)
	m.evict()
	return s
}

// applyPart is paxos-broken-splitgroup's execution of one operation of a
// group as a command of its own: the group's outcome is known (and
// recorded) only at its last part, and other commands ran in between.
func (m *machine) applyPart(c cmd, i uint64) (outcome, bool) {
	if r, ok := m.lookup(c.ID); ok {
		return r, c.part == c.parts-1
	}
	if m.parts == nil {
		m.parts = map[automaton.RequestID][]service.Result{}
	}
	res := append(m.parts[c.ID], service.ApplyEnv(m.st, c.Op, c.Env.For(c.part)))
	if c.part < c.parts-1 {
		m.parts[c.ID] = res
		return outcome{}, false
	}
	delete(m.parts, c.ID)
	r := outcome{res: service.OK(), results: res}
	s := m.clients[c.ID.Client]
	if s == nil {
		s = m.newSession(c.ID.Client)
	}
	m.record(s, c.ID.Seq, r, i)
	return r, true
}

// record stores the outcome of write seq in s at instance i and keeps the
// client's window.
func (m *machine) record(s *session, seq uint64, r outcome, i uint64) {
	s.Record(seq, r, i, dedupWindow)
}

// applyChange executes a membership change at instance i: the
// configuration of every later instance is the new one. An invalid change
// (adding a member, removing a non-member or the last one) changes nothing
// and answers an error, deterministically on every replica.
func (m *machine) applyChange(op service.Op, i uint64) service.Result {
	ch, err := parseChange(op)
	if err != nil {
		return service.Errorf("ERR %v", err)
	}
	n, err := m.conf.apply(ch, i)
	if err != nil {
		return service.Errorf("ERR member %s: %v", op.Key, err)
	}
	m.conf = n
	return service.OK()
}

// evict keeps the table within maxClients rows: when it grows past the limit,
// the tenth of the rows idle the longest (by instance of their last write,
// then by id, so every replica evicts the same rows) is dropped. A retry from
// an evicted client is applied again: the limit is a documented bound.
func (m *machine) evict() {
	if len(m.clients) <= m.maxClients {
		return
	}
	m.clients.EvictIdle(len(m.clients) - m.maxClients + m.maxClients/10)
}

// Snapshot versions. Version 2 adds the results of atomic groups to the
// dedup table; a snapshot whose table holds none is written as version 1,
// byte for byte as before groups existed, so that a replica of the previous
// release still reads every snapshot it could have made itself.
const (
	snapVersion1 = msgVersion
	snapVersion2 = 2
)

// snapshot encodes the state machine (service state and dedup table) as of
// instance index, deterministically.
func (m *machine) snapshot(index uint64) []byte {
	svc := m.st.Snapshot()
	e := wire.Encoder{B: make([]byte, 0, len(svc)+64+len(m.clients)*32)}
	version := byte(snapVersion1)
	for _, s := range m.clients {
		for _, r := range s.Res {
			if r.results != nil {
				version = snapVersion2
			}
		}
		if version == snapVersion2 {
			break
		}
	}
	e.Byte(version)
	e.Uvarint(index)
	e.Bytes(svc)
	ids := m.clients.IDs()
	e.Uvarint(uint64(len(ids)))
	for _, id := range ids {
		s := m.clients[id]
		e.Uvarint(id)
		e.Uvarint(s.Floor)
		e.Uvarint(s.Last)
		e.Uvarint(uint64(len(s.Seqs)))
		for _, q := range s.Seqs {
			e.Uvarint(q)
			r := s.Res[q]
			service.EncodeResult(&e, r.res)
			if version == snapVersion2 {
				// 0: a single write; n+1: a group's n results.
				if r.results == nil {
					e.Uvarint(0)
				} else {
					e.Uvarint(uint64(len(r.results)) + 1)
					for _, x := range r.results {
						service.EncodeResult(&e, x)
					}
				}
			}
		}
	}
	encodeConf(&e, m.conf)
	// Ended sessions, after the configuration: a snapshot without them is
	// byte for byte as before sessions ended.
	proto.EncodeTombstones(&e, m.closed)
	return e.B
}

// restore replaces the state machine by a snapshot and returns its index.
func (m *machine) restore(b []byte) (uint64, error) {
	d := wire.NewDecoder(b)
	version := d.Byte()
	if version != snapVersion1 && version != snapVersion2 {
		return 0, fmt.Errorf("paxos: snapshot version %d", version)
	}
	index := d.Uvarint()
	svc := d.Bytes()
	n := d.Count(1<<30, 4)
	clients := make(proto.Sessions[outcome], n)
	for i := 0; i < n && d.Err() == nil; i++ {
		id := d.Uvarint()
		s := &session{Floor: d.Uvarint(), Last: d.Uvarint(), Res: map[uint64]outcome{}}
		k := d.Count(1<<20, 2)
		for j := 0; j < k && d.Err() == nil; j++ {
			q := d.Uvarint()
			r := outcome{res: service.DecodeResult(d)}
			if version == snapVersion2 {
				if n := d.Uvarint(); n > 0 {
					if n-1 > uint64(len(d.B)) {
						d.Fail(fmt.Errorf("paxos: snapshot: group of %d results", n-1))
						n = 1
					}
					r.results = make([]service.Result, 0, n-1)
					for x := uint64(0); x < n-1 && d.Err() == nil; x++ {
						r.results = append(r.results, service.DecodeResult(d))
					}
				}
			}
			if _, dup := s.Get(q); !dup {
				s.Add(q, r)
			}
		}
		clients[id] = s
	}
	cf := m.conf
	if d.Err() == nil && len(d.B) > 0 {
		cf = decodeConf(d) // snapshots from before membership changes have none
	}
	closed := proto.DecodeTombstones(d)
	if err := d.Done(); err != nil {
		return 0, fmt.Errorf("paxos: bad snapshot: %w", err)
	}
	st := m.svc.NewState()
	if err := st.Restore(svc); err != nil {
		return 0, err
	}
	m.st, m.clients, m.conf, m.closed = st, clients, cf, closed
	return index, nil
}
