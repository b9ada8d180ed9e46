// Package storage keeps the records that protocol roles persist
// (automaton.Persist) and hands them back at restart (automaton.Start).
//
// # Design
//
// A node opens one Engine. For every namespace it hosts it asks the engine for
// a Store, which sees only that namespace's records. Three engines exist; the
// cluster file's durability picks memory or a durable engine, and its storage
// field picks which durable one (wal, the default, or pebble):
//
//   - Pebble (durability "fsync", storage "pebble"): one Pebble LSM database per node, under the
//     node's data directory. A namespace's records live under the key prefix
//     "ns/<name>/" followed by the record key; namespace names cannot contain
//     '/' (config validation), so prefixes never overlap. Every Commit is one
//     Pebble batch, applied atomically, and written with pebble.Sync: when Commit
//     returns, the batch is on disk and survives kill -9 or power loss. Group
//     commit comes from two places: the node runtime commits the persists of many
//     automaton steps in one Commit call, and Pebble's commit pipeline shares one
//     WAL fsync between batches that different namespaces commit concurrently.
//     An engine opened with sync off uses pebble.NoSync (records survive a
//     process crash once Pebble has written them, but not a machine crash); the
//     node does not use that mode, it exists for benchmarks of storage cost.
//   - WAL (durability "fsync", storage "wal" or unset): one append-only log file per
//     node, DIR/synod.wal, holding the records of every namespace; the live
//     records are kept in memory (maps per namespace), which serve Load and
//     compaction. See "The WAL engine" below.
//   - Memory (durability "memory"): records are kept in maps in the process, and
//     no file is ever written. Data is lost when the process exits, so a
//     restarted node starts with empty state (Start carries no records). This
//     is the "experiments" mode of the design: benchmark figures must say they
//     used it.
//
// Stores are safe for concurrent use, but the node uses each Store from one
// goroutine (its namespace's event loop).
//
// Open refuses a data directory that holds the other durable engine's files
// (a Pebble CURRENT file, or synod.wal): switching engines does not convert
// data, and starting from an empty store would silently forget what the node
// promised its peers.
//
// # The WAL engine
//
// Why: the node commits one storage batch per group commit, and a Pebble sync
// commit cost about twice a bare fdatasync on the development disk (go test
// ./storage -run '^$' -bench Commit -benchtime 5000x, fsync on: Pebble p50
// 130-156 µs, WAL p50 58-92 µs, on a loaded 2-core machine). In a 3-node
// Multi-Paxos cluster (STORAGE=wal|pebble scripts/bench-paxos 8s "1 256",
// fsync on) one client's put p50 was 0.44-0.58 ms with the WAL vs 0.52-0.81
// ms with Pebble over five runs each; at 256 clients the figures were too
// noisy on the shared machine to rank the engines. On a quiet machine
// (2026-11-21, load < 2, same command, four runs each) one client's put p50
// was 0.336-0.458 ms with the WAL vs 0.432-0.492 ms with Pebble, and at 256
// clients the two were level (20.6k vs 22.8k puts/s, within run-to-run
// noise). The WAL is therefore the default; Pebble stays available
// (storage: pebble) for namespaces whose live records should not all be
// held in memory.
//
// Format: a sequence of frames, each starting at a multiple of 8 bytes:
//
//	uint32 payload length (little endian, > 0)
//	uint32 CRC32C over the length field and the payload
//	payload: records, each op (1 put, 2 delete), uvarint-prefixed namespace,
//	         uvarint-prefixed key, and for a put a uvarint-prefixed value
//	zero padding to the next multiple of 8
//
// Commit: the batch's records are appended to the next frame and applied to
// the in-memory maps; the first committer that finds no write in progress
// writes the frame with one write at the end of the log and calls fdatasync
// (or, with WALOptions.DSync, relies on O_DSYNC), then wakes every commit the
// frame carried. With SYNOD_WAL_IOURING=1 in the node's environment (off by
// default) the fdatasync is an io_uring IORING_OP_FSYNC (DATASYNC) waited for
// without Go's scheduler seeing a blocking system call, where the kernel
// allows io_uring (uring_linux.go says why, what it measured and why it is
// off; OpenWAL logs a fallback to the system call). Otherwise a frame of
// at least 1 KiB (a loaded node's group commit) is synced with a "held"
// fdatasync (RawSyscall: its P is not handed over and Go's sysmon is not
// woken) when the process has nothing else to run, else with fdatasync
// (SYNOD_WAL_HELDSYNC=1 holds every such sync, =0 none; heldsync_linux.go
// says what it saves, what it costs and why only when idle), and such a
// frame's write is a pwrite made with RawSyscall too
// (SYNOD_WAL_RAWWRITE=0 turns that off; rawwrite_linux.go). Concurrent commits of different namespaces therefore share
// one write and one sync (group commit), and a frame holds whole batches, so
// a batch is atomic. A failed write or sync fails the engine for good (see
// "Storage faults" below).
//
// Group commit across namespaces, measured (issue 28, item 4: one log per
// node, all namespaces sharing each fsync): N namespaces each committing
// two-record batches in a closed loop from a goroutine of their own (the
// node's committers under load), fsync on, `go test ./storage -run '^$'
// -bench CommitNamespaces -benchtime 8000x` (WAL.Writes counts the frames):
// at 16 namespaces the one log carried 7.8-8.0 commits per fdatasync, one
// WAL per namespace 1.0; at 4 namespaces 2.2 vs 1.0. Throughput on the
// shared 2-core machine (load average 19-21) was too noisy to rank the
// layouts (one log 8.6k and 56k commits/s in two runs, one log per
// namespace 6.3k-7.4k, Pebble 23.7k-26k); the fsyncs saved are the
// figure that does not depend on load. On the live runtime, one node with N
// namespaces of protocol unreplicated and 64 clients putting through
// Node.Do, fsync on (`go test ./node -run '^$' -bench NamespacesPut
// -benchtime 20000x`, load average 12-17): 1 namespace 0.038 commits and
// 0.038 fdatasyncs per put (21k puts/s); 4 namespaces 0.133 commits, 0.058
// fdatasyncs (13k/s); 16 namespaces 0.506 commits, 0.067 fdatasyncs (25k/s):
// the namespaces' committers each commit their own batches, and the log
// carries 7.5 of them per fdatasync. The node exports the log's figures
// (INFO wal_commits, wal_frames; synod_wal_frames_total), since
// synod_fsyncs_total counts a namespace's commits, shared or not.
//
// Preallocation: the file is extended ahead of the writes with fallocate in
// 4 MiB steps (DefaultWALChunk), so most commits overwrite allocated space
// instead of growing the file. The benefit is small and noisy (p50 44-92 µs
// with fallocate vs 67-100 µs appending, several runs); O_DSYNC instead of
// fdatasync showed no consistent difference, so fdatasync stays the default.
// On a file system without fallocate the log grows with each write.
// The node's WAL also zero-fills ahead (WALOptions.ZeroFill, session 56): a
// goroutine beside the commits writes zeros over the next chunk past the
// log's end and syncs them, so frames overwrite written blocks and their
// fdatasync journals no unwritten-extent conversion (fdatasync mean and p99
// lower in 8 of 8 alternated rounds of a 1.5 KB write + fdatasync loop on
// this machine; WAL.prealloc, docs/costs/s56-esds56.md). Fallocate still
// covers whatever the fill has not reached.
//
// Recovery (OpenWAL): the log is read and replayed frame by frame. At the
// first frame that fails its length or checksum check, the rest of the file
// decides: only zeros is the preallocated end; otherwise, if no valid frame
// starts at any later 8-byte boundary, it is the torn tail of a write that a
// crash interrupted (every write is one frame and the next write starts after
// its sync, so only the last frame can be torn): the file is truncated there,
// synced, and a warning logged; if a valid frame follows, the damage is in the
// middle of the log and OpenWAL fails rather than drop acknowledged batches.
// Limits: damage to the last frame itself cannot be told from a torn write,
// so that batch is dropped (as a lost fsync would lose it); and a value that
// happens to contain a whole valid frame at an 8-byte boundary inside a torn
// frame makes OpenWAL fail instead of truncating (it fails closed).
//
// Compaction: when the log is longer than max(64 MiB, 2 x live size)
// (DefaultWALCompactMin, or the cluster file's wal_compact_min; live size =
// encoded size of the live records), the
// committer that just wrote a frame starts a compaction: from then on the
// WAL keeps a copy of each frame written (the tail), and a goroutine
// encodes the live records, taking the WAL's lock a 256 KiB chunk at a
// time, writes them to synod.wal.tmp, fsyncs it and the directory, and
// appends the tail so far to it and fsyncs it, while commits go on
// appending frames to synod.wal. Then, waiting only for a frame in
// progress, it makes the committers write and fdatasync each frame in
// both files, the first one preceded in the new file by the last of the
// tail (less than 64 KiB; the compaction writes it itself if no commit
// comes first); beside the commits it renames
// synod.wal.tmp over synod.wal and fsyncs the directory, and only then do
// commits append to the new file alone. A crash before the rename leaves
// the old log complete (OpenWAL deletes synod.wal.tmp); after it, the new
// log is complete: the snapshot, then every frame written since the
// compaction started. Between the rename and its directory sync a machine
// crash may leave either file under the name, and both hold every
// acknowledged frame (TestWALCompactionRenameNotDurable keeps the old one
// under a second name and reopens each). The snapshot is fuzzy:
// each key's record is its value when its chunk was encoded, which may be
// newer than the compaction's start, or include batches queued but not yet
// written; every change since the start is also in the tail, records are
// whole puts and deletes, and replaying the snapshot then the tail in order
// ends with each key at its last record. Commits used to queue behind the
// whole compaction: with a 40 MB live set under redis-benchmark -P 16 that
// held a node's commits for 266-825 ms, and a leader lost its leadership at
// each one; encoding the snapshot in the committer (until session 48) still
// held them 27-368 ms, and the rename and its directory sync there (until
// session 49) 58-400 ms at load 34-41.
// The crash steps are unit tests (wal_test.go); on real processes,
// livetest's TestCompactionKill kills every node of a 3-node cluster with
// kill -9 under load, some of them stopped while their synod.wal.tmp
// exists, with wal_compact_min set small, and checks that every
// acknowledged write reads back and the history is linearizable;
// scripts/soak-compaction is its long run.
//
// Memory: the WAL keeps every live record in memory (as Pebble's memtable
// would keep recent ones); namespaces' live state must fit in RAM, and a
// compaction holds one more encoded copy, and the tail, while it runs.
//
// # Storage faults
//
// The lesson of PostgreSQL's "fsyncgate" (2018): when fsync fails, the
// kernel may already have dropped the dirty pages it could not write, and
// marked them clean; a second fsync then succeeds and proves nothing. So a
// durable engine never retries a failed write or sync:
//
//   - Sticky failure. The first failed write, fallocate, fdatasync or
//     compaction step makes the error (a *Failure: operation, file, the
//     system's error) the engine's for good. Every later Commit, Load and
//     Namespace returns it, without touching the file; Err reports it. Load
//     refuses because the WAL's live records may include batches that never
//     reached the disk. Pebble's engine does the same with the first failed
//     Commit.
//   - What is durable. The WAL advances its end only after a frame's sync
//     succeeds. On a failure it cuts the file back to that end (truncate,
//     then fdatasync): the failed frame may still sit in the page cache, and
//     a restart of the process would otherwise read it back and replay a
//     batch that was never acknowledged and may not be on disk. If the cut
//     fails too, the error is logged; a restart may then replay that frame
//     (with a valid checksum), the one case the WAL cannot rule out.
//   - Recovery only by restart. OpenWAL re-reads what is on disk. The node
//     (package node) stops acknowledging anything and refuses requests from
//     the moment a commit fails, and the protocol's own recovery brings a
//     restarted replica up to date.
//   - Full disk. ENOSPC (or EDQUOT) at fallocate, write or sync is a
//     Failure whose NoSpace reports true, so the node can say "storage
//     full". It is handled like any other failure: sticky, and the engine
//     does not resume by itself when space returns. Decision: resuming would
//     be safe only for a failure that left nothing reported durable and no
//     failed sync (ENOSPC at fallocate or write), by writing the same frame
//     again; but the automata that emitted the batch have already moved on,
//     other namespaces' batches share the frame, and ENOSPC from fdatasync
//     (delayed allocation) is a lost write like EIO. PostgreSQL makes the
//     same choice for its WAL (a PANIC on ENOSPC, then recovery at
//     restart). Preallocation (fallocate, 4 MiB ahead) makes a full disk
//     show up there, before any byte of the frame is written. Nothing
//     acknowledged is lost: acknowledged means synced, and a restart with
//     the disk still full replays the log (which needs no space) and fails
//     again at its first commit.
//
// The WAL's file operations go through FS and File (file.go). Production
// uses OSFS, the operating system's files; FaultFS (faultfs.go) wraps them
// to make syncs fail or slow, or writes fail (ENOSPC) half-written, and
// MountTmpfs gives tests a real small file system to fill.
package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

