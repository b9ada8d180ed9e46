package service

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"iter"
	"slices"
	"strings"
)

// MerkleTree is a fixed-shape, incrementally maintained Merkle tree over a
// set of (key, value) entries (issue 9 item 5; the Eve/Adam thesis's Eve compares
// replicas by "a deterministic Merkle tree" root and repairs them by an
// incremental state transfer). The package documentation (transfer.go)
// records the design and its cost model; in short:
//
//   - A key belongs to leaf LeafOf(key): a stable 64-bit hash of the key
//     (FNV-1a, then a 64-bit finaliser), reduced modulo the leaf count, a
//     power of two fixed when the tree is made.
//   - Each entry is summarised by its entry hash SHA-256(0x00 ‖ uvarint
//     len(key) ‖ key ‖ value). A leaf keeps its entries sorted by key; its
//     hash is SHA-256(0x01 ‖ h₁ ‖ … ‖ hₘ) over the entry hashes in key order.
//   - An internal node's hash is SHA-256(0x02 ‖ left ‖ right); the root is
//     the node at index 0 of a heap layout (children of i at 2i+1, 2i+2).
//
// Put and Delete cost one entry hash and a binary search in one leaf; they
// only mark the leaf dirty. Root rehashes the dirty leaves and the paths
// above them, once, when asked.
//
// A MerkleTree is not safe for concurrent use. Its zero value is not usable:
// make one with NewMerkleTree.
type MerkleTree struct {
	leaves  []merkleLeaf
	nodes   [][32]byte // 2L-1 nodes, heap layout; leaf i is node L-1+i
	dirty   []int32    // dirty leaves, each listed once
	isDirty []uint64   // bitset over leaves
	scratch []byte
}

// merkleLeaf holds one bucket's entries sorted by key (parallel slices, so
// that the entry hashes lie contiguously).
type merkleLeaf struct {
	keys []string
	hs   [][32]byte
}

// Range is a half-open range [Lo, Hi) of leaf indices of a MerkleTree.
type Range struct{ Lo, Hi int }

func (r Range) String() string { return fmt.Sprintf("[%d,%d)", r.Lo, r.Hi) }

// Contains reports whether leaf i lies in r.
func (r Range) Contains(i int) bool { return r.Lo <= i && i < r.Hi }

// Domain separation bytes for the three kinds of hash input.
const (
	tagEntry    = 0x00
	tagLeaf     = 0x01
	tagInternal = 0x02
)

// NewMerkleTree returns an empty tree with the given number of leaves, a
// power of two (1 gives a single-leaf tree, for single-value services).
func NewMerkleTree(leaves int) *MerkleTree {
	if leaves < 1 || leaves&(leaves-1) != 0 || leaves > 1<<24 {
		panic(fmt.Sprintf("service: merkle leaf count %d is not a power of two in [1, 2^24]", leaves))
	}
	t := &MerkleTree{
		leaves:  make([]merkleLeaf, leaves),
		nodes:   make([][32]byte, 2*leaves-1),
		isDirty: make([]uint64, (leaves+63)/64),
	}
	// Every leaf is empty: all nodes of one level share a hash.
	h := sha256.Sum256([]byte{tagLeaf})
	for lo, n := leaves-1, leaves; ; lo, n = lo/2, n/2 {
		for i := lo; i < lo+n; i++ {
			t.nodes[i] = h
		}
		if n == 1 {
			break
		}
		h = hashInternal(&h, &h)
	}
	return t
}

// BuildMerkleTree returns a tree with the given number of leaves holding
// the entries entries yields (keys distinct), built in one pass: each entry
// hashed once, each leaf sorted once, every node hashed once.
func BuildMerkleTree(leaves int, entries iter.Seq2[string, []byte]) *MerkleTree {
	t := NewMerkleTree(leaves)
	for k, v := range entries {
		i := t.LeafOf(k)
		lf := &t.leaves[i]
		lf.keys = append(lf.keys, k)
		lf.hs = append(lf.hs, entryHash(&t.scratch, k, v))
	}
	var tmp []leafEntry
	for i := range t.leaves {
		lf := &t.leaves[i]
		if len(lf.keys) == 0 {
			continue
		}
		if len(lf.keys) > 1 {
			tmp = tmp[:0]
			for j := range lf.keys {
				tmp = append(tmp, leafEntry{lf.keys[j], lf.hs[j]})
			}
			slices.SortFunc(tmp, func(a, b leafEntry) int { return strings.Compare(a.k, b.k) })
			for j := range tmp {
				lf.keys[j], lf.hs[j] = tmp[j].k, tmp[j].h
			}
		}
		t.markDirty(i)
	}
	t.Root()
	return t
}

