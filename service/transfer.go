// State transfer and state hashing (issue 9 item 5).
//
// Besides Snapshot and Restore, a state may implement three optional
// interfaces:
//
//   - DeltaState: a Version counting the state's writes, Delta(since) to
//     extract the changes made after a version and ApplyDelta to inject them
//     into a replica that is at or after that version. This is the state
//     update a primary sends its backups after each request and the catch-up
//     of a lagging backup (the Grid Services thesis II.A and chapter III: "the primary sends
//     a state update message to the backups", the backup's state_handler
//     "injects the state into the service application"); PB-Paxos (the Grid Services thesis
//     chapter VI) replicates the same updates through consensus.
//   - HashedState: a deterministic Merkle root over the state (the Eve/Adam thesis:
//     Eve's replicas compare "a hash of the final state ... computed
//     efficiently using a deterministic Merkle tree") and a copy of the tree,
//     so that two replicas find where they differ (Diff) and a
//     RangeState repairs only those ranges ("this state transfer is
//     performed in an incremental manner").
//   - RangeState: export and import the entries of some leaf ranges.
//
// StateHash, TransferDelta and TransferRanges use them when present and
// fall back to Snapshot and Restore, so callers (the simulator's convergence
// checks, primary-backup, Eve) work with every service.
//
// # Decisions (the seeds are silent on these)
//
// Version. A state's Version is the number of writes it has applied (a KV
// write: set, del, cas, append or incr that changed a key; a Counter add; a
// String append), plus the version of the snapshot it was restored from.
// It is a function of the history, so replicas that applied the same
// operations agree on it, and it is carried in the snapshot (format 2: the
// version after the format byte; format 1 snapshots still restore, as
// version 0), so that a backup restored from its primary's snapshot can ask
// for the next delta by its own Version. Two states are equal when their
// Snapshots are: same content and same version. StateHash covers the
// content only: replicas that reach the same content by different histories
// hash alike, which is what Eve's verification and a convergence check ask.
//
// KV deltas without a log. A KV state keeps, per key, the version of its
// last change; per deleted key a tombstone (the deleting version), at most
// DefaultTombstones of them, the oldest forgotten first; and a journal of
// (key, version) pairs in version order, one current entry per changed key,
// compacted when stale entries make up half of it. Delta(since) searches
// the journal for the first change after since and emits the current
// entries from there: every key changed since, with its value, or a
// tombstone. When since is before the Restore baseline or before a
// forgotten tombstone, the state cannot tell which keys to delete:
// ErrDeltaUnavailable, and the caller sends a snapshot. A delta lists its
// entries by key, so equal states give equal deltas; ApplyDelta decodes the
// whole delta before changing anything.
//
// Merkle tree (merkle.go). A fixed number of leaves (4096 for KV, a power
// of two; 1 for Counter and String); a key's leaf is FNV-1a 64 of the key,
// finalised by murmur3's fmix64, modulo the leaf count. A leaf hashes the
// SHA-256 entry hashes of its entries in key order; internal nodes hash
// their two children. Sorted leaves were chosen over an order-independent
// combination: a sum of entry hashes modulo 2^256 (AdHash) would make a
// write O(1) without keeping the leaf's keys, but its collision resistance
// rests on a knapsack-type problem that Wagner's generalised birthday
// attack (CRYPTO 2002) weakens far below 128 bits for a 256-bit modulus,
// and Eve (the Eve/Adam thesis) relies on "collision resistant hashes of the states"
// even against Byzantine replicas. Sorted leaves reduce collision
// resistance to SHA-256's. Keeping each leaf's keys also lets Diff's ranges
// be listed in O(keys in range).
//
// # Cost model
//
// n keys, L leaves, b = n/L keys per leaf (about 25 for 100k keys), k keys
// written since the last hash, c keys changed since a delta's version.
//
//   - A write without a tree: O(1) extra (a version, a journal entry).
//   - A write with a tree: one SHA-256 of the entry, a binary search and an
//     insertion in one leaf (O(b)), a dirty mark.
//   - StateHash: O(k·(b·32 bytes + log L)) hashing; the first call builds
//     the tree in O(n) (figures from service/bench_test.go).
//   - Delta(since): O(log n + c log c) plus the bytes of the c values;
//     ApplyDelta: O(c log c) plus, with a tree, the c writes' cost.
//   - Clone: O(n) for the map, as before; the tree and the tombstones are
//     copied on the first write after the clone (O(n + L)).
//   - Diff: O(d·log L) for d differing leaves.
//
// The tree is built lazily (the first StateHash or MerkleTree) so that
// protocols that never hash (ESDS's tentative copies) pay nothing for it.
package service

import (
	"crypto/sha256"
	"errors"
	"fmt"
)

// ErrDeltaUnavailable is returned by Delta when the state cannot express
// the changes since the given version (it is older than the state's
// baseline or than a forgotten tombstone, or later than the state's own
// version): the caller falls back to a full snapshot.
var ErrDeltaUnavailable = errors.New("service: delta unavailable since that version")

