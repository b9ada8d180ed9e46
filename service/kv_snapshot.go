package service

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/synod-dev/synod/wire"
)

// KV snapshots, deltas, Merkle hashing and range transfer (transfer.go's
// package documentation; the typed formats in kv_doc.go).

// snapVersion is the snapshot format of the built-in single-value states
// (Counter, String, Bank): format 2 carries the state's Version after the
// format byte; format 1 (without it) is still read, as version 0.
const snapVersion = 2

// kvSnapVersion is KV's snapshot format: 3 carries typed values,
// generations, deadlines, the clock, gone and the remembered versions of
// deleted keys. Formats 1 and 2 (strings only) still restore.
const kvSnapVersion = 3

// kvSnapLibs is format 3 followed by the function library table
// (kv_function.go): a snapshot of a state with libraries has it.
const kvSnapLibs = 4

// kvDeltaCodec is the format byte of KV deltas and range exports with
// typed values (format 1, strings only, is refused: the sender falls back
// to a snapshot).
const kvDeltaCodec = 2

// kvDeltaLibs is codec 2 followed by the whole function library table: a
// delta has it when the table changed after the delta's start.
const kvDeltaLibs = 3

// Snapshot implements State: the version, clock and gone, the keys in
// sorted order with their generation, deadline and value, then the
// remembered deleted keys in sorted order with their versions, so equal
// states give equal bytes. Nothing in it depends on the order in which
// different keys were written (the serializability checker merges states
// by their snapshots).
func (s *KVState) Snapshot() []byte {
	return s.SnapshotOrdered(new(KeyOrder))
}

// KeyOrder holds the sorted keys of the last snapshot taken through it
// (KVState.SnapshotOrdered), so that a caller that snapshots the same state
// again and again (ESDS's stable-state record, taken at each garbage
// collection) does not sort an unchanged key set each time: sorting was
// about 40 % of a 10,000-key snapshot's CPU (issue 28). The caller owns it;
// the state never writes it otherwise, so Snapshot stays read-only.
// It also keeps the last snapshot's size, so the next one is encoded into a
// buffer of about that size at once instead of one grown by doubling (the
// copies and the garbage of growing a 1.3 MB buffer were most of the rest).
type KeyOrder struct {
	keys []string
	size int
}

// SnapshotOrdered returns exactly Snapshot's bytes, reusing o's sorted keys
// when the state still holds exactly that key set (the same count and every
// one of them present: the cached keys are distinct, so the sets are equal)
// and sorting afresh into o otherwise.
func (s *KVState) SnapshotOrdered(o *KeyOrder) []byte {
	e := wire.Encoder{B: append(make([]byte, 0, o.size+o.size/8+1), kvSnapVersion)}
	if len(s.libs) > 0 {
		e.B[0] = kvSnapLibs
	}
	e.Uvarint(s.version)
	e.Varint(s.clock)
	e.Uvarint(s.gone)
	mark := len(e.B)
	if len(o.keys) != len(s.m) || !s.encodeKnown(&e, o.keys) {
		e.B = e.B[:mark]
		o.keys = slices.Sorted(maps.Keys(s.m))
		s.encodeEntries(&e, o.keys)
	}
	s.encodeWT(&e)
	if len(s.libs) > 0 {
		s.encodeLibs(&e)
	}
	o.size = len(e.B)
	return e.B
}

// encodeKnown is encodeEntries for keys that may name a key the state no
// longer holds: it reports false at the first such key (the encoder then
// holds a partial encoding for the caller to cut off).
func (s *KVState) encodeKnown(e *wire.Encoder, keys []string) bool {
	e.Uvarint(uint64(len(keys)))
	for _, k := range keys {
		x, ok := s.m[k]
		if !ok {
			return false
		}
		e.String(k)
		e.Uvarint(x.gen)
		e.Varint(x.exp)
		x.encode(e)
	}
	return true
}

// encodeEntries appends the count of keys, then each key with its
// generation, deadline and value.
func (s *KVState) encodeEntries(e *wire.Encoder, keys []string) {
	e.Uvarint(uint64(len(keys)))
	for _, k := range keys {
		x := s.m[k]
		e.String(k)
		e.Uvarint(x.gen)
		e.Varint(x.exp)
		x.encode(e)
	}
}

