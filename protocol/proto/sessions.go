package proto

import (
	"sort"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/wire"
)

// The exactly-once table (issue 32 item 1): the client sessions a
// replicated state machine keeps so that a write retried under the same
// RequestID, at any replica and after any leader change, is answered with
// its first outcome instead of running again. Multi-Paxos, primary-backup
// and Fast Paxos keep it as part of their replicated state (Paxos Made
// Live and "primary-backup/Paxos/PB-Paxos/X-Paxos/T-Paxos" §III.A: "the
// result computed by the old primary"); each protocol encodes it in its own
// snapshot or state image, reading the exported fields, so that moving onto
// this table left those bytes unchanged.

// Session is one client's row: the outcomes of its most recent writes, by
// sequence number. Writes below Floor were forgotten (their outcome is
// unknown). Last is the position (log instance, entry index) of the
// client's latest recorded write, the eviction order; a protocol that
// never evicts leaves it 0.
type Session[R any] struct {
	Floor uint64
	Last  uint64
	Res   map[uint64]R
	Seqs  []uint64 // the keys of Res, ascending (the oldest is forgotten first)
}

// NewSession returns an empty row with room in Seqs for window outcomes.
// Res grows as outcomes come: sized for the window up front, every row
// cost about 15 KB at once (128 slots of an outcome), which the model
// checker paid again in every copy of a state (maps.Clone keeps the
// capacity); growing costs a row a few rehashes in its life.
func NewSession[R any](window int) *Session[R] {
	return &Session[R]{Res: map[uint64]R{}, Seqs: make([]uint64, 0, window+1)}
}

// Get returns the recorded outcome of write seq. A new write's sequence
// number is mostly above every recorded one: that case is answered without
// probing the map.
func (s *Session[R]) Get(seq uint64) (R, bool) {
	if n := len(s.Seqs); n == 0 || seq > s.Seqs[n-1] {
		var zero R
		return zero, false
	}
	r, ok := s.Res[seq]
	return r, ok
}

// Forgotten reports whether write seq is below the row's window.
func (s *Session[R]) Forgotten(seq uint64) bool { return seq < s.Floor }

// ForgetBelow drops the outcomes of writes below low and raises Floor to
// it: the client will not ask for them again (it has its answers: the
// lowest sequence number it still waits for is low). Seqs is ascending, so
// this cuts a prefix.
func (s *Session[R]) ForgetBelow(low uint64) {
	if low <= s.Floor {
		return
	}
	k := sort.Search(len(s.Seqs), func(j int) bool { return s.Seqs[j] >= low })
	for _, q := range s.Seqs[:k] {
		delete(s.Res, q)
	}
	if k > 0 {
		s.Seqs = append(s.Seqs[:0], s.Seqs[k:]...)
	}
	s.Floor = low
}

// Add records the outcome of write seq, which the caller checked is new,
// keeping Seqs ascending. Sequence numbers mostly arrive in order, so this
// is an append. It does not trim the window (Record does).
func (s *Session[R]) Add(seq uint64, r R) {
	s.Res[seq] = r
	n := len(s.Seqs)
	if n == 0 || s.Seqs[n-1] < seq {
		s.Seqs = append(s.Seqs, seq)
		return
	}
	k := sort.Search(n, func(j int) bool { return s.Seqs[j] > seq })
	s.Seqs = append(s.Seqs, 0)
	copy(s.Seqs[k+1:], s.Seqs[k:])
	s.Seqs[k] = seq
}

// Record stores write seq's outcome, made at position last, unless seq is
// recorded already, and keeps only the window most recent writes: the
// oldest is forgotten and Floor rises past it.
func (s *Session[R]) Record(seq uint64, r R, last uint64, window int) {
	if _, ok := s.Res[seq]; ok {
		return
	}
	s.Add(seq, r)
	s.Last = last
	if len(s.Seqs) > window {
		old := s.Seqs[0]
		s.Seqs = append(s.Seqs[:0], s.Seqs[1:]...)
		delete(s.Res, old)
		s.Floor = max(s.Floor, old+1)
	}
}

