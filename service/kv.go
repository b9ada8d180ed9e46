package service

import (
	"fmt"
	"maps"
	"slices"
)

// KV is a keyspace of typed values (strings, hashes, lists, sets, sorted
// sets) with Redis semantics, per-key versions and replicated expiry. The
// operations, their results and the decisions are listed in the package
// documentation (kv_doc.go); each concern has its file: kv_types.go (the
// values), kv_string.go, kv_hash.go, kv_list.go, kv_set.go, kv_zset.go,
// kv_keys.go (keyspace operations), kv_version.go (WATCH), kv_expiry.go,
// kv_snapshot.go (snapshots, deltas, hashing).
type KV struct{}

func init() {
	Register(KV{})
	Register(Counter{})
}

// Name implements Service.
func (KV) Name() string { return "kv" }

// RegisterKinds are the KV operations a register protocol (ABD, blocking) can run.
var RegisterKinds = map[string]bool{"get": true, "exists": true, "set": true, "del": true}

// kvOp describes one KV operation: whether it only reads, its argument
// counts (max -1: unbounded), an optional syntax check run by Validate, and
// the handler.
type kvOp struct {
	read     bool
	min, max int
	check    func(Op) error
	run      func(s *KVState, op Op) Result
	// keys lists the keys the operation touches besides Op.Key (rename's
	// destination), for lazy expiry and locks.
	keys func(Op) []string
	// keyspace marks operations on the whole keyspace (Op.Key unused).
	keyspace bool
}

// kvOps is the operation table; each kv_*.go file adds its operations.
var kvOps = map[string]kvOp{}

func addKVOps(m map[string]kvOp) {
	for k, o := range m {
		if _, dup := kvOps[k]; dup {
			panic("service: kv operation " + k + " defined twice")
		}
		kvOps[k] = o
	}
}

