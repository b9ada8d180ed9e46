package service

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/synod-dev/synod/wire"
)

// KV is a map from string keys to byte-string values, with Redis semantics.
//
// Operations (Key is the Redis key; Args as listed):
//
//	get                  -> bytes or nil
//	exists               -> int 0/1
//	set  value [nx|xx]   -> OK, or nil when the NX/XX condition fails
//	del                  -> int 0/1 (number of keys removed)
//	cas  expected new    -> int 1 if the value equalled expected and was replaced, else 0
//	append suffix        -> int: length after appending
//	incr delta           -> int: the new value; error if the value is not an integer
type KV struct{}

func init() {
	Register(KV{})
	Register(Counter{})
}

// Name implements Service.
func (KV) Name() string { return "kv" }

// RegisterKinds are the KV operations a register protocol (ABD, blocking) can run.
var RegisterKinds = map[string]bool{"get": true, "exists": true, "set": true, "del": true}

// Validate implements Service.
func (KV) Validate(op Op) error {
	if len(op.Key) > MaxKeySize {
		return fmt.Errorf("key too large (%d bytes, limit %d)", len(op.Key), MaxKeySize)
	}
	for _, a := range op.Args {
		if len(a) > MaxValueSize {
			return fmt.Errorf("value too large (%d bytes, limit %d)", len(a), MaxValueSize)
		}
	}
	switch op.Kind {
	case "get", "exists", "del":
		return arity(op, 0)
	case "set":
		if err := arity(op, 1, 2); err != nil {
			return err
		}
		if len(op.Args) == 2 && string(op.Args[1]) != "nx" && string(op.Args[1]) != "xx" {
			return fmt.Errorf("syntax error: set condition %q", op.Args[1])
		}
		return nil
	case "cas":
		return arity(op, 2)
	case "append":
		return arity(op, 1)
	case "incr":
		if err := arity(op, 1); err != nil {
			return err
		}
		if _, err := strconv.ParseInt(string(op.Args[0]), 10, 64); err != nil {
			return fmt.Errorf("value is not an integer or out of range")
		}
		return nil
	}
	return fmt.Errorf("unknown kv operation %q", op.Kind)
}

// IsRead implements Service.
func (KV) IsRead(op Op) bool { return op.Kind == "get" || op.Kind == "exists" }

// NewState implements Service.
func (KV) NewState() State { return newKVState() }

// KVState is the state of a KV replica.
//
// Besides the map it keeps what state transfer and hashing need (see the
// package documentation in transfer.go): the version (count of writes), per
// key the version of its last change, bounded tombstones, a journal of
// changes in version order, and, once StateHash or MerkleTree has been called,
// a Merkle tree that every later write keeps up to date.
type KVState struct {
	m       map[string]kvEntry
	version uint64
	// floor is the oldest version Delta can start from: the Restore
	// baseline, raised when a tombstone is evicted.
	floor uint64
	// tomb maps a deleted key to the version that deleted it, for at most
	// tombLimit keys (the oldest go first); tq lists them in version order
	// (stale entries, for keys since re-created or evicted, are skipped).
	tomb      map[string]uint64
	tq        []change
	tombLimit int
	// journal lists (key, version) in version order for every change after
	// floor; an entry is current while the key's last change is still at
	// that version. Compacted when twice as long as the keys it can name.
	journal []change
	// tree is nil until first hashed; leaves is its shape.
	tree   *MerkleTree
	leaves int
	// Clone shares the tree and the tombstone map copy-on-write; these
	// say the first mutation must copy. (Journal and tq are shared
	// through full slice expressions: only appends beyond a clone's
	// length ever write to a shared array.)
	treeShared, tombShared bool
}

// kvEntry is a stored value and the version of its last change.
type kvEntry struct {
	v  []byte
	at uint64
}

// change names the version at which a key changed.
type change struct {
	key string
	at  uint64
}

// KVMerkleLeaves is the leaf count of a KV state's Merkle tree: replicas
// must agree on it for their trees to be compared.
const KVMerkleLeaves = 4096

// DefaultTombstones bounds the deleted keys a KV state remembers for Delta.
const DefaultTombstones = 1 << 14

func newKVState() *KVState {
	return &KVState{m: map[string]kvEntry{}, leaves: KVMerkleLeaves, tombLimit: DefaultTombstones}
}

