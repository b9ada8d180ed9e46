package service

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// The sharded state answers exactly as KV does, and hashes its content.
func TestShardedAnswersLikeKV(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	kv, sh := newKVState(), NewShardedState(DefaultShards)
	for i := 0; i < 3000; i++ {
		op := randomKVOp(r, 40)
		a, b := kv.Apply(op), sh.Apply(op)
		if !a.Equal(b) {
			t.Fatalf("op %d %v: kv %v, sharded %v", i, op, a, b)
		}
	}
	if kv.Len() != sh.Len() {
		t.Fatalf("kv holds %d keys, sharded %d", kv.Len(), sh.Len())
	}
	c := NewShardedState(DefaultShards)
	if err := c.Restore(sh.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if c.StateHash() != sh.StateHash() || StateHash(c) != StateHash(sh) {
		t.Fatal("a restored copy hashes differently")
	}
	sh.Apply(Op{Kind: "set", Key: "new", Args: [][]byte{[]byte("x")}})
	if c.StateHash() == sh.StateHash() {
		t.Fatal("a write did not change the hash")
	}
}

// A checkpoint is unaffected by later writes, shares the shards nobody
// wrote, and hashes like the state it was taken from.
func TestShardedCheckpointCopyOnWrite(t *testing.T) {
	s := NewShardedState(DefaultShards)
	for i := 0; i < 100; i++ {
		s.Apply(Op{Kind: "set", Key: fmt.Sprint("k", i), Args: [][]byte{[]byte("v")}})
	}
	before := s.StateHash()
	ck := s.Checkpoint()
	if s.SharedShards() != DefaultShards || ck.SharedShards() != DefaultShards {
		t.Fatalf("after a checkpoint: %d and %d shared shards", s.SharedShards(), ck.SharedShards())
	}
	s.Apply(Op{Kind: "append", Key: "k1", Args: [][]byte{[]byte("w")}})
	if got := s.SharedShards(); got != DefaultShards-1 {
		t.Fatalf("one write left %d shared shards, want %d", got, DefaultShards-1)
	}
	if ck.StateHash() != before {
		t.Fatal("a write after the checkpoint changed the checkpoint")
	}
	if r := ck.Apply(Op{Kind: "get", Key: "k1"}); string(r.Bytes) != "v" {
		t.Fatalf("checkpoint reads %v", r)
	}
	if r := s.Apply(Op{Kind: "get", Key: "k1"}); string(r.Bytes) != "vw" {
		t.Fatalf("state reads %v", r)
	}
}

// Operations on different keys may run concurrently (run with -race), and
// non-conflicting operations give the same state in any order.
func TestShardedConcurrentApply(t *testing.T) {
	base := NewShardedState(DefaultShards)
	var ops []Op
	for i := 0; i < 400; i++ {
		ops = append(ops, Op{Kind: "append", Key: fmt.Sprint("k", i), Args: [][]byte{[]byte(fmt.Sprint(i))}})
	}
	seq := base.Checkpoint()
	for _, op := range ops {
		seq.Apply(op)
	}
	par := base.Checkpoint()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := len(ops) - 1 - w; i >= 0; i -= 4 {
				par.Apply(ops[i])
				par.Apply(Op{Kind: "get", Key: ops[(i+1)%len(ops)].Key})
			}
		}(w)
	}
	wg.Wait()
	if seq.StateHash() != par.StateHash() {
		t.Fatal("a parallel run of non-conflicting operations diverged")
	}
	if base.Len() != 0 {
		t.Fatal("writes to checkpoints reached the base state")
	}
}

// The shard-level Merkle diff repairs a diverged replica by sending only
// the shards that differ.
func TestShardedTransfer(t *testing.T) {
	a, b := NewShardedState(DefaultShards), NewShardedState(DefaultShards)
	for i := 0; i < 200; i++ {
		op := Op{Kind: "set", Key: fmt.Sprint("k", i), Args: [][]byte{[]byte("v")}}
		a.Apply(op)
		b.Apply(op)
	}
	a.Apply(Op{Kind: "append", Key: "k3", Args: [][]byte{[]byte("x")}})
	b.Apply(Op{Kind: "del", Key: "k4"})
	diff := a.DiffShards(b.ShardRoots())
	want := map[int]bool{a.ShardOf("k3"): true, a.ShardOf("k4"): true}
	if len(diff) != len(want) {
		t.Fatalf("diff %v, want the shards of k3 and k4 %v", diff, want)
	}
	for _, i := range diff {
		if !want[i] {
			t.Fatalf("diff %v names shard %d", diff, i)
		}
	}
	if err := b.ImportShards(a.ExportShards(diff)); err != nil {
		t.Fatal(err)
	}
	if a.StateHash() != b.StateHash() {
		t.Fatal("states differ after the transfer")
	}
	if len(a.DiffShards(b.ShardRoots())) != 0 {
		t.Fatal("diff not empty after the transfer")
	}
	bad := a.ExportShards(diff)
	if err := b.ImportShards(bad[:len(bad)-3]); err == nil {
		t.Fatal("a truncated export was accepted")
	}
}

// The loose service declares set as a read: two sets of one key do not
// conflict by its declaration, though their order matters.
func TestShardedConflictKeys(t *testing.T) {
	app := Op{Kind: "append", Key: "k", Args: [][]byte{[]byte("x")}}
	get := Op{Kind: "get", Key: "k"}
	tight, _ := Lookup(ShardedKVName)
	loose, _ := Lookup(ShardedKVLooseName)
	if l, ok := ConflictKeysOf(tight, app); !ok || len(l) != 1 || !l[0].Write {
		t.Fatalf("shardedkv append: %v %v", l, ok)
	}
	set := Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("x")}}
	if l, _ := ConflictKeysOf(loose, set); l[0].Write {
		t.Fatalf("shardedkv-loose declares set as a write: %v", l)
	}
	if l, _ := ConflictKeysOf(loose, app); !l[0].Write {
		t.Fatalf("shardedkv-loose declares append as a read: %v", l)
	}
	if l, _ := ConflictKeysOf(tight, get); l[0].Write {
		t.Fatalf("get declared as a write: %v", l)
	}
	if l, ok := ConflictKeysOf(KV{}, app); !ok || !l[0].Write {
		t.Fatalf("kv falls back to its locks: %v %v", l, ok)
	}
	if _, ok := ConflictKeysOf(Counter{}, Op{Kind: "read"}); ok {
		t.Fatal("counter declares conflict keys")
	}
}
