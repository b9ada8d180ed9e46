package service

import (
	"crypto/sha256"
	"fmt"
	"sync"

	"github.com/synod-dev/synod/wire"
)

// ShardedKV is the KV service (same operations, same answers) with a state
// split into shards by key, for execute-verify replication (the Eve/Adam thesis, Eve:
// "replicas ... fully leverage the potential of their underlying multicore
// machines to execute all of the requests in parallel").
//
// Three things set it apart from KV:
//
//   - Concurrency. Operations on different keys may run on different
//     goroutines at once: each shard has its own lock, so the state is
//     safe for concurrent Apply, and operations of one shard serialise.
//   - Conflict keys (Conflicter). ConflictKeys(op) names the keys an
//     operation reads and writes, for Eve's mixer ("requests that modify
//     the same state variables"). Two operations conflict when they share a
//     key and one of them writes it.
//   - Copy-on-write checkpoints (Checkpoint). A checkpoint shares every
//     shard with the state; the first write to a shard afterwards copies
//     that shard alone. Rolling back is dropping the working state and
//     keeping the checkpoint: O(shards) to take, O(written shards) to pay.
//
// Hashing is a two-level Merkle tree: each shard keeps a MerkleTree of
// ShardLeaves leaves over its entries; the state's root hashes the shard
// roots in shard order. ShardRoots, DiffShards, ExportShards and
// ImportShards give an incremental state transfer at shard granularity: a
// replica sends its shard roots, a correct one answers with the shards that
// differ (the top log2(shards) levels of the tree are the diff).
//
// "shardedkv-loose" is the same service with a deliberately incomplete
// conflict declaration: it declares set as if it only read its key (as if
// blind writes commuted), which is false: two sets of one key leave
// different values in different orders, and a get beside a set sees one
// or the other. Eve's mixer then puts such requests in one parallel batch,
// replicas interleave them differently, their tokens differ and the
// verifiers roll the batch back. It exists to make
// the rollback path run (protocol/eve); the answers of the service itself
// are KV's.
type ShardedKV struct{ loose bool }

// Names of the two sharded services.
const (
	ShardedKVName      = "shardedkv"
	ShardedKVLooseName = "shardedkv-loose"
)

// DefaultShards is the shard count of a ShardedKV state (a power of two).
const DefaultShards = 16

// ShardLeaves is the leaf count of one shard's Merkle tree.
const ShardLeaves = 256

func init() {
	Register(ShardedKV{})
	Register(ShardedKV{loose: true})
}

// Name implements Service.
func (s ShardedKV) Name() string {
	if s.loose {
		return ShardedKVLooseName
	}
	return ShardedKVName
}

// Validate implements Service: KV's operations on one key. Operations that
// name other keys (rename, sinter, ...) or the whole keyspace (flushdb,
// scan, ...) are refused: a shard cannot run them alone.
func (ShardedKV) Validate(op Op) error {
	if err := (KV{}).Validate(op); err != nil {
		return err
	}
	if ls := (KV{}).Locks(op); len(ls) > 1 || op.Key == "" || kvOps[op.Kind].keyspace {
		return fmt.Errorf("shardedkv: %s spans keys; the sharded KV runs single-key operations only", op.Kind)
	}
	return nil
}

// IsRead implements Service.
func (ShardedKV) IsRead(op Op) bool { return KV{}.IsRead(op) }

// NewState implements Service.
func (ShardedKV) NewState() State { return NewShardedState(DefaultShards) }

// Conflicter is implemented by services that declare, per operation, the
// keys it touches, for a scheduler that runs non-conflicting operations
// concurrently (Eve's mixer).
type Conflicter interface {
	// ConflictKeys lists the keys op reads or writes, each once, Write set
	// when op may change it.
	ConflictKeys(op Op) []Lock
}

// ConflictKeys implements Conflicter. The loose service declares set as a
// read: the incomplete declaration that makes replicas diverge.
func (s ShardedKV) ConflictKeys(op Op) []Lock {
	w := !s.IsRead(op)
	if s.loose && op.Kind == "set" {
		w = false
	}
	return []Lock{{Key: op.Key, Write: w}}
}

// ConflictKeysOf returns svc's conflict keys for op: its Conflicter
// declaration, else its Lockable locks; ok is false when svc declares
// neither (every operation must then be taken to conflict with every
// other).
func ConflictKeysOf(svc Service, op Op) ([]Lock, bool) {
	if c, ok := svc.(Conflicter); ok {
		return c.ConflictKeys(op), true
	}
	return LocksOf(svc, op)
}