// SetTombstoneLimit changes how many deleted keys the state remembers (at
// least 1); a smaller limit raises the oldest version Delta can serve sooner.
func (s *KVState) SetTombstoneLimit(n int) {
	s.tombLimit = max(n, 1)
	s.evictTombs()
}

// Len returns the number of keys.
func (s *KVState) Len() int { return len(s.m) }

// put records a write of key (seed 002 II.A: the change a state update
// carries): a new version, the key's last-change version, the journal and,
// when hashed, the key's leaf.
func (s *KVState) put(key string, v []byte) {
	s.version++
	s.m[key] = kvEntry{v: v, at: s.version}
	if s.tomb != nil {
		if _, ok := s.tomb[key]; ok {
			s.ownTomb()
			delete(s.tomb, key)
		}
	}
	if s.tree != nil {
		s.ownTree()
		s.tree.Put(key, v)
	}
	s.note(key, s.version)
}

// del records the deletion of key, leaving a tombstone.
func (s *KVState) del(key string) {
	s.version++
	delete(s.m, key)
	s.ownTomb()
	s.tomb[key] = s.version
	s.tq = append(s.tq, change{key, s.version})
	if s.tree != nil {
		s.ownTree()
		s.tree.Delete(key)
	}
	s.note(key, s.version)
	s.evictTombs()
}

// note appends a change to the journal, compacting it when stale entries
// make up more than half of it (amortised O(1) per write).
func (s *KVState) note(key string, at uint64) {
	s.journal = append(s.journal, change{key, at})
	if n := len(s.journal); n >= 1024 && n > 2*(len(s.m)+len(s.tomb)) {
		s.journal = s.compact(s.journal)
	}
}

// current reports whether journal entry c still names key's last change.
func (s *KVState) current(c change) bool {
	if e, ok := s.m[c.key]; ok {
		return e.at == c.at
	}
	at, ok := s.tomb[c.key]
	return ok && at == c.at
}

// compact returns the current entries of l in a new array (clones may
// share the old one).
func (s *KVState) compact(l []change) []change {
	out := make([]change, 0, len(l)/2+16)
	for _, c := range l {
		if s.current(c) {
			out = append(out, c)
		}
	}
	return out
}

// evictTombs forgets the oldest tombstones beyond the limit; Delta can no
// longer start before the newest forgotten one.
func (s *KVState) evictTombs() {
	for len(s.tomb) > s.tombLimit && len(s.tq) > 0 {
		c := s.tq[0]
		s.tq = s.tq[1:]
		if at, ok := s.tomb[c.key]; ok && at == c.at {
			s.ownTomb()
			delete(s.tomb, c.key)
			s.floor = max(s.floor, c.at)
		}
	}
	if len(s.tq) >= 64 && len(s.tq) > 2*len(s.tomb) {
		out := make([]change, 0, len(s.tomb)+16)
		for _, c := range s.tq {
			if at, ok := s.tomb[c.key]; ok && at == c.at {
				out = append(out, c)
			}
		}
		s.tq = out
	}
}

func (s *KVState) ownTomb() {
	if s.tomb == nil {
		s.tomb = map[string]uint64{}
	} else if s.tombShared {
		s.tomb = maps.Clone(s.tomb)
	}
	s.tombShared = false
}

func (s *KVState) ownTree() {
	if s.treeShared {
		s.tree = s.tree.Clone()
		s.treeShared = false
	}
}

// Apply implements State.
func (s *KVState) Apply(op Op) Result {
	if err := (KV{}).Validate(op); err != nil {
		return Errorf("%v", err)
	}
	e, ok := s.m[op.Key]
	v := e.v
	switch op.Kind {
	case "get":
		if !ok {
			return Nil()
		}
		return Bytes(v)
	case "exists":
		if ok {
			return Int(1)
		}
		return Int(0)
	case "set":
		if len(op.Args) == 2 {
			if (string(op.Args[1]) == "nx") == ok {
				return Nil()
			}
		}
		s.put(op.Key, op.Args[0])
		return OK()
	case "del":
		if !ok {
			return Int(0)
		}
		s.del(op.Key)
		return Int(1)
	case "cas":
		if !ok || string(v) != string(op.Args[0]) {
			return Int(0)
		}
		s.put(op.Key, op.Args[1])
		return Int(1)
	case "append":
		nv := make([]byte, 0, len(v)+len(op.Args[0]))
		nv = append(append(nv, v...), op.Args[0]...)
		if len(nv) > MaxValueSize {
			return Errorf("string exceeds maximum allowed size")
		}
		s.put(op.Key, nv)
		return Int(int64(len(nv)))
	case "incr":
		var cur int64
		if ok {
			c, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return Errorf("value is not an integer or out of range")
			}
			cur = c
		}
		d, _ := strconv.ParseInt(string(op.Args[0]), 10, 64)
		n := cur + d
		if (d > 0 && n < cur) || (d < 0 && n > cur) {
			return Errorf("increment or decrement would overflow")
		}
		s.put(op.Key, []byte(strconv.FormatInt(n, 10)))
		return Int(n)
	}
	return Errorf("unknown kv operation %q", op.Kind)
}