// encodeWT appends the remembered deleted keys, sorted, with their
// versions.
func (s *KVState) encodeWT(e *wire.Encoder) {
	ks := slices.Sorted(maps.Keys(s.wt))
	e.Uvarint(uint64(len(ks)))
	for _, k := range ks {
		e.String(k)
		e.Uvarint(s.wt[k])
	}
}

// decodeWT reads encodeWT's output.
func decodeWT(d *wire.Decoder) map[string]uint64 {
	n := d.Count(1<<40, 2)
	if n == 0 {
		return nil
	}
	wt := make(map[string]uint64, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		k := d.String()
		wt[k] = d.Uvarint()
	}
	return wt
}

// Restore implements State. The restored version is the baseline: Delta
// serves changes from it on, the Merkle tree is rebuilt when next hashed.
func (s *KVState) Restore(snap []byte) error {
	d := wire.NewDecoder(snap)
	if len(snap) > 0 && (snap[0] == kvSnapVersion || snap[0] == kvSnapLibs) {
		format := d.Byte()
		ver, clock, gone := d.Uvarint(), d.Varint(), d.Uvarint()
		n := d.Count(1<<40, 4)
		m := make(map[string]kvEntry, n)
		tok := new(int)
		for i := 0; i < n && d.Err() == nil; i++ {
			k, gen, exp := d.String(), d.Uvarint(), d.Varint()
			x := decodeValue(d, tok)
			x.gen, x.exp = gen, exp
			m[k] = x
		}
		wt := decodeWT(d)
		var libs map[string]*fnLib
		if format == kvSnapLibs {
			libs = decodeLibs(d)
		}
		if err := d.Done(); err != nil {
			return fmt.Errorf("kv: bad snapshot: %w", err)
		}
		s.reset(m, ver)
		s.tok, s.clock, s.gone, s.wt = tok, clock, gone, wt
		s.libs, s.libsAt = libs, ver
		s.rebuildExps()
		return nil
	}
	ver, err := snapshotHeader(d, "kv")
	if err != nil {
		return err
	}
	n := d.Count(1<<40, 2)
	m := make(map[string]kvEntry, n)
	for i := 0; i < n; i++ {
		k := d.String()
		m[k] = kvEntry{v: nonNil(d.BytesCopy()), gen: 1}
	}
	if err := d.Done(); err != nil {
		return fmt.Errorf("kv: bad snapshot: %w", err)
	}
	s.reset(m, ver)
	return nil
}

// reset installs m (whose entries carry no usable change versions) as the
// state at version ver: the new baseline for Delta.
func (s *KVState) reset(m map[string]kvEntry, ver uint64) {
	leaves, limit := s.leaves, s.tombLimit
	if leaves == 0 {
		leaves, limit = KVMerkleLeaves, DefaultTombstones
	}
	*s = KVState{m: m, version: ver, floor: ver, leaves: leaves, tombLimit: limit, tok: new(int)}
}

// rebuildExps recomputes the deadline map from the entries.
func (s *KVState) rebuildExps() {
	s.exps, s.expsShared = nil, false
	for k, e := range s.m {
		if e.exp != 0 {
			s.setExp(k, e.exp)
		}
	}
}

// snapshotHeader reads a snapshot's format byte and, in format 2, its
// version.
func snapshotHeader(d *wire.Decoder, what string) (uint64, error) {
	switch v := d.Byte(); v {
	case codecVersion:
		return 0, d.Err()
	case snapVersion:
		ver := d.Uvarint()
		return ver, d.Err()
	default:
		if err := d.Err(); err != nil {
			return 0, fmt.Errorf("%s: bad snapshot: %w", what, err)
		}
		return 0, fmt.Errorf("%s: snapshot version %d, want %d or %d", what, v, codecVersion, snapVersion)
	}
}

// Version implements DeltaState: the number of writes applied, from the
// restored snapshot's version on.
func (s *KVState) Version() uint64 { return s.version }

// kvDelta is one decoded delta entry: a key's value, or its tombstone
// with the version the sender remembers for it (wv, 0: none).
type kvDelta struct {
	key  string
	at   uint64
	live bool
	e    kvEntry
	wv   uint64
}