// ShardedState is a ShardedKV replica's state. It is safe for concurrent
// Apply; the other methods must not run concurrently with Apply.
type ShardedState struct {
	shards []*kvShard
	// owned[i] says shard i belongs to this state alone; otherwise it is
	// shared with a checkpoint and copied before its first write.
	owned []bool
	locks []sync.Mutex
}

// kvShard is one shard: a KV state and the Merkle tree over its entries.
// A shared shard is never written.
type kvShard struct {
	mu   sync.Mutex
	kv   *KVState
	tree *MerkleTree
}

// NewShardedState returns an empty state of n shards (a power of two).
func NewShardedState(n int) *ShardedState {
	if n < 1 || n&(n-1) != 0 {
		panic(fmt.Sprintf("service: shard count %d is not a power of two", n))
	}
	s := &ShardedState{shards: make([]*kvShard, n), owned: make([]bool, n), locks: make([]sync.Mutex, n)}
	for i := range s.shards {
		s.shards[i] = &kvShard{kv: newKVState(), tree: NewMerkleTree(ShardLeaves)}
		s.owned[i] = true
	}
	return s
}

// Shards returns the shard count.
func (s *ShardedState) Shards() int { return len(s.shards) }

// ShardOf returns the shard that holds key.
func (s *ShardedState) ShardOf(key string) int { return leafOf(key, len(s.shards)) }

// Apply implements State; safe for concurrent use.
func (s *ShardedState) Apply(op Op) Result { return s.ApplyEnv(op, Env{}) }