// snapVersion is the snapshot format of the three built-in states: format 2
// carries the state's Version after the format byte; format 1 (without it)
// is still read, as version 0.
const snapVersion = 2

// Snapshot implements State: the version, then the keys in sorted order, so
// equal states (same content, same version) give equal bytes.
func (s *KVState) Snapshot() []byte {
	keys := make([]string, 0, len(s.m))
	for k := range s.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e := wire.Encoder{B: []byte{snapVersion}}
	e.Uvarint(s.version)
	e.Uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.String(k)
		e.Bytes(s.m[k].v)
	}
	return e.B
}

// Restore implements State. The restored version is the baseline: Delta
// serves changes from it on, the Merkle tree is rebuilt when next hashed.
func (s *KVState) Restore(snap []byte) error {
	d := wire.NewDecoder(snap)
	ver, err := snapshotHeader(d, "kv")
	if err != nil {
		return err
	}
	n := d.Count(1<<40, 2)
	m := make(map[string]kvEntry, n)
	for i := 0; i < n; i++ {
		k := d.String()
		m[k] = kvEntry{v: d.BytesCopy()}
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
	*s = KVState{m: m, version: ver, floor: ver, leaves: leaves, tombLimit: limit}
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

// kvDelta is one decoded delta entry: a key's value, or its tombstone.
type kvDelta struct {
	key  string
	at   uint64
	live bool
	v    []byte
}

// Delta implements DeltaState: every key changed after version since, with
// its current value or a tombstone, sorted by key (format: codec byte,
// since, to, count, then per key: key, version of its last change, 1 and
// the value, or 0 for a tombstone).
func (s *KVState) Delta(since uint64) ([]byte, error) {
	if since > s.version || since < s.floor {
		return nil, fmt.Errorf("%w %d (kv state at %d can serve from %d)", ErrDeltaUnavailable, since, s.version, s.floor)
	}
	j := sort.Search(len(s.journal), func(i int) bool { return s.journal[i].at > since })
	var out []kvDelta
	for _, c := range s.journal[j:] {
		if e, ok := s.m[c.key]; ok {
			if e.at == c.at {
				out = append(out, kvDelta{key: c.key, at: c.at, live: true, v: e.v})
			}
		} else if at, ok := s.tomb[c.key]; ok && at == c.at {
			out = append(out, kvDelta{key: c.key, at: c.at})
		}
	}
	slices.SortFunc(out, func(a, b kvDelta) int { return strings.Compare(a.key, b.key) })
	size := 32
	for i := range out {
		size += len(out[i].key) + len(out[i].v) + 16
	}
	e := wire.Encoder{B: make([]byte, 0, size)}
	e.Byte(deltaCodec)
	e.Uvarint(since)
	e.Uvarint(s.version)
	e.Uvarint(uint64(len(out)))
	for _, c := range out {
		e.String(c.key)
		e.Uvarint(c.at)
		e.Bool(c.live)
		if c.live {
			e.Bytes(c.v)
		}
	}
	return e.B, nil
}

// ApplyDelta implements DeltaState (seed 002 III.A: the backup "injects the
// state into the service application"). The whole delta is decoded and
// checked before anything changes.
func (s *KVState) ApplyDelta(delta []byte) error {
	d := wire.NewDecoder(delta)
	if v := d.Byte(); v != deltaCodec && d.Err() == nil {
		return fmt.Errorf("%w: kv delta format %d", ErrDeltaMismatch, v)
	}
	since, to := d.Uvarint(), d.Uvarint()
	n := d.Count(1<<40, 3)
	ents := make([]kvDelta, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		c := kvDelta{key: d.String(), at: d.Uvarint(), live: d.Bool()}
		if c.live {
			c.v = d.BytesCopy()
		}
		if d.Err() == nil && (c.at <= since || c.at > to) {
			d.Fail(fmt.Errorf("key %q changed at %d, outside (%d, %d]", c.key, c.at, since, to))
		}
		ents = append(ents, c)
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
		if c := cmpUint(a.at, b.at); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	j0, q0 := len(s.journal), len(s.tq)
	for _, c := range ents {
		if c.live {
			if e, ok := s.m[c.key]; ok && e.at == c.at {
				continue
			}
			s.m[c.key] = kvEntry{v: c.v, at: c.at}
			if _, ok := s.tomb[c.key]; ok {
				s.ownTomb()
				delete(s.tomb, c.key)
			}
			if s.tree != nil {
				s.ownTree()
				s.tree.Put(c.key, c.v)
			}
		} else {
			if at, ok := s.tomb[c.key]; ok && at == c.at {
				continue
			}
			if _, ok := s.m[c.key]; ok {
				delete(s.m, c.key)
				if s.tree != nil {
					s.ownTree()
					s.tree.Delete(c.key)
				}
			}
			s.ownTomb()
			s.tomb[c.key] = c.at
			s.tq = append(s.tq, change{c.key, c.at})
		}
		s.journal = append(s.journal, change{c.key, c.at})
	}
	s.journal = keepSorted(s.journal, j0)
	s.tq = keepSorted(s.tq, q0)
	s.version = to
	s.evictTombs()
	if n := len(s.journal); n >= 1024 && n > 2*(len(s.m)+len(s.tomb)) {
		s.journal = s.compact(s.journal)
	}
	return nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// keepSorted restores version order after entries were appended from index
// from on (each run sorted): only when a state installs a delta that starts
// before its own version. It sorts a copy, since clones may share l's array.
func keepSorted(l []change, from int) []change {
	if from == 0 || from >= len(l) || l[from-1].at <= l[from].at {
		return l
	}
	c := slices.Clone(l)
	slices.SortStableFunc(c, func(a, b change) int { return cmpUint(a.at, b.at) })
	return c
}

// hashed returns the state's own, up-to-date-on-demand tree, building it
// on first use.
func (s *KVState) hashed() *MerkleTree {
	if s.tree == nil {
		s.tree = BuildMerkleTree(s.leaves, func(yield func(string, []byte) bool) {
			for k, e := range s.m {
				if !yield(k, e.v) {
					return
				}
			}
		})
		s.treeShared = false
	}
	if s.tree.Dirty() > 0 {
		s.ownTree()
	}
	return s.tree
}

// StateHash implements HashedState. The first call builds the tree (O(n));
// later calls rehash only the leaves written since.
func (s *KVState) StateHash() [32]byte { return s.hashed().Root() }

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

// ExportRanges implements RangeState (format: codec byte, version, count of
// ranges and each as lo, hi, count of entries and each as key, value).
func (s *KVState) ExportRanges(rs []Range) []byte {
	keys := s.KeysIn(rs)
	e := wire.Encoder{B: []byte{deltaCodec}}
	e.Uvarint(s.version)
	e.Uvarint(uint64(len(rs)))
	for _, r := range rs {
		e.Uvarint(uint64(r.Lo))
		e.Uvarint(uint64(r.Hi))
	}
	e.Uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.String(k)
		e.Bytes(s.m[k].v)
	}
	return e.B
}

// ImportRanges implements RangeState: the state's keys in the exported
// ranges are replaced by the exported entries, and the exporter's version
// becomes the state's version and Delta baseline (per-key change versions
// are forgotten, as after Restore). O(n) for the baseline, plus the
// transferred entries.
func (s *KVState) ImportRanges(b []byte) error {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != deltaCodec && d.Err() == nil {
		return fmt.Errorf("kv: range export format %d", v)
	}
	ver := d.Uvarint()
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
	n := d.Count(1<<40, 2)
	type kv struct {
		k string
		v []byte
	}
	ents := make([]kv, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		c := kv{d.String(), d.BytesCopy()}
		if d.Err() == nil && !inRanges(rs, t.LeafOf(c.k)) {
			d.Fail(fmt.Errorf("key %q outside the exported ranges", c.k))
		}
		ents = append(ents, c)
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
		s.m[c.k] = kvEntry{v: c.v}
		s.tree.Put(c.k, c.v)
	}
	for k, e := range s.m {
		if e.at != 0 {
			s.m[k] = kvEntry{v: e.v}
		}
	}
	tree := s.tree
	s.reset(s.m, ver)
	s.tree = tree
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
