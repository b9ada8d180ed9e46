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
// A store keeps each distinct statement that has arguments, by the
// proxy's text, once it has run it: its translation to the driver's
// dialect (PostgreSQL's $1 placeholders) and its prepared statement (at
// most maxPrepared of them). The database proxies send the same few
// statements with new arguments for every request: a prepared statement
// saves the database's parse and plan of each, and the kept translation
// the store's own rewrite of the text (pbdurable on PostgreSQL: 67.8-68.0
// -> 56.7-57.1 allocations per SET, lower in 10 of 10 rounds; SQLite,
// whose text is not rewritten, unchanged; docs/costs/s58-misc58.md). DDL and
// statements without arguments (init, recovery) are translated each time
// and run unprepared.
type Store struct {
	cfg Config
	db  *sql.DB

	mu   sync.Mutex
	kept map[string]kept // by the proxy's SQL text, before translation
}

// kept is one kept statement: its translation and its prepared statement.
type kept struct {
	text string
	stmt *sql.Stmt
}

// maxPrepared bounds the statements a store keeps: a workload that sends
// more distinct statements than this runs the rest unprepared, translated
// on every call.
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
	return &Store{cfg: cfg, db: db, kept: map[string]kept{}}, nil
}

// Config returns the store's configuration.
func (s *Store) Config() Config { return s.cfg }

// Close closes the prepared statements and the database.
func (s *Store) Close() error {
	s.mu.Lock()
	for q, k := range s.kept {
		k.stmt.Close()
		delete(s.kept, q)
	}
	s.mu.Unlock()
	return s.db.Close()
}

// Prepared is the number of statements the store keeps prepared.
func (s *Store) Prepared() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.kept)
}

// statement returns the text to run for q, a statement with args
// arguments, and its kept prepared statement, translating and preparing
// it on first use; the statement is nil when q is not kept (no arguments,
// the store keeps maxPrepared statements already, or the database refused
// to prepare it: the statement then runs unprepared and reports its own
// error, and a later call tries again). It runs before BEGIN: an SQLite
// store has one connection, which the transaction would hold.
func (s *Store) statement(ctx context.Context, q string, args int) (string, *sql.Stmt) {
	if args == 0 {
		return durability.Dialect(s.cfg.Driver, q), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, ok := s.kept[q]; ok {
		return k.text, k.stmt
	}
	text := durability.Dialect(s.cfg.Driver, q)
	if len(s.kept) >= maxPrepared {
		return text, nil
	}
	st, err := s.db.PrepareContext(ctx, text)
	if err != nil {
		return text, nil
	}
	s.kept[q] = kept{text: text, stmt: st}
	return text, st
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
	// The statements' kept forms; a request's few fit the array, which
	// stays on the stack.
	var buf [8]kept
	run := buf[:0]
	if len(stmts) > len(buf) {
		run = make([]kept, 0, len(stmts))
	}
	for _, st := range stmts {
		text, prep := s.statement(ctx, st.SQL, len(st.Args))
		run = append(run, kept{text: text, stmt: prep})
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for i, st := range stmts {
		var r sql.Result
		var err error
		if run[i].stmt != nil {
			// The transaction's copy of the kept statement: database/sql
			// reuses the prepared one when the transaction runs on the
			// connection it was prepared on (always, with one connection).
			r, err = tx.StmtContext(ctx, run[i].stmt).ExecContext(ctx, st.Args...)
		} else {
			r, err = tx.ExecContext(ctx, run[i].text, st.Args...)
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