// Delta implements DeltaState: every key changed after version since, with
// its current value or a tombstone, sorted by key (format 2: codec byte,
// since, to, clock, gone, the version of the sender's last flush of
// deleted keys' versions, count, then per key: key, version of its last
// change, 1 and the generation, deadline and value, or 0 and the deleted
// key's remembered version, 0 for none).
func (s *KVState) Delta(since uint64) ([]byte, error) {
	if since > s.version || since < s.floor {
		return nil, fmt.Errorf("%w %d (kv state at %d can serve from %d)", ErrDeltaUnavailable, since, s.version, s.floor)
	}
	j := sort.Search(len(s.journal), func(i int) bool { return s.journal[i].at > since })
	var out []kvDelta
	for _, c := range s.journal[j:] {
		if e, ok := s.m[c.key]; ok {
			if e.at == c.at {
				out = append(out, kvDelta{key: c.key, at: c.at, live: true, e: e})
			}
		} else if at, ok := s.tomb[c.key]; ok && at == c.at {
			out = append(out, kvDelta{key: c.key, at: c.at, wv: s.wt[c.key]})
		}
	}
	slices.SortFunc(out, func(a, b kvDelta) int { return strings.Compare(a.key, b.key) })
	size := 48
	for i := range out {
		size += len(out[i].key) + len(out[i].e.v) + 24
	}
	e := wire.Encoder{B: make([]byte, 0, size)}
	if s.libsAt > since {
		e.Byte(kvDeltaLibs)
	} else {
		e.Byte(kvDeltaCodec)
	}
	e.Uvarint(since)
	e.Uvarint(s.version)
	e.Varint(s.clock)
	e.Uvarint(s.gone)
	e.Uvarint(s.wflush)
	e.Uvarint(uint64(len(out)))
	for _, c := range out {
		e.String(c.key)
		e.Uvarint(c.at)
		e.Bool(c.live)
		if c.live {
			e.Uvarint(c.e.gen)
			e.Varint(c.e.exp)
			c.e.encode(&e)
		} else {
			e.Uvarint(c.wv)
		}
	}
	if s.libsAt > since {
		e.Uvarint(s.libsAt)
		s.encodeLibs(&e)
	}
	return e.B, nil
}

// DeltaSizeHint implements DeltaSizer: the keys changed after since, each
// with its value's bytes (a string) or one byte per element and field (a
// collection), without encoding; 0 when Delta(since) would fail.
func (s *KVState) DeltaSizeHint(since uint64) int {
	if since > s.version || since < s.floor {
		return 0
	}
	j := sort.Search(len(s.journal), func(i int) bool { return s.journal[i].at > since })
	n := 8
	for _, c := range s.journal[j:] {
		n += len(c.key) + 2
		if e, ok := s.m[c.key]; ok && e.at == c.at {
			n += e.sizeHint()
		}
	}
	return n
}

// sizeHint is a lower bound of the value's encoded length: its bytes, or
// one per element (two per hash field and sorted-set member).
func (e kvEntry) sizeHint() int {
	if e.c == nil {
		return len(e.v)
	}
	switch e.c.t {
	case tHash:
		return 2 * len(e.c.h)
	case tList:
		return len(e.c.l)
	case tSet:
		return len(e.c.set)
	case tZSet:
		return 2 * len(e.c.z)
	case tStream:
		if e.c.st != nil {
			return int(e.c.st.length)
		}
	}
	return 0
}