// Sessions is the table: one row per client id.
type Sessions[R any] map[uint64]*Session[R]

// Lookup returns the recorded outcome of write id.
func (t Sessions[R]) Lookup(id automaton.RequestID) (R, bool) {
	s := t[id.Client]
	if s == nil {
		var zero R
		return zero, false
	}
	return s.Get(id.Seq)
}

// Forgotten reports whether write id is below its client's window.
func (t Sessions[R]) Forgotten(id automaton.RequestID) bool {
	s := t[id.Client]
	return s != nil && s.Forgotten(id.Seq)
}

// Row returns client's row, creating it (with room for window outcomes)
// when absent; created reports a new row, after which the caller keeps the
// table within its bound (EvictIdle).
func (t Sessions[R]) Row(client uint64, window int) (s *Session[R], created bool) {
	if s = t[client]; s != nil {
		return s, false
	}
	s = NewSession[R](window)
	t[client] = s
	return s, true
}

// IDs returns the client ids in ascending order (encoders walk the table in
// it, so that every replica writes the same bytes).
func (t Sessions[R]) IDs() []uint64 {
	ids := make([]uint64, 0, len(t))
	for id := range t {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	return ids
}

// EvictIdle drops the drop rows idle the longest: by Last, then by id, so
// that every replica drops the same rows. A retry from an evicted client
// runs again: a table's bound is a documented limit of its protocol.
func (t Sessions[R]) EvictIdle(drop int) {
	if drop <= 0 {
		return
	}
	type row struct{ id, last uint64 }
	rows := make([]row, 0, len(t))
	for id, s := range t {
		rows = append(rows, row{id, s.Last})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].last != rows[j].last {
			return rows[i].last < rows[j].last
		}
		return rows[i].id < rows[j].id
	})
	for _, r := range rows[:min(drop, len(rows))] {
		delete(t, r.id)
	}
}

// EvictTombstones keeps at most max of an exactly-once table's tombstones
// (ended sessions: client id -> the position that ended it): past it, the
// tenth ended earliest (by position, then id) is forgotten, on every
// replica alike. A write of such a client delayed past that many later
// session ends would run again: the documented bound, as for rows.
func EvictTombstones(closed map[uint64]uint64, max int) {
	if len(closed) <= max {
		return
	}
	type tomb struct{ id, at uint64 }
	ts := make([]tomb, 0, len(closed))
	for id, at := range closed {
		ts = append(ts, tomb{id, at})
	}
	sort.Slice(ts, func(a, b int) bool {
		if ts[a].at != ts[b].at {
			return ts[a].at < ts[b].at
		}
		return ts[a].id < ts[b].id
	})
	for _, t := range ts[:len(closed)-max+max/10] {
		delete(closed, t.id)
	}
}

// EncodeTombstones appends the tombstones (count, then id and position by
// id ascending) when there are any; nothing otherwise, so that a snapshot
// or image without them is encoded as before sessions ended.
func EncodeTombstones(e *wire.Encoder, closed map[uint64]uint64) {
	if len(closed) == 0 {
		return
	}
	ids := make([]uint64, 0, len(closed))
	for id := range closed {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	e.Uvarint(uint64(len(ids)))
	for _, id := range ids {
		e.Uvarint(id)
		e.Uvarint(closed[id])
	}
}

// DecodeTombstones reads what EncodeTombstones wrote, if anything is left
// (nil when nothing is).
func DecodeTombstones(d *wire.Decoder) map[uint64]uint64 {
	if d.Err() != nil || len(d.B) == 0 {
		return nil
	}
	k := d.Count(1<<30, 2)
	closed := make(map[uint64]uint64, k)
	for j := 0; j < k && d.Err() == nil; j++ {
		id := d.Uvarint()
		closed[id] = d.Uvarint()
	}
	return closed
}