// KVKinds lists every KV operation, sorted (for the gateway's tests and
// help).
func KVKinds() []string {
	out := make([]string, 0, len(kvOps))
	for k := range kvOps {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

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
	o, ok := kvOps[op.Kind]
	if !ok {
		return fmt.Errorf("unknown kv operation %q", op.Kind)
	}
	if len(op.Args) < o.min || (o.max >= 0 && len(op.Args) > o.max) {
		return fmt.Errorf("%w for '%s' command", ErrArity, op.Kind)
	}
	if o.check != nil {
		return o.check(op)
	}
	return nil
}

// IsRead implements Service.
func (KV) IsRead(op Op) bool {
	o, ok := kvOps[op.Kind]
	return ok && o.read
}

// NewState implements Service.
func (KV) NewState() State { return newKVState() }

// KVState is the state of a KV replica.
//
// Besides the map it keeps what state transfer and hashing need (see the
// package documentation in transfer.go): the version (count of writes), per
// key the version of its last change, bounded tombstones, a journal of
// changes in version order, and, once StateHash or MerkleTree has been called,
// a Merkle tree that every later write keeps up to date. For WATCH it keeps
// per key a generation and the latest deletion's version (kv_version.go), for expiry the clock and the keys with
// deadlines (kv_expiry.go).
type KVState struct {
	m       map[string]kvEntry
	version uint64
	// floor is the oldest version Delta can start from: the Restore
	// baseline, raised when a tombstone is evicted.
	floor uint64
	// WATCH versions of absent keys (kv_version.go): wt maps a deleted
	// key to its version (its generation at deletion plus one), for at
	// most tombLimit keys; when it would hold more it is flushed at once:
	// gone takes the largest of them and wflush the flushing version.
	wt     map[string]uint64
	gone   uint64
	wflush uint64
	// clock is the largest Env time (Unix ms) of the writes applied.
	clock int64
	// exps maps every key with a deadline to it.
	exps map[string]int64
	// tomb maps a deleted key to the version that deleted it, for at most
	// tombLimit keys (the oldest go first); tq lists them in version order
	// (stale entries, for keys since re-created or evicted, are skipped).
	tomb      map[string]uint64
	tq        []change
	tombLimit int
	// journal lists (key, version) in version order for every change after
	// floor; an entry is current while the key's last change is still at
	// that version. Compacted when twice as long as the keys it can name.
	// journalShared: a Clone may read the journal's array (compact then
	// copies it instead of compacting in place).
	journal       []change
	journalShared bool
	// tree is nil until first hashed; leaves is its shape. unhashed lists
	// the collections (and strings with deadlines) written since the tree
	// last took their entry hashes: a collection's hash covers its whole
	// encoding, so it is taken once per StateHash, not once per write.
	tree     *MerkleTree
	leaves   int
	unhashed map[string]struct{}
	// Clone shares the tree, the tombstone map and the deadline map
	// copy-on-write; these say the first mutation must copy. (Journal and
	// tq are shared through full slice expressions: only appends beyond a
	// clone's length ever write to a shared array.)
	treeShared, tombShared, expsShared, wtShared bool
	// libs is the function library table (kv_function.go), replaced, never
	// changed in place; libsAt is the version of its last change.
	libs   map[string]*fnLib
	libsAt uint64
	// tok marks the collections this state may change in place: those
	// whose owner is tok (kv_types.go). Clone gives both sides new tokens.
	tok *int

	// The operation being applied: its time (ms) and whether it has one,
	// and its environment (SRANDMEMBER, RANDOMKEY).
	now   int64
	timed bool
	env   Env
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
	return &KVState{m: map[string]kvEntry{}, leaves: KVMerkleLeaves, tombLimit: DefaultTombstones, tok: new(int)}
}

// SetTombstoneLimit changes how many deleted keys the state remembers (at
// least 1); a smaller limit raises the oldest version Delta can serve sooner.
func (s *KVState) SetTombstoneLimit(n int) {
	s.tombLimit = max(n, 1)
	s.evictTombs()
}

// Len returns the number of keys (expired ones not yet removed included).
func (s *KVState) Len() int { return len(s.m) }

// Apply implements State: the operation without an environment (time
// unknown: see "Which protocols" in the package documentation).
func (s *KVState) Apply(op Op) Result { return s.ApplyEnv(op, Env{}) }

// ApplyEnv implements EnvApplier. A write advances the state's clock to
// the environment's time and first removes the expired keys it touches; a
// read evaluates expiry at the later of the clock and its own time
// (kv_expiry.go).
func (s *KVState) ApplyEnv(op Op, env Env) Result {
	if err := (KV{}).Validate(op); err != nil {
		return Errorf("%v", err)
	}
	o := kvOps[op.Kind]
	s.env, s.timed = env, env.Time > 0
	s.now = s.clock
	if s.timed {
		s.now = max(s.now, env.Time/1e6)
	}
	if !o.read {
		s.clock = s.now
	}
	return s.runOp(o, op)
}

// runOp runs op (its table entry o) at s.now: a write first removes the
// expired keys it touches.
func (s *KVState) runOp(o kvOp, op Op) Result {
	if !o.read {
		if !o.keyspace {
			s.reap(op.Key)
		}
		if o.keys != nil {
			for _, k := range o.keys(op) {
				s.reap(k)
			}
		}
	}
	return o.run(s, op)
}

// put records a write of key (the Grid Services thesis II.A: the change a state update
// carries): a new version, the key's last-change version, its deadline,
// the journal and, when hashed, the key's leaf.
func (s *KVState) put(key string, e kvEntry) {
	s.version++
	e.at = s.version
	if old, ok := s.m[key]; ok {
		e.gen = old.gen + 1
	} else {
		e.gen = s.absentVersion(key) + 1
		if _, ok := s.wt[key]; ok {
			s.ownWT()
			delete(s.wt, key)
		}
	}
	s.m[key] = e
	s.setExp(key, e.exp)
	if s.tomb != nil {
		if _, ok := s.tomb[key]; ok {
			s.ownTomb()
			delete(s.tomb, key)
		}
	}
	s.treePut(key, e)
	s.note(key, s.version)
}

// treePut brings key's entry into the tree, when there is one: a plain
// string at once (as before typed values), anything else when next hashed.
func (s *KVState) treePut(key string, e kvEntry) {
	if s.tree == nil {
		return
	}
	if e.c == nil && e.exp == 0 {
		delete(s.unhashed, key)
		s.ownTree()
		s.tree.PutHash(key, e.hash(key))
		return
	}
	if s.unhashed == nil {
		s.unhashed = map[string]struct{}{}
	}
	s.unhashed[key] = struct{}{}
}

// treeDelete removes key from the tree, when there is one.
func (s *KVState) treeDelete(key string) {
	if s.tree == nil {
		return
	}
	delete(s.unhashed, key)
	s.ownTree()
	s.tree.Delete(key)
}

// putString writes a string value with deadline exp (0: none).
func (s *KVState) putString(key string, v []byte, exp int64) {
	s.put(key, kvEntry{v: v, exp: exp})
}

// del records the deletion of key, leaving a tombstone.
func (s *KVState) del(key string) {
	s.version++
	if old, ok := s.m[key]; ok {
		s.forget(key, old.gen+1)
	}
	delete(s.m, key)
	s.setExp(key, 0)
	s.ownTomb()
	s.tomb[key] = s.version
	s.tq = append(s.tq, change{key, s.version})
	s.treeDelete(key)
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

// compact returns the current entries of l: in l's own array when no
// clone shares it (s.journalShared), else in a new one. In place, a state
// whose few keys change often (one key written 1,000 times a second)
// allocates no journal array per compaction, where it allocated two
// (the compacted copy and its growth back to the threshold).
func (s *KVState) compact(l []change) []change {
	if !s.journalShared {
		out := l[:0]
		for _, c := range l {
			if s.current(c) {
				out = append(out, c)
			}
		}
		clear(l[len(out):]) // no key kept alive by a dropped entry
		return out
	}
	s.journalShared = false
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

func (s *KVState) ownWT() {
	if s.wt == nil {
		s.wt = map[string]uint64{}
	} else if s.wtShared {
		s.wt = maps.Clone(s.wt)
	}
	s.wtShared = false
}

func (s *KVState) ownExps() {
	if s.exps == nil {
		s.exps = map[string]int64{}
	} else if s.expsShared {
		s.exps = maps.Clone(s.exps)
	}
	s.expsShared = false
}

// setExp records key's deadline (0: none) in the deadline map.
func (s *KVState) setExp(key string, exp int64) {
	if exp == 0 {
		if _, ok := s.exps[key]; ok {
			s.ownExps()
			delete(s.exps, key)
		}
		return
	}
	if old, ok := s.exps[key]; ok && old == exp {
		return
	}
	s.ownExps()
	s.exps[key] = exp
}
