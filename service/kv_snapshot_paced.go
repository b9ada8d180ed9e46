package service

import (
	"maps"
	"slices"

	"github.com/synod-dev/synod/wire"
)

// SnapshotWriter encodes a KV state's snapshot a part at a time: the
// bytes it ends with are exactly SnapshotOrdered's for the state (and
// Snapshot's). The state must not change from SnapshotWriter until Next
// reports the snapshot complete: the caller snapshots a Clone it owns.
// ESDS's stable-state record at 10,000 keys (1.3 MB) took 8-15 ms of one
// step of the node's event loop, in which nothing else is answered (issue
// 28, session 51); a writer's parts go one a tick.
type SnapshotWriter struct {
	s    *KVState
	o    *KeyOrder
	e    wire.Encoder
	at   int // where the snapshot starts (after dst)
	mark int // where the key count starts
	next int // the next key (o.keys) to encode
	done bool
}

// SnapshotWriter starts a snapshot of s, appended to dst (a caller's
// room for what goes before it: the snapshot is encoded in place, not
// copied into a record afterwards), through o's kept key order (as
// SnapshotOrdered: the keys are sorted again only when s's key set is not
// o's, here or at the first key of o's that s no longer holds).
func (s *KVState) SnapshotWriter(o *KeyOrder, dst []byte) *SnapshotWriter {
	at := len(dst)
	w := &SnapshotWriter{s: s, o: o, e: wire.Encoder{B: append(slices.Grow(dst, o.size+o.size/8+1), kvSnapVersion)}}
	if len(s.libs) > 0 {
		w.e.B[at] = kvSnapLibs
	}
	w.at = at
	w.e.Uvarint(s.version)
	w.e.Varint(s.clock)
	w.e.Uvarint(s.gone)
	w.mark = len(w.e.B)
	if len(o.keys) != len(s.m) {
		o.keys = slices.Sorted(maps.Keys(s.m))
	}
	w.e.Uvarint(uint64(len(o.keys)))
	return w
}

// Next encodes keys until about budget bytes were added (at least one
// key) or every key is, and reports whether the snapshot is complete
// (Bytes). The tail (deleted keys' versions, function libraries) is
// encoded with the last part.
func (w *SnapshotWriter) Next(budget int) bool {
	if w.done {
		return true
	}
	s, e := w.s, &w.e
	start := len(e.B)
	for w.next < len(w.o.keys) && (len(e.B)-start < budget || len(e.B) == start) {
		k := w.o.keys[w.next]
		x, ok := s.m[k]
		if !ok {
			// The kept order names a key s no longer holds: sort afresh
			// and start the entries again (what SnapshotOrdered does).
			e.B = e.B[:w.mark]
			w.o.keys = slices.Sorted(maps.Keys(s.m))
			e.Uvarint(uint64(len(w.o.keys)))
			w.next = 0
			continue
		}
		e.String(k)
		e.Uvarint(x.gen)
		e.Varint(x.exp)
		x.encode(e)
		w.next++
	}
	if w.next < len(w.o.keys) {
		return false
	}
	s.encodeWT(e)
	if len(s.libs) > 0 {
		s.encodeLibs(e)
	}
	w.o.size = len(e.B) - w.at
	w.done = true
	return true
}

// Bytes is dst followed by the snapshot, once Next has reported it
// complete (nil before).
func (w *SnapshotWriter) Bytes() []byte {
	if !w.done {
		return nil
	}
	return w.e.B
}