// ErrDeltaMismatch is returned by ApplyDelta when the delta does not fit the
// state (the state's version is outside the delta's [since, to] range, or
// the delta is malformed); the state is left unchanged.
var ErrDeltaMismatch = errors.New("service: delta does not apply to this state")

// DeltaState is a State whose changes since a version can be extracted and
// injected (see the package documentation in transfer.go).
type DeltaState interface {
	State
	// Version is the number of writes applied since creation, plus the
	// version of the snapshot restored: equal on replicas that applied the
	// same operations.
	Version() uint64
	// Delta encodes the changes made after version since. It returns an
	// error wrapping ErrDeltaUnavailable when it cannot.
	Delta(since uint64) ([]byte, error)
	// ApplyDelta installs a delta made by another replica's Delta(since)
	// at version to, on a state whose Version is in [since, to] and whose
	// history is a prefix of the sender's; afterwards both states are
	// equal (Snapshot, StateHash, Version). It returns an error wrapping
	// ErrDeltaMismatch, and changes nothing, when the delta does not fit.
	ApplyDelta(delta []byte) error
}

// DeltaSizer is a DeltaState that estimates the length of Delta(since)
// without encoding it (a protocol choosing between shipping a delta and
// replaying the commands, protocol/pbpaxos/replay.go, need not pay for a
// delta it will not ship: a SADD on a 10,000-member set spent ~3 ms
// encoding it). The estimate is a lower bound up to a few bytes per key.
type DeltaSizer interface {
	DeltaState
	DeltaSizeHint(since uint64) int
}

// HashedState is a State with a deterministic, incrementally maintained
// Merkle hash of its content.
type HashedState interface {
	State
	// StateHash returns the Merkle root over the state's content; equal
	// contents give equal roots on every replica and every run.
	StateHash() [32]byte
	// MerkleTree returns an up-to-date copy of the state's tree, for Diff;
	// later Applies do not change it.
	MerkleTree() *MerkleTree
}

// RangeState is a HashedState that can export and import the entries of
// some leaf ranges of its tree, for an incremental state transfer of what
// Diff found different.
type RangeState interface {
	HashedState
	// ExportRanges encodes the state's version and its entries in rs.
	ExportRanges(rs []Range) []byte
	// ImportRanges replaces the state's entries in the exported ranges by
	// the exported ones and takes the exporter's version as a new
	// baseline (as Restore does).
	ImportRanges(b []byte) error
}

// StateHash returns st's Merkle root when st is a HashedState, and the
// SHA-256 of its snapshot otherwise.
func StateHash(st State) [32]byte {
	if h, ok := st.(HashedState); ok {
		return h.StateHash()
	}
	return sha256.Sum256(st.Snapshot())
}

// TransferDelta brings to level with from: by from.Delta(since) and
// to.ApplyDelta when both are DeltaStates and the delta is available and
// fits, otherwise by from's snapshot. since is normally to's Version.
func TransferDelta(from, to State, since uint64) error {
	fd, ok1 := from.(DeltaState)
	td, ok2 := to.(DeltaState)
	if ok1 && ok2 {
		d, err := fd.Delta(since)
		if err == nil {
			err = td.ApplyDelta(d)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrDeltaUnavailable) && !errors.Is(err, ErrDeltaMismatch) {
			return err
		}
	}
	if err := to.Restore(from.Snapshot()); err != nil {
		return fmt.Errorf("service: state transfer by snapshot: %w", err)
	}
	return nil
}

// TransferRanges brings to level with from by sending only the leaf ranges
// where their Merkle trees differ, when both are RangeStates with trees of
// one shape; otherwise by from's snapshot. It returns the ranges sent (nil
// when the states were already equal or the snapshot was used).
func TransferRanges(from, to State) ([]Range, error) {
	fr, ok1 := from.(RangeState)
	tr, ok2 := to.(RangeState)
	if ok1 && ok2 {
		ft, tt := fr.MerkleTree(), tr.MerkleTree()
		if ft.Leaves() == tt.Leaves() {
			rs := Diff(ft, tt)
			if len(rs) == 0 {
				return nil, nil
			}
			return rs, tr.ImportRanges(fr.ExportRanges(rs))
		}
	}
	if err := to.Restore(from.Snapshot()); err != nil {
		return nil, fmt.Errorf("service: state transfer by snapshot: %w", err)
	}
	return nil, nil
}

// deltaCodec is the format byte of the deltas and range exports below.
const deltaCodec = 1

// versionsFit checks that a state at version v can take a delta (since, to].
func versionsFit(v, since, to uint64) error {
	if since > to {
		return fmt.Errorf("%w: delta from %d to %d", ErrDeltaMismatch, since, to)
	}
	if v < since || v > to {
		return fmt.Errorf("%w: delta from version %d to %d, state at %d", ErrDeltaMismatch, since, to, v)
	}
	return nil
}
