package paxos

import (
	"fmt"
	"sort"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// dedupWindow is how many write results are kept per client. A gateway
// connection has at most 32 requests in flight, the simulator's clients one.
const dedupWindow = 64

// session is one client's row in the deduplication table: the results of its
// most recent writes, by sequence number. Writes below floor were forgotten.
type session struct {
	floor uint64
	last  uint64 // instance of the client's latest write (for eviction)
	res   map[uint64]service.Result
	seqs  []uint64 // the keys of res, ascending (the oldest is evicted first)
}

// add records the result of write seq; the caller checked it is new.
// Sequence numbers mostly arrive in order, so this is an append.
func (s *session) add(seq uint64, r service.Result) {
	s.res[seq] = r
	n := len(s.seqs)
	if n == 0 || s.seqs[n-1] < seq {
		s.seqs = append(s.seqs, seq)
		return
	}
	k := sort.Search(n, func(j int) bool { return s.seqs[j] > seq })
	s.seqs = append(s.seqs, 0)
	copy(s.seqs[k+1:], s.seqs[k:])
	s.seqs[k] = seq
}

// machine is the replicated state machine: the service state plus the
// deduplication table. Every replica applies the same commands in the same
// order, so every replica holds the same table.
type machine struct {
	svc        service.Service
	st         service.State
	clients    map[uint64]*session
	maxClients int
	// conf is the configuration after the executed prefix (membership.go).
	conf *conf
}

func newMachine(svc service.Service, maxClients int, boot *conf) *machine {
	return &machine{svc: svc, st: svc.NewState(), clients: map[uint64]*session{}, maxClients: maxClients, conf: boot}
}

// lookup returns the remembered result of a write, if the table has it.
func (m *machine) lookup(id automaton.RequestID) (service.Result, bool) {
	s := m.clients[id.Client]
	if s == nil {
		return service.Result{}, false
	}
	r, ok := s.res[id.Seq]
	return r, ok
}

// apply executes one command of instance i exactly once: a write already in
// the table returns its first result; a write older than the client's window
// is refused (its outcome is unknown to the caller, and it is not applied).
// Reads are not recorded: running one twice has no effect.
func (m *machine) apply(c cmd, i uint64) service.Result {
	if !automaton.IsMemberOp(c.Op) && m.svc.IsRead(c.Op) {
		return m.st.Apply(c.Op)
	}
	s := m.clients[c.ID.Client]
	if s != nil {
		if r, ok := s.res[c.ID.Seq]; ok {
			return r
		}
		if c.ID.Seq < s.floor {
			return service.Errorf("ERR request %v is older than this client's deduplication window (%d writes); its outcome is unknown", c.ID, dedupWindow)
		}
	} else {
		s = &session{res: make(map[uint64]service.Result, dedupWindow+1), seqs: make([]uint64, 0, dedupWindow+1)}
		m.clients[c.ID.Client] = s
		m.evict()
	}
	var r service.Result
	if automaton.IsMemberOp(c.Op) {
		r = m.applyChange(c.Op, i)
	} else {
		r = m.st.Apply(c.Op)
	}
	s.add(c.ID.Seq, r)
	s.last = i
	if len(s.seqs) > dedupWindow {
		min := s.seqs[0]
		s.seqs = append(s.seqs[:0], s.seqs[1:]...)
		delete(s.res, min)
		if min+1 > s.floor {
			s.floor = min + 1
		}
	}
	return r
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
	ids := make([]uint64, 0, len(m.clients))
	for id := range m.clients {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool {
		sa, sb := m.clients[ids[a]], m.clients[ids[b]]
		if sa.last != sb.last {
			return sa.last < sb.last
		}
		return ids[a] < ids[b]
	})
	drop := len(ids) - m.maxClients + m.maxClients/10
	for _, id := range ids[:drop] {
		delete(m.clients, id)
	}
}

// snapshot encodes the state machine (service state and dedup table) as of
// instance index, deterministically.
func (m *machine) snapshot(index uint64) []byte {
	svc := m.st.Snapshot()
	e := wire.Encoder{B: make([]byte, 0, len(svc)+64+len(m.clients)*32)}
	e.Byte(msgVersion)
	e.Uvarint(index)
	e.Bytes(svc)
	ids := make([]uint64, 0, len(m.clients))
	for id := range m.clients {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	e.Uvarint(uint64(len(ids)))
	for _, id := range ids {
		s := m.clients[id]
		e.Uvarint(id)
		e.Uvarint(s.floor)
		e.Uvarint(s.last)
		e.Uvarint(uint64(len(s.seqs)))
		for _, q := range s.seqs {
			e.Uvarint(q)
			service.EncodeResult(&e, s.res[q])
		}
	}
	encodeConf(&e, m.conf)
	return e.B
}

// restore replaces the state machine by a snapshot and returns its index.
func (m *machine) restore(b []byte) (uint64, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != msgVersion {
		return 0, fmt.Errorf("paxos: snapshot version %d", v)
	}
	index := d.Uvarint()
	svc := d.Bytes()
	n := d.Count(1<<30, 4)
	clients := make(map[uint64]*session, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		id := d.Uvarint()
		s := &session{floor: d.Uvarint(), last: d.Uvarint(), res: map[uint64]service.Result{}}
		k := d.Count(1<<20, 2)
		for j := 0; j < k && d.Err() == nil; j++ {
			q := d.Uvarint()
			r := service.DecodeResult(d)
			if _, dup := s.res[q]; !dup {
				s.add(q, r)
			}
		}
		clients[id] = s
	}
	cf := m.conf
	if d.Err() == nil && len(d.B) > 0 {
		cf = decodeConf(d) // snapshots from before membership changes have none
	}
	if err := d.Done(); err != nil {
		return 0, fmt.Errorf("paxos: bad snapshot: %w", err)
	}
	st := m.svc.NewState()
	if err := st.Restore(svc); err != nil {
		return 0, err
	}
	m.st, m.clients, m.conf = st, clients, cf
	return index, nil
}