// ApplyDelta implements DeltaState (the Grid Services thesis III.A: the backup "injects the
// state into the service application"). The whole delta is decoded and
// checked before anything changes.
func (s *KVState) ApplyDelta(delta []byte) error {
	d := wire.NewDecoder(delta)
	codec := d.Byte()
	if codec != kvDeltaCodec && codec != kvDeltaLibs && d.Err() == nil {
		return fmt.Errorf("%w: kv delta format %d", ErrDeltaMismatch, codec)
	}
	since, to := d.Uvarint(), d.Uvarint()
	clock, gone, wflush := d.Varint(), d.Uvarint(), d.Uvarint()
	n := d.Count(1<<40, 3)
	ents := make([]kvDelta, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		c := kvDelta{key: d.String(), at: d.Uvarint(), live: d.Bool()}
		if c.live {
			gen, exp := d.Uvarint(), d.Varint()
			c.e = decodeValue(d, s.tok)
			c.e.gen, c.e.exp, c.e.at = gen, exp, c.at
		} else {
			c.wv = d.Uvarint()
		}
		if d.Err() == nil && (c.at <= since || c.at > to) {
			d.Fail(fmt.Errorf("key %q changed at %d, outside (%d, %d]", c.key, c.at, since, to))
		}
		ents = append(ents, c)
	}
	var libs map[string]*fnLib
	var libsAt uint64
	if codec == kvDeltaLibs {
		libsAt = d.Uvarint()
		libs = decodeLibs(d)
	}
	if err := d.Done(); err != nil {
		return fmt.Errorf("%w: bad kv delta: %v", ErrDeltaMismatch, err)
	}
	if err := versionsFit(s.version, since, to); err != nil {
		return err
	}
	// Install in version order so the journal and tombstone queue stay
	// sorted; changes this state already has (same key, same version) are
	// skipped, so a delta applies twice harmlessly.
	slices.SortFunc(ents, func(a, b kvDelta) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	// The remembered versions of deleted keys: the sender's are those it
	// flushed last at wflush plus the ones the delta names; a flush after
	// since forgot every older one here too.
	if wflush > since {
		s.wt, s.wtShared, s.wflush = nil, false, wflush
	}
	for _, c := range ents {
		switch {
		case c.live:
			if _, ok := s.wt[c.key]; ok {
				s.ownWT()
				delete(s.wt, c.key)
			}
		case c.wv > 0:
			s.ownWT()
			s.wt[c.key] = c.wv
		}
	}
	j0, q0 := len(s.journal), len(s.tq)
	for _, c := range ents {
		if c.live {
			if e, ok := s.m[c.key]; ok && e.at == c.at {
				continue
			}
			s.m[c.key] = c.e
			s.setExp(c.key, c.e.exp)
			if _, ok := s.tomb[c.key]; ok {
				s.ownTomb()
				delete(s.tomb, c.key)
			}
			s.treePut(c.key, c.e)
		} else {
			if at, ok := s.tomb[c.key]; ok && at == c.at {
				continue
			}
			if _, ok := s.m[c.key]; ok {
				delete(s.m, c.key)
				s.setExp(c.key, 0)
				s.treeDelete(c.key)
			}
			s.ownTomb()
			s.tomb[c.key] = c.at
			s.tq = append(s.tq, change{c.key, c.at})
		}
		s.journal = append(s.journal, change{c.key, c.at})
	}
	s.journal = keepSorted(s.journal, j0)
	s.tq = keepSorted(s.tq, q0)
	s.version, s.clock, s.gone = to, clock, gone
	s.wflush = max(s.wflush, wflush)
	if codec == kvDeltaLibs && libsAt > s.libsAt {
		s.libs, s.libsAt = libs, libsAt
	}
	s.evictTombs()
	if n := len(s.journal); n >= 1024 && n > 2*(len(s.m)+len(s.tomb)) {
		s.journal = s.compact(s.journal)
	}
	return nil
}

// keepSorted restores version order after entries were appended from index
// from on (each run sorted): only when a state installs a delta that starts
// before its own version. It sorts a copy, since clones may share l's array.
func keepSorted(l []change, from int) []change {
	if from == 0 || from >= len(l) || l[from-1].at <= l[from].at {
		return l
	}
	c := slices.Clone(l)
	slices.SortStableFunc(c, func(a, b change) int { return cmp.Compare(a.at, b.at) })
	return c
}

// hashed returns the state's own, up-to-date-on-demand tree, building it
// on first use.
func (s *KVState) hashed() *MerkleTree {
	if s.tree == nil {
		s.tree = NewMerkleTree(s.leaves)
		for k, e := range s.m {
			s.tree.PutHash(k, e.hash(k))
		}
		s.treeShared, s.unhashed = false, nil
	}
	if len(s.unhashed) > 0 {
		s.ownTree()
		for k := range s.unhashed {
			s.tree.PutHash(k, s.m[k].hash(k))
		}
		s.unhashed = nil
	}
	if s.tree.Dirty() > 0 {
		s.ownTree()
	}
	return s.tree
}

// StateHash implements HashedState. The first call builds the tree (O(n));
// later calls rehash only the leaves written since.
// The function library table, when there is one, is hashed with the
// tree's root.
func (s *KVState) StateHash() [32]byte {
	root := s.hashed().Root()
	if len(s.libs) == 0 {
		return root
	}
	lh := s.libsHash()
	return sha256.Sum256(append(root[:], lh[:]...))
}

// MerkleTree implements HashedState: an up-to-date copy of the tree.
func (s *KVState) MerkleTree() *MerkleTree {
	t := s.hashed()
	t.Root()
	return t.Clone()
}

// KeysIn returns the keys in the given leaf ranges of the state's tree, in
// leaf order.
func (s *KVState) KeysIn(rs []Range) []string {
	t := s.hashed()
	var out []string
	for _, r := range rs {
		out = append(out, t.Keys(r)...)
	}
	return out
}

// ExportRanges implements RangeState (format 2: codec byte, version, clock,
// gone, every remembered deleted key with its version, count of ranges and
// each as lo, hi, count of entries and each as key, generation, deadline,
// value).
func (s *KVState) ExportRanges(rs []Range) []byte {
	keys := s.KeysIn(rs)
	e := wire.Encoder{B: []byte{kvDeltaCodec}}
	e.Uvarint(s.version)
	e.Varint(s.clock)
	e.Uvarint(s.gone)
	s.encodeWT(&e)
	e.Uvarint(uint64(len(rs)))
	for _, r := range rs {
		e.Uvarint(uint64(r.Lo))
		e.Uvarint(uint64(r.Hi))
	}
	s.encodeEntries(&e, keys)
	return e.B
}

// ImportRanges implements RangeState: the state's keys in the exported
// ranges are replaced by the exported entries, and the exporter's version,
// clock, gone and deleted keys' versions become the state's (the version
// the Delta baseline;
// per-key change versions are forgotten, as after Restore). Keys outside
// the ranges keep their generations. O(n) for the baseline, plus the
// transferred entries.
func (s *KVState) ImportRanges(b []byte) error {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != kvDeltaCodec && d.Err() == nil {
		return fmt.Errorf("kv: range export format %d", v)
	}
	ver, clock, gone := d.Uvarint(), d.Varint(), d.Uvarint()
	wt := decodeWT(d)
	t := s.hashed()
	nr := d.Count(t.Leaves(), 2)
	rs := make([]Range, 0, nr)
	for i := 0; i < nr && d.Err() == nil; i++ {
		r := Range{int(d.Uvarint()), int(d.Uvarint())}
		if d.Err() == nil && (r.Lo < 0 || r.Lo >= r.Hi || r.Hi > t.Leaves()) {
			d.Fail(fmt.Errorf("range %v outside %d leaves", r, t.Leaves()))
		}
		rs = append(rs, r)
	}
	n := d.Count(1<<40, 4)
	type kv struct {
		k string
		e kvEntry
	}
	tok := new(int)
	ents := make([]kv, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		k, gen, exp := d.String(), d.Uvarint(), d.Varint()
		x := decodeValue(d, tok)
		x.gen, x.exp = gen, exp
		if d.Err() == nil && !inRanges(rs, t.LeafOf(k)) {
			d.Fail(fmt.Errorf("key %q outside the exported ranges", k))
		}
		ents = append(ents, kv{k, x})
	}
	if err := d.Done(); err != nil {
		return fmt.Errorf("kv: bad range export: %w", err)
	}
	s.ownTree()
	for _, k := range s.KeysIn(rs) {
		delete(s.m, k)
		s.tree.Delete(k)
	}
	for _, c := range ents {
		s.m[c.k] = c.e
		s.tree.PutHash(c.k, c.e.hash(c.k))
	}
	for k, e := range s.m {
		if e.at != 0 {
			e.at = 0
			s.m[k] = e
		}
	}
	tree, libs, libsAt := s.tree, s.libs, s.libsAt
	s.reset(s.m, ver)
	s.tree, s.clock, s.gone, s.wt = tree, clock, gone, wt
	s.libs, s.libsAt = libs, min(libsAt, ver) // ranges carry keys only
	s.rebuildExps()
	return nil
}

func inRanges(rs []Range, i int) bool {
	for _, r := range rs {
		if r.Contains(i) {
			return true
		}
	}
	return false
}