type leafEntry struct {
	k string
	h [32]byte
}

// Leaves returns the number of leaves.
func (t *MerkleTree) Leaves() int { return len(t.leaves) }

// Len returns the number of entries.
func (t *MerkleTree) Len() int {
	n := 0
	for i := range t.leaves {
		n += len(t.leaves[i].keys)
	}
	return n
}

// LeafOf returns the leaf that holds key.
func (t *MerkleTree) LeafOf(key string) int { return leafOf(key, len(t.leaves)) }

func leafOf(key string, leaves int) int {
	// FNV-1a 64, then murmur3's fmix64 so that the low bits are mixed.
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return int(h & uint64(leaves-1))
}

// EntryHash returns the hash of one entry: SHA-256(0x00 ‖ uvarint len(key) ‖
// key ‖ value). The key's length prefix keeps (k, v) pairs apart that
// concatenate to the same bytes.
func EntryHash(key string, value []byte) [32]byte {
	var b []byte
	return entryHash(&b, key, value)
}

func entryHash(scratch *[]byte, key string, value []byte) [32]byte {
	b := append((*scratch)[:0], tagEntry)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = append(b, value...)
	*scratch = b
	return sha256.Sum256(b)
}

func hashInternal(l, r *[32]byte) [32]byte {
	var b [65]byte
	b[0] = tagInternal
	copy(b[1:], l[:])
	copy(b[33:], r[:])
	return sha256.Sum256(b[:])
}

// Put sets key's entry to value (adding it or replacing it).
func (t *MerkleTree) Put(key string, value []byte) {
	t.PutHash(key, entryHash(&t.scratch, key, value))
}

// PutHash sets key's entry hash directly (h must be EntryHash(key, value)).
func (t *MerkleTree) PutHash(key string, h [32]byte) {
	i := t.LeafOf(key)
	lf := &t.leaves[i]
	j, found := slices.BinarySearch(lf.keys, key)
	if found {
		if lf.hs[j] == h {
			return
		}
		lf.hs[j] = h
	} else {
		lf.keys = slices.Insert(lf.keys, j, key)
		lf.hs = slices.Insert(lf.hs, j, h)
	}
	t.markDirty(i)
}

// Delete removes key's entry, if any.
func (t *MerkleTree) Delete(key string) {
	i := t.LeafOf(key)
	lf := &t.leaves[i]
	j, found := slices.BinarySearch(lf.keys, key)
	if !found {
		return
	}
	lf.keys = slices.Delete(lf.keys, j, j+1)
	lf.hs = slices.Delete(lf.hs, j, j+1)
	t.markDirty(i)
}

func (t *MerkleTree) markDirty(i int) {
	if t.isDirty[i/64]&(1<<(i%64)) != 0 {
		return
	}
	t.isDirty[i/64] |= 1 << (i % 64)
	t.dirty = append(t.dirty, int32(i))
}

// Dirty returns the number of leaves changed since the root was last
// computed.
func (t *MerkleTree) Dirty() int { return len(t.dirty) }

// Root returns the root hash, rehashing the dirty leaves and the paths from
// them to the root: O(k·(b + log L)) for k dirty leaves of b entries each.
func (t *MerkleTree) Root() [32]byte {
	if len(t.dirty) > 0 {
		t.refresh()
	}
	return t.nodes[0]
}

