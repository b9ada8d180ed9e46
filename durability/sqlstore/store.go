// Package sqlstore is the database proxy's real component: a SQL
// database reached through database/sql, SQLite embedded by default
// (modernc.org/sqlite, pure Go, no cgo) or PostgreSQL (github.com/jackc/pgx/v5's
// stdlib driver). It runs the Work the pure proxies return: a request's
// statements in one transaction (startA/commitA as BEGIN/COMMIT), init's
// DDL, and recovery queries. It is used by the runtime's effect executor,
// by the experiments and by tests; nothing here is mocked.
package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"
	_ "modernc.org/sqlite"             // driver "sqlite"

	"github.com/synod-dev/synod/durability"
)

// Drivers.
const (
	SQLite   = "sqlite"
	Postgres = "pgx"
)

// Config names a database.
type Config struct {
	// Driver is SQLite (default) or Postgres.
	Driver string
	// DSN: for SQLite a file path (":memory:" for an in-memory database,
	// the simulator's real component); for PostgreSQL a connection string
	// (postgres://user@127.0.0.1:port/db?sslmode=disable).
	DSN string
	// Sync makes every commit durable before it returns: SQLite
	// synchronous=FULL (else OFF), PostgreSQL synchronous_commit=on (else
	// off). Figures print it.
	Sync bool
}

// Store is an open database.
//
// A store prepares each distinct statement that has arguments once and
// keeps it (at most maxPrepared of them): the database proxies send the
// same few statements with new arguments for every request, and a
// prepared statement saves the database's parse and plan of each. DDL and
// statements without arguments (init, recovery) run unprepared.
type Store struct {
	cfg Config
	db  *sql.DB

	mu       sync.Mutex
	prepared map[string]*sql.Stmt // by dialect-translated SQL text
}

// maxPrepared bounds the prepared statements a store keeps: a workload
// that sends more distinct statements than this runs the rest unprepared.
const maxPrepared = 256

// Open connects to the database and applies the sync setting.
func Open(cfg Config) (*Store, error) {
	if cfg.Driver == "" {
		cfg.Driver = SQLite
	}
	dsn := cfg.DSN
	switch cfg.Driver {
	case SQLite:
		if dsn == "" {
			return nil, fmt.Errorf("sqlstore: sqlite needs a file path or :memory:")
		}
		sync := "OFF"
		if cfg.Sync {
			sync = "FULL"
		}
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + "_pragma=synchronous(" + sync + ")&_pragma=busy_timeout(5000)"
		if dsn[:len(":memory:")] != ":memory:" {
			dsn += "&_pragma=journal_mode(WAL)"
		}
	case Postgres:
	default:
		return nil, fmt.Errorf("sqlstore: unknown driver %q (sqlite or pgx)", cfg.Driver)
	}
	db, err := sql.Open(cfg.Driver, dsn)
	if err != nil {
		return nil, err
	}
	if cfg.Driver == SQLite {
		// One connection: SQLite serialises writers anyway, and an
		// in-memory database exists per connection.
		db.SetMaxOpenConns(1)
	}
	if cfg.Driver == Postgres {
		mode := "off"
		if cfg.Sync {
			mode = "on"
		}
		// Per session; every pooled connection runs it on open.
		db.SetMaxIdleConns(8)
		if _, err := db.Exec("SET synchronous_commit = " + mode); err != nil {
			db.Close()
			return nil, fmt.Errorf("sqlstore: %w", err)
		}
		db.SetMaxOpenConns(1)
	}
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlstore: %s: %w", cfg.Driver, err)
	}
	return &Store{cfg: cfg, db: db, prepared: map[string]*sql.Stmt{}}, nil
}

// Config returns the store's configuration.
func (s *Store) Config() Config { return s.cfg }

// Close closes the prepared statements and the database.
func (s *Store) Close() error {
	s.mu.Lock()
	for q, st := range s.prepared {
		st.Close()
		delete(s.prepared, q)
	}
	s.mu.Unlock()
	return s.db.Close()
}

// Prepared is the number of statements the store holds prepared.
func (s *Store) Prepared() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.prepared)
}

// prepare returns the kept prepared statement of q, preparing it on first
// use, or nil when q is not kept (no arguments, the cache is full, or the
// database refused to prepare it: the statement then runs unprepared and
// reports its own error). It runs before BEGIN: an SQLite store has one
// connection, which the transaction would hold.
func (s *Store) prepare(ctx context.Context, q string, args int) *sql.Stmt {
	if args == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.prepared[q]; st != nil {
		return st
	}
	if len(s.prepared) >= maxPrepared {
		return nil
	}
	st, err := s.db.PrepareContext(ctx, q)
	if err != nil {
		return nil
	}
	s.prepared[q] = st
	return st
}

// DB is the underlying handle (tests inspect tables with it).
func (s *Store) DB() *sql.DB { return s.db }

// Exec runs w's statements in one transaction: BEGIN, each statement,
// COMMIT (startA/commitA of every database proxy a request touched, so
// that the request is all or nothing). On any error the transaction is
// rolled back and nothing of w is applied.
func (s *Store) Exec(ctx context.Context, stmts []durability.Stmt) error {
	if len(stmts) == 0 {
		return nil
	}
	texts := make([]string, len(stmts))
	prep := make([]*sql.Stmt, len(stmts))
	for i, st := range stmts {
		texts[i] = durability.Dialect(s.cfg.Driver, st.SQL)
		prep[i] = s.prepare(ctx, texts[i], len(st.Args))
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for i, st := range stmts {
		var r sql.Result
		var err error
		if prep[i] != nil {
			// The transaction's copy of the kept statement: database/sql
			// reuses the prepared one when the transaction runs on the
			// connection it was prepared on (always, with one connection).
			r, err = tx.StmtContext(ctx, prep[i]).ExecContext(ctx, st.Args...)
		} else {
			r, err = tx.ExecContext(ctx, texts[i], st.Args...)
		}
		if err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("%s: %s: %w", st.Object, st.SQL, err)
		}
		if st.Fence {
			if n, err := r.RowsAffected(); err != nil || n == 0 {
				_ = tx.Rollback()
				return fmt.Errorf("%s: %s %v: %w", st.Object, st.SQL, st.Args, durability.ErrFenced)
			}
		}
	}
	return tx.Commit()
}

// Query runs a recovery query and returns its rows.
func (s *Store) Query(ctx context.Context, q durability.Query) ([][]durability.Value, error) {
	rows, err := s.db.QueryContext(ctx, durability.Dialect(s.cfg.Driver, q.SQL))
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", q.Object, q.SQL, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out [][]durability.Value
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]durability.Value, len(cols))
		for i, v := range vals {
			row[i] = normalise(v)
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// normalise maps driver values to durability values (pgx returns int32
// for INT columns, SQLite int64).
func normalise(v any) durability.Value {
	switch x := v.(type) {
	case int32:
		return int64(x)
	case int16:
		return int64(x)
	case int:
		return int64(x)
	case float32:
		return float64(x)
	}
	return v
}

// Run carries out a proxy's Work against the store: its statements in one
// transaction, then its recovery queries, whose rows restore the objects
// of set. Shipped updates are not the store's business.
func (s *Store) Run(ctx context.Context, set *durability.Set, w durability.Work) error {
	if err := s.Exec(ctx, w.SQL); err != nil {
		return err
	}
	for _, q := range w.Queries {
		rows, err := s.Query(ctx, q)
		if err != nil {
			return err
		}
		if err := set.Restore(q, rows); err != nil {
			return err
		}
	}
	return nil
}
