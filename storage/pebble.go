package storage

import (
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/cockroachdb/pebble"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

// PebbleOptions configure OpenPebble.
type PebbleOptions struct {
	// Sync makes every Commit wait for fsync (pebble.Sync). Without it Commit
	// uses pebble.NoSync.
	Sync bool
	// Logger receives Pebble's own messages (at debug level). Nil: discard.
	Logger *slog.Logger
	// MemTableSize is Pebble's memtable size; 0 means DefaultMemTableSize.
	MemTableSize uint64
}

// DefaultMemTableSize is the memtable size of OpenPebble (Pebble's own default
// is 4 MiB). Protocol logs are short-lived records (a Paxos slot is deleted
// after the next snapshot, a snapshot record is overwritten by the next one),
// so with a large memtable most of them die in memory and never cost a flush
// or a compaction: under a 256-client Paxos write load, flushes and
// compactions took about 7% of the nodes' CPU with 4 MiB memtables. Pebble
// starts with a 256 KiB memtable and doubles it up to this size, so a node
// that writes little never holds that much memory.
const DefaultMemTableSize = 64 << 20

// Pebble is the durable engine: one Pebble database per node.
type Pebble struct {
	db   *pebble.DB
	dir  string
	wopt *pebble.WriteOptions

	mu     sync.Mutex
	open   map[string]bool
	closed bool
	err    error // sticky: a failed commit fails the engine (as the WAL's)
}

// OpenPebble opens (creating if needed) the database in dir.
func OpenPebble(dir string, o PebbleOptions) (*Pebble, error) {
	if dir == "" {
		return nil, fmt.Errorf("storage: empty data directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	lg := o.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	mts := o.MemTableSize
	if mts == 0 {
		mts = DefaultMemTableSize
	}
	db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleLogger{lg}, MemTableSize: mts})
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", dir, err)
	}
	w := pebble.NoSync
	if o.Sync {
		w = pebble.Sync
	}
	return &Pebble{db: db, dir: dir, wopt: w, open: map[string]bool{}}, nil
}

// Durability implements Engine.
func (p *Pebble) Durability() string {
	if p.wopt.Sync {
		return config.Fsync
	}
	return "nosync"
}

// Dir is the database directory.
func (p *Pebble) Dir() string { return p.dir }

// Namespace implements Engine.
func (p *Pebble) Namespace(name string) (Store, error) {
	if err := checkNamespace(name); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if p.open[name] {
		return nil, fmt.Errorf("storage: namespace %q is already open", name)
	}
	p.open[name] = true
	prefix := "ns/" + name + "/"
	// '/'+1 == '0': every key with the prefix sorts below prefix[:len-1]+"0".
	upper := "ns/" + name + "0"
	return &pebbleStore{p: p, name: name, prefix: prefix, upper: upper}, nil
}

// Close implements Engine.
func (p *Pebble) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	return p.db.Close()
}

func (p *Pebble) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Err is the engine's sticky failure, or nil while it works.
func (p *Pebble) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

type pebbleStore struct {
	p             *Pebble
	name          string
	prefix, upper string

	mu     sync.Mutex
	closed bool
}

func (s *pebbleStore) check() error {
	s.mu.Lock()
	c := s.closed
	s.mu.Unlock()
	if c || s.p.isClosed() {
		return ErrClosed
	}
	return s.p.Err()
}

func (s *pebbleStore) Load() (map[string][]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	it, err := s.p.db.NewIter(&pebble.IterOptions{LowerBound: []byte(s.prefix), UpperBound: []byte(s.upper)})
	if err != nil {
		return nil, fmt.Errorf("storage: load %s: %w", s.name, err)
	}
	out := map[string][]byte{}
	for ok := it.First(); ok; ok = it.Next() {
		k := string(it.Key()[len(s.prefix):])
		out[k] = append([]byte{}, it.Value()...)
	}
	if err := it.Error(); err != nil {
		it.Close()
		return nil, fmt.Errorf("storage: load %s: %w", s.name, err)
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("storage: load %s: %w", s.name, err)
	}
	return out, nil
}

func (s *pebbleStore) Commit(batch []automaton.Persist) error {
	if err := s.check(); err != nil {
		return err
	}
	if len(batch) == 0 {
		return nil
	}
	b := s.p.db.NewBatch()
	defer b.Close()
	key := make([]byte, 0, 64)
	for _, r := range batch {
		key = append(append(key[:0], s.prefix...), r.Key...)
		var err error
		if r.Delete {
			err = b.Delete(key, nil)
		} else {
			err = b.Set(key, r.Value, nil)
		}
		if err != nil {
			return fmt.Errorf("storage: commit %s: %w", s.name, err)
		}
	}
	if err := b.Commit(s.p.wopt); err != nil {
		// Never retried: after a failed sync the state of the log is
		// unknown (see "Storage faults" in the package doc).
		f := failure("commit", s.p.dir, err)
		s.p.mu.Lock()
		if s.p.err == nil {
			s.p.err = f
		}
		s.p.mu.Unlock()
		return f
	}
	return nil
}

func (s *pebbleStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.p.mu.Lock()
	delete(s.p.open, s.name)
	s.p.mu.Unlock()
	return nil
}

// pebbleLogger sends Pebble's messages to slog.
type pebbleLogger struct{ l *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.l.Debug("pebble: " + fmt.Sprintf(format, args...))
}

// Fatalf is called by Pebble on unrecoverable corruption; like Pebble's default
// logger it exits the process.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.l.Error("pebble fatal: " + fmt.Sprintf(format, args...))
	os.Exit(1)
}