// ApplyEnv implements EnvApplier (KV's expiry reads the time); safe for
// concurrent use. A shard's KV state is used under its own lock, which
// states that share the shard share too: KV's reads set its clock fields.
func (s *ShardedState) ApplyEnv(op Op, env Env) Result {
	if err := (ShardedKV{}).Validate(op); err != nil {
		return Errorf("%v", err)
	}
	i := s.ShardOf(op.Key)
	s.locks[i].Lock()
	defer s.locks[i].Unlock()
	write := !(KV{}).IsRead(op)
	sh := s.shards[i]
	if write {
		sh = s.own(i)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	r := sh.kv.ApplyEnv(op, env)
	if write {
		if e, ok := sh.kv.m[op.Key]; ok {
			sh.tree.PutHash(op.Key, e.hash(op.Key))
		} else {
			sh.tree.Delete(op.Key)
		}
	}
	return r
}

// own makes shard i this state's own (copying it when shared) and returns
// it; the caller holds locks[i].
func (s *ShardedState) own(i int) *kvShard {
	if s.owned[i] {
		return s.shards[i]
	}
	old := s.shards[i]
	old.mu.Lock()
	snap := old.kv.Snapshot()
	tree := old.tree.Clone()
	old.mu.Unlock()
	kv := newKVState()
	if err := kv.Restore(snap); err != nil {
		panic(fmt.Sprintf("service: shard copy: %v", err))
	}
	sh := &kvShard{kv: kv, tree: tree}
	s.shards[i], s.owned[i] = sh, true
	return sh
}

// Checkpoint returns a copy-on-write copy of the state: both share every
// shard until either writes one. Trees are brought up to date first, so
// that shared trees are never written by hashing either.
func (s *ShardedState) Checkpoint() *ShardedState {
	s.ShardRoots()
	c := &ShardedState{shards: append([]*kvShard(nil), s.shards...), owned: make([]bool, len(s.shards)), locks: make([]sync.Mutex, len(s.shards))}
	for i := range s.owned {
		s.owned[i] = false
	}
	return c
}

// Clone returns a copy-on-write copy (Checkpoint), for protocols that keep
// a second copy of a state.
func (s *ShardedState) Clone() State { return s.Checkpoint() }

// SharedShards returns how many shards the state shares with a checkpoint
// (for tests and figures: the copy-on-write saving).
func (s *ShardedState) SharedShards() int {
	n := 0
	for _, o := range s.owned {
		if !o {
			n++
		}
	}
	return n
}

// ShardRoots returns each shard's Merkle root, in shard order.
func (s *ShardedState) ShardRoots() [][32]byte {
	out := make([][32]byte, len(s.shards))
	for i, sh := range s.shards {
		if sh.tree.Dirty() > 0 && !s.owned[i] {
			// A shared tree is clean (Checkpoint); never rehash it here.
			panic("service: dirty shared shard tree")
		}
		out[i] = sh.tree.Root()
	}
	return out
}

// tagShards separates the top of the sharded tree from the per-shard trees'
// hash inputs (0x00-0x02, merkle.go).
const tagShards = 0x03

// StateHash returns the root over the shard roots: SHA-256(0x03 ‖ r₀ ‖ … ‖
// rₙ₋₁). Equal contents give equal roots whatever the versions.
func (s *ShardedState) StateHash() [32]byte { return RootOfShards(s.ShardRoots()) }

// RootOfShards is StateHash's combination of shard roots.
func RootOfShards(roots [][32]byte) [32]byte {
	b := make([]byte, 0, 1+32*len(roots))
	b = append(b, tagShards)
	for _, r := range roots {
		b = append(b, r[:]...)
	}
	return sha256.Sum256(b)
}

// MerkleTree implements HashedState: a tree whose entries are the shard
// roots (its root is StateHash's input, not StateHash itself: the
// per-shard diff is DiffShards). It lets service.StateHash and the
// simulator's convergence checks hash the content only.
func (s *ShardedState) MerkleTree() *MerkleTree {
	t := NewMerkleTree(1)
	for i, r := range s.ShardRoots() {
		t.PutHash(fmt.Sprint(i), r)
	}
	return t
}

// DiffShards returns the shards whose roots differ from roots (all of them
// when the shard counts differ).
func (s *ShardedState) DiffShards(roots [][32]byte) []int {
	mine := s.ShardRoots()
	var out []int
	for i := range mine {
		if len(roots) != len(mine) || roots[i] != mine[i] {
			out = append(out, i)
		}
	}
	return out
}

// ExportShards encodes the listed shards (format: codec byte, shard count,
// number of shards sent, then each as index and KV snapshot).
func (s *ShardedState) ExportShards(idx []int) []byte {
	e := wire.Encoder{B: []byte{deltaCodec}}
	e.Uvarint(uint64(len(s.shards)))
	e.Uvarint(uint64(len(idx)))
	for _, i := range idx {
		sh := s.shards[i]
		sh.mu.Lock()
		e.Uvarint(uint64(i))
		e.Bytes(sh.kv.Snapshot())
		sh.mu.Unlock()
	}
	return e.B
}

// ImportShards replaces the exported shards by the exported copies. It
// decodes everything before changing anything.
func (s *ShardedState) ImportShards(b []byte) error {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != deltaCodec && d.Err() == nil {
		return fmt.Errorf("shardedkv: shard export format %d", v)
	}
	if n := d.Uvarint(); d.Err() == nil && n != uint64(len(s.shards)) {
		return fmt.Errorf("shardedkv: export of %d shards into %d", n, len(s.shards))
	}
	k := d.Count(len(s.shards), 2)
	idx := make([]int, 0, k)
	news := make([]*kvShard, 0, k)
	for j := 0; j < k && d.Err() == nil; j++ {
		i := d.Uvarint()
		snap := d.BytesCopy()
		if d.Err() != nil {
			break
		}
		if i >= uint64(len(s.shards)) {
			return fmt.Errorf("shardedkv: shard %d of %d", i, len(s.shards))
		}
		sh, err := restoreShard(snap)
		if err != nil {
			return err
		}
		idx, news = append(idx, int(i)), append(news, sh)
	}
	if err := d.Done(); err != nil {
		return fmt.Errorf("shardedkv: bad shard export: %w", err)
	}
	for j, i := range idx {
		s.shards[i], s.owned[i] = news[j], true
	}
	return nil
}

func restoreShard(snap []byte) (*kvShard, error) {
	kv := newKVState()
	if err := kv.Restore(snap); err != nil {
		return nil, err
	}
	t := NewMerkleTree(ShardLeaves)
	for k, e := range kv.m {
		t.PutHash(k, e.hash(k))
	}
	t.Root()
	return &kvShard{kv: kv, tree: t}, nil
}

// Snapshot implements State (format: codec byte, shard count, each
// shard's KV snapshot).
func (s *ShardedState) Snapshot() []byte {
	all := make([]int, len(s.shards))
	for i := range all {
		all[i] = i
	}
	return s.ExportShards(all)
}

// Restore implements State.
func (s *ShardedState) Restore(snap []byte) error {
	n := NewShardedState(len(s.shards))
	if err := n.ImportShards(snap); err != nil {
		return err
	}
	s.shards, s.owned = n.shards, n.owned
	return nil
}

// Len returns the number of keys.
func (s *ShardedState) Len() int {
	n := 0
	for _, sh := range s.shards {
		n += sh.kv.Len()
	}
	return n
}
