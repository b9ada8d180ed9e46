package service

import (
	"encoding/hex"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomKVOp draws a write or read over a small key space, so that keys are
// often overwritten, deleted and re-created.
func randomKVOp(r *rand.Rand, keys int) Op {
	k := fmt.Sprintf("k%d", r.IntN(keys))
	switch r.IntN(10) {
	case 0, 1, 2:
		return op("set", k, fmt.Sprint(r.IntN(4)))
	case 3:
		return op("set", k, "n", "nx")
	case 4, 5:
		return op("del", k)
	case 6:
		return op("append", k, "x")
	case 7:
		return op("incr", k, "1")
	case 8:
		return op("cas", k, "1", "2")
	}
	return op("get", k)
}

// rebuiltRoot hashes s's content from scratch, ignoring its own tree.
func rebuiltRoot(s *KVState) [32]byte {
	return BuildMerkleTree(s.leaves, func(yield func(string, []byte) bool) {
		for k, e := range s.m {
			if !yield(k, e.v) {
				return
			}
		}
	}).Root()
}

func content(s *KVState) map[string]string {
	m := map[string]string{}
	for k, e := range s.m {
		m[k] = string(e.v)
	}
	return m
}

func newKV(leaves int) *KVState {
	s := newKVState()
	s.leaves = leaves
	return s
}

// Two replicas applying independent random sequences hash equal exactly
// when their contents are equal, and the incrementally kept root always
// equals a root rebuilt from scratch.
func TestKVHashEqualIffContentEqual(t *testing.T) {
	for _, tc := range []struct {
		name         string
		leaves, keys int
	}{
		{"one leaf", 1, 3},
		{"few leaves, crowded", 4, 6},
		{"default leaves", KVMerkleLeaves, 5},
		{"default leaves, more keys", KVMerkleLeaves, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(tc.leaves*100+tc.keys)))
			a, b := newKV(tc.leaves), newKV(tc.leaves)
			equalSeen, differSeen := 0, 0
			for step := 0; step < 2000; step++ {
				o := randomKVOp(r, tc.keys)
				a.Apply(o)
				switch r.IntN(8) {
				case 0:
					b.Apply(randomKVOp(r, tc.keys)) // diverge
				case 1:
					// nothing: b lags
				case 2:
					if r.IntN(20) == 0 {
						b.Restore(a.Snapshot()) // resynchronise
					}
				default:
					b.Apply(o)
				}
				if step%7 == 0 && r.IntN(2) == 0 {
					continue // let writes accumulate between hashes
				}
				ha, hb := a.StateHash(), b.StateHash()
				eq := maps.Equal(content(a), content(b))
				if eq != (ha == hb) {
					t.Fatalf("step %d: contents equal %v, hashes equal %v", step, eq, ha == hb)
				}
				if eq {
					equalSeen++
				} else {
					differSeen++
				}
				if (tc.leaves < 64 || step%16 == 0) && (ha != rebuiltRoot(a) || hb != rebuiltRoot(b)) {
					t.Fatalf("step %d: incremental root differs from a rebuilt one", step)
				}
			}
			if equalSeen == 0 || differSeen == 0 {
				t.Fatalf("weak test: %d equal and %d differing comparisons", equalSeen, differSeen)
			}
		})
	}
}

// The same writes in different orders give the same root; the root is
// pinned so that a change of the hash layout (leaf function, entry or node
// encoding) fails here on purpose.
func TestStateHashPinned(t *testing.T) {
	kv := KV{}.NewState().(*KVState)
	for i := range 100 {
		kv.Apply(op("set", fmt.Sprintf("key%03d", i), fmt.Sprint(i*i)))
	}
	kv.Apply(op("del", "key042"))
	kv.Apply(op("append", "key007", "!"))
	rev := KV{}.NewState().(*KVState)
	rev.Apply(op("append", "key007", "49!"))
	for i := 99; i >= 0; i-- {
		if i != 7 && i != 42 {
			rev.Apply(op("set", fmt.Sprintf("key%03d", i), fmt.Sprint(i*i)))
		}
	}
	ctr := Counter{}.NewState().(*CounterState)
	ctr.Apply(op("add", "", "5"))
	ctr.Apply(op("add", "", "-12"))
	str := String{}.NewState().(*StringState)
	str.Apply(op("append", "", "hello, "))
	str.Apply(op("append", "", "world"))
	empty := KV{}.NewState().(*KVState)
	for _, tc := range []struct {
		name string
		st   State
		want string
	}{
		{"kv", kv, "e702a0ab64345f4f3ff13e1d7429bbc804e963981b5c97546cd9675de831447d"},
		{"kv, reversed order", rev, "e702a0ab64345f4f3ff13e1d7429bbc804e963981b5c97546cd9675de831447d"},
		{"kv, empty", empty, "55a5aadce98ed4d75e5b54903bed8e7d6c9ed08d2c43a81541cdb29475707faa"},
		{"counter", ctr, "23e153b9da88f586b4229902afbcbb857f51628800d2a411d836e987b804aac7"},
		{"string", str, "dbe5c1fb05f60e0a5d8ead098c570660321617d98e434ca1de948eaeba8742cc"},
	} {
		h := StateHash(tc.st)
		if got := hex.EncodeToString(h[:]); got != tc.want {
			t.Errorf("%s: root %s, pinned %s", tc.name, got, tc.want)
		}
	}
}

