// Package storage keeps the records that protocol roles persist
// (automaton.Persist) and hands them back at restart (automaton.Start).
//
// # Design
//
// A node opens one Engine. For every namespace it hosts it asks the engine for
// a Store, which sees only that namespace's records. Two engines exist:
//
//   - Pebble (durability "fsync"): one Pebble LSM database per node, under the
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
//   - Memory (durability "memory"): records are kept in maps in the process, and
//     no file is ever written. Data is lost when the process exits, so a
//     restarted node starts with empty state (Start carries no records). This
//     is the "experiments" mode of the design: benchmark figures must say they
//     used it.
//
// Stores are safe for concurrent use, but the node uses each Store from one
// goroutine (its namespace's event loop).
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
// for "fsync", the engine named by cfg.Storage (Pebble when empty, or the
// WAL) in cfg.NodeDataDir(id); for "memory", a fresh Memory engine. It
// refuses a directory that holds the other engine's files.
func Open(cfg *config.Cluster, id string) (Engine, error) {
	switch cfg.Durability {
	case config.Fsync, "":
		dir := cfg.NodeDataDir(id)
		switch cfg.Storage {
		case config.StoragePebble, "":
			if exists(filepath.Join(dir, WALFile)) {
				return nil, fmt.Errorf("storage: %s holds a wal log (%s) but storage is %q: set storage: wal, or move the directory away", dir, WALFile, config.StoragePebble)
			}
			return OpenPebble(dir, PebbleOptions{Sync: true})
		case config.StorageWAL:
			if exists(filepath.Join(dir, "CURRENT")) {
				return nil, fmt.Errorf("storage: %s holds a Pebble database but storage is %q: set storage: pebble, or move the directory away", dir, config.StorageWAL)
			}
			return OpenWAL(dir, WALOptions{Sync: true})
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