// Store is one namespace's durable records on one node.
type Store interface {
	// Load returns every record, keyed by record key. The maps and slices are
	// fresh copies owned by the caller.
	Load() (map[string][]byte, error)
	// Commit applies the batch atomically, in order (a later record for the
	// same key wins). In a durable engine the batch is on stable storage when
	// Commit returns nil.
	Commit(batch []automaton.Persist) error
	// Close releases the store. It does not close the engine.
	Close() error
}

// Engine is one node's storage, shared by its namespaces.
type Engine interface {
	// Namespace opens the store of one namespace. A namespace may be opened
	// once at a time.
	Namespace(name string) (Store, error)
	// Durability is config.Fsync or config.Memory.
	Durability() string
	// Close closes the engine; stores opened from it must not be used after.
	Close() error
}

// ErrClosed is returned by operations on a closed store or engine.
var ErrClosed = errors.New("storage: closed")

// Open opens the engine that cfg's durability mode asks for, for node id:
// for "fsync", the engine named by cfg.Storage (the WAL when empty, or
// Pebble) in cfg.NodeDataDir(id); for "memory", a fresh Memory engine. It
// refuses a directory that holds the other engine's files.
func Open(cfg *config.Cluster, id string) (Engine, error) {
	switch cfg.Durability {
	case config.Fsync, "":
		dir := cfg.NodeDataDir(id)
		switch cfg.Storage {
		case config.StoragePebble:
			if exists(filepath.Join(dir, WALFile)) {
				return nil, fmt.Errorf("storage: %s holds a wal log (%s) but storage is %q: set storage: wal, or move the directory away", dir, WALFile, config.StoragePebble)
			}
			return OpenPebble(dir, PebbleOptions{Sync: true})
		case config.StorageWAL, "":
			if exists(filepath.Join(dir, "CURRENT")) {
				return nil, fmt.Errorf("storage: %s holds a Pebble database but storage is %q (the default since 2026-11): set storage: pebble, or move the directory away", dir, config.StorageWAL)
			}
			return OpenWAL(dir, WALOptions{Sync: true, ZeroFill: true, CompactMin: cfg.WALCompactMin})
		}
		return nil, fmt.Errorf("storage: unknown storage engine %q (want %q or %q)", cfg.Storage, config.StoragePebble, config.StorageWAL)
	case config.Memory:
		return NewMemory(), nil
	}
	return nil, fmt.Errorf("storage: unknown durability %q (want %q or %q)", cfg.Durability, config.Fsync, config.Memory)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func checkNamespace(name string) error {
	if name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("storage: bad namespace name %q (must be non-empty, without '/')", name)
	}
	return nil
}