// Diff names exactly the leaf of a single differing key, and the range's
// key list names that key, whether the key differs in value, exists on one
// side only, or was deleted on one side.
func TestMerkleDiffFindsOneKey(t *testing.T) {
	base := KV{}.NewState().(*KVState)
	for i := range 2000 {
		base.Apply(op("set", fmt.Sprintf("user:%d", i), fmt.Sprint(i)))
	}
	for _, tc := range []struct {
		name, key string
		change    Op
	}{
		{"value differs", "user:1234", op("set", "user:1234", "changed")},
		{"only on one side", "fresh", op("set", "fresh", "v")},
		{"deleted on one side", "user:7", op("del", "user:7")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := base.Clone().(*KVState)
			b := base.Clone().(*KVState)
			b.Apply(tc.change)
			rs := Diff(a.MerkleTree(), b.MerkleTree())
			leaf := a.MerkleTree().LeafOf(tc.key)
			if len(rs) != 1 || rs[0] != (Range{leaf, leaf + 1}) {
				t.Fatalf("Diff = %v, want [%d,%d)", rs, leaf, leaf+1)
			}
			inA, inB := slices.Contains(a.KeysIn(rs), tc.key), slices.Contains(b.KeysIn(rs), tc.key)
			if !inA && !inB {
				t.Fatalf("key %q in neither side's range keys", tc.key)
			}
			if rs := Diff(a.MerkleTree(), a.MerkleTree()); rs != nil {
				t.Fatalf("a tree differs from itself: %v", rs)
			}
		})
	}
}

// Adjacent differing leaves merge into one range; separate ones do not.
func TestMerkleDiffRanges(t *testing.T) {
	a, b := NewMerkleTree(16), NewMerkleTree(16)
	// Find keys landing in leaves 3, 4 and 9.
	want := map[int]string{}
	for i := 0; len(want) < 3; i++ {
		k := fmt.Sprint(i)
		if l := a.LeafOf(k); (l == 3 || l == 4 || l == 9) && want[l] == "" {
			want[l] = k
		}
	}
	for _, k := range want {
		b.Put(k, []byte("x"))
	}
	got := Diff(a, b)
	if !slices.Equal(got, []Range{{3, 5}, {9, 10}}) {
		t.Fatalf("Diff = %v, want [3,5) [9,10)", got)
	}
	if got := Diff(a, NewMerkleTree(8)); !slices.Equal(got, []Range{{0, 16}}) {
		t.Fatalf("Diff of different shapes = %v", got)
	}
	// Putting back the same entry or deleting an absent key dirties nothing.
	b.Root()
	b.Put(want[3], []byte("x"))
	b.Delete("absent")
	if b.Dirty() != 0 {
		t.Fatalf("no-op writes dirtied %d leaves", b.Dirty())
	}
}

// A clone and its original are independent, tree included, in both
// directions, and each keeps an exact incremental root.
func TestKVCloneHashIndependence(t *testing.T) {
	a := KV{}.NewState().(*KVState)
	for i := range 500 {
		a.Apply(op("set", fmt.Sprint(i), "v"))
	}
	h0 := a.StateHash()
	b := a.Clone().(*KVState)
	if b.StateHash() != h0 {
		t.Fatal("clone hashes differently")
	}
	b.Apply(op("set", "1", "changed"))
	if a.StateHash() != h0 {
		t.Fatal("a write to the clone changed the original's hash")
	}
	a.Apply(op("del", "2"))
	c := a.Clone().(*KVState)
	a.Apply(op("set", "3", "a-only"))
	for name, s := range map[string]*KVState{"a": a, "b": b, "c": c} {
		if s.StateHash() != rebuiltRoot(s) {
			t.Errorf("%s: incremental root differs from a rebuilt one", name)
		}
	}
	if a.StateHash() == b.StateHash() || a.StateHash() == c.StateHash() || b.StateHash() == c.StateHash() {
		t.Fatal("diverged clones hash alike")
	}
	if got := c.Apply(op("get", "3")); !got.Equal(Bytes([]byte("v"))) {
		t.Fatalf("clone saw the original's later write: %v", got)
	}
}

// Restore discards the tree: the restored state hashes as its source, and
// later writes keep it exact.
func TestKVRestoreResetsTree(t *testing.T) {
	a, b := KV{}.NewState().(*KVState), KV{}.NewState().(*KVState)
	for i := range 300 {
		a.Apply(op("set", fmt.Sprint(i), "a"))
		b.Apply(op("set", fmt.Sprint(i+1000), "b"))
	}
	a.StateHash()
	if err := a.Restore(b.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if a.StateHash() != b.StateHash() || a.Version() != b.Version() {
		t.Fatal("restored state differs from its source")
	}
	a.Apply(op("set", "1000", "x"))
	b.Apply(op("set", "1000", "x"))
	if a.StateHash() != b.StateHash() || a.StateHash() != rebuiltRoot(a) {
		t.Fatal("restored state's tree is not kept up to date")
	}
}