func (t *MerkleTree) refresh() {
	L := len(t.leaves)
	for _, i := range t.dirty {
		t.nodes[L-1+int(i)] = t.hashLeaf(int(i))
		t.isDirty[i/64] &^= 1 << (i % 64)
	}
	if L == 1 {
		t.dirty = t.dirty[:0]
		return
	}
	if len(t.dirty) > L/8 {
		// Many dirty leaves: one bottom-up pass over every internal node
		// costs less than sorting and walking the paths.
		for n := L - 2; n >= 0; n-- {
			t.nodes[n] = hashInternal(&t.nodes[2*n+1], &t.nodes[2*n+2])
		}
		t.dirty = t.dirty[:0]
		return
	}
	// Walk up level by level; node indices sorted ascending give
	// nondecreasing parents, so duplicates are adjacent.
	cur := t.dirty
	for k, i := range cur {
		cur[k] = int32(L - 1 + int(i))
	}
	slices.Sort(cur)
	for cur[0] != 0 {
		next := cur[:0]
		last := int32(-1)
		for _, n := range cur {
			p := (n - 1) / 2
			if p != last {
				next = append(next, p)
				last = p
			}
		}
		for _, p := range next {
			t.nodes[p] = hashInternal(&t.nodes[2*p+1], &t.nodes[2*p+2])
		}
		cur = next
	}
	t.dirty = t.dirty[:0]
}

func (t *MerkleTree) hashLeaf(i int) [32]byte {
	lf := &t.leaves[i]
	b := append(t.scratch[:0], tagLeaf)
	for k := range lf.hs {
		b = append(b, lf.hs[k][:]...)
	}
	t.scratch = b
	return sha256.Sum256(b)
}

// Leaf returns leaf i's hash, bringing the tree up to date first.
func (t *MerkleTree) Leaf(i int) [32]byte {
	t.Root()
	return t.nodes[len(t.leaves)-1+i]
}

// Keys returns the keys held in the leaves of r, in leaf order and key order
// within a leaf.
func (t *MerkleTree) Keys(r Range) []string {
	var out []string
	for i := max(r.Lo, 0); i < min(r.Hi, len(t.leaves)); i++ {
		out = append(out, t.leaves[i].keys...)
	}
	return out
}

// Clone returns an independent copy of the tree (O(L + entries)).
func (t *MerkleTree) Clone() *MerkleTree {
	c := &MerkleTree{
		leaves:  make([]merkleLeaf, len(t.leaves)),
		nodes:   slices.Clone(t.nodes),
		dirty:   slices.Clone(t.dirty),
		isDirty: slices.Clone(t.isDirty),
	}
	for i := range t.leaves {
		if len(t.leaves[i].keys) > 0 {
			c.leaves[i] = merkleLeaf{keys: slices.Clone(t.leaves[i].keys), hs: slices.Clone(t.leaves[i].hs)}
		}
	}
	return c
}

// Diff returns the leaf ranges where a and b differ, merged where adjacent,
// in ascending order; nil when the roots are equal. It brings both trees up
// to date first and then descends only into differing subtrees: O(d·log L)
// for d differing leaves. Trees of different shapes differ everywhere: Diff
// then returns the single range covering the larger one.
func Diff(a, b *MerkleTree) []Range {
	if len(a.leaves) != len(b.leaves) {
		return []Range{{0, max(len(a.leaves), len(b.leaves))}}
	}
	if a.Root() == b.Root() {
		return nil
	}
	L := len(a.leaves)
	var out []Range
	var walk func(n int)
	walk = func(n int) {
		if a.nodes[n] == b.nodes[n] {
			return
		}
		if n >= L-1 {
			i := n - (L - 1)
			if k := len(out); k > 0 && out[k-1].Hi == i {
				out[k-1].Hi = i + 1
			} else {
				out = append(out, Range{i, i + 1})
			}
			return
		}
		walk(2*n + 1)
		walk(2*n + 2)
	}
	walk(0)
	return out
}

// String describes the tree briefly (for test failures).
func (t *MerkleTree) String() string {
	r := t.Root()
	var sb strings.Builder
	fmt.Fprintf(&sb, "merkle(L=%d, n=%d, root=%x)", len(t.leaves), t.Len(), r[:6])
	return sb.String()
}
