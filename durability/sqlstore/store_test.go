package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/durability/examples/counter"
	"github.com/synod-dev/synod/durability/examples/matchmaker"
	"github.com/synod-dev/synod/durability/pgserver"
	"github.com/synod-dev/synod/durability/sqlstore"
)

var ctx = context.Background()

// One private PostgreSQL server for the package's tests (nil: not
// installed, pgErr says why); each test gets its own database.
var (
	pg    *pgserver.Server
	pgErr error
	pgDBs int
)

func TestMain(m *testing.M) {
	pg, pgErr = pgserver.Start()
	code := m.Run()
	if pg != nil {
		pg.Stop()
	}
	os.Exit(code)
}

func mapping(t *testing.T, path string) *durability.Mapping {
	t.Helper()
	m, err := durability.LoadMapping(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// stores runs f against a fresh SQLite file and, when PostgreSQL is
// installed, a fresh private PostgreSQL server.
func stores(t *testing.T, f func(t *testing.T, open func() *sqlstore.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		f(t, func() *sqlstore.Store {
			s, err := sqlstore.Open(sqlstore.Config{Driver: sqlstore.SQLite, DSN: path, Sync: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		})
	})
	t.Run("postgres", func(t *testing.T) {
		if errors.Is(pgErr, pgserver.ErrNotInstalled) {
			t.Skip(pgErr)
		}
		if pgErr != nil {
			t.Fatal(pgErr)
		}
		pgDBs++
		dsn, err := pg.CreateDB(fmt.Sprintf("t%d", pgDBs))
		if err != nil {
			t.Fatal(err)
		}
		f(t, func() *sqlstore.Store {
			s, err := sqlstore.Open(sqlstore.Config{Driver: sqlstore.Postgres, DSN: dsn, Sync: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		})
	})
}

// A DB Counter: every add is one transaction; a new instance (the
// backup, or a restarted primary) recovers the value by the mapping's
// query.
func TestCounterRecoversFromDatabase(t *testing.T) {
	stores(t, func(t *testing.T, open func() *sqlstore.Store) {
		m := mapping(t, "../examples/counter/db.yaml")
		st := open()
		d, err := counter.NewDurableService(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Run(ctx, d.Set, d.Set.Init()); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 25; i++ {
			v, w, err := d.Add()
			if err != nil || v != int64(i) || len(w.SQL) != 1 {
				t.Fatalf("add %d: %d %+v %v", i, v, w, err)
			}
			if err := st.Run(ctx, d.Set, w); err != nil {
				t.Fatal(err)
			}
		}
		st2 := open() // another connection: what a new primary sees
		b, _ := counter.NewDurableService(m)
		if err := st2.Run(ctx, b.Set, b.Set.Recover()); err != nil {
			t.Fatal(err)
		}
		if got := b.Service.Get(); got != 25 {
			t.Fatalf("recovered %d, want 25", got)
		}
		// init again (a restarted first primary) must not reset the row.
		if err := st2.Run(ctx, b.Set, b.Set.Init()); err != nil {
			t.Fatal(err)
		}
		b.Set.Recover()
		if err := st2.Run(ctx, b.Set, b.Set.Recover()); err != nil || b.Service.Get() != 25 {
			t.Fatalf("after a second init: %d %v", b.Service.Get(), err)
		}
	})
}

// DB Matchmaker: the recovered objects equal the primary's (queue order
// included), and a request is all or nothing across both objects.
func TestMatchmakerAllOrNothing(t *testing.T) {
	stores(t, func(t *testing.T, open func() *sqlstore.Store) {
		m := mapping(t, "../examples/matchmaker/db.yaml")
		st := open()
		d, err := matchmaker.NewDurableService(m)
		if err != nil {
			t.Fatal(err)
		}
		run := func(w durability.Work, err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Run(ctx, d.Set, w); err != nil {
				t.Fatal(err)
			}
		}
		run(d.Set.Init(), nil)
		for _, n := range []string{"m3", "m1", "m2", "m4"} {
			run(d.MachineAdvertise(n, 2000, 1024))
		}
		run(d.MachineAdvertise("m1", 3000, 2048)) // a refresh keeps the place in the queue
		for i, c := range []string{"a", "b", "a"} {
			cpu := int64(0)
			if i == 0 {
				cpu = 2500 // only the refreshed m1 fits
			}
			got, _, w, err := d.JobSubmit(c, cpu, 0)
			if i == 0 && (got != "m1" || len(w.SQL) != 2) {
				t.Fatalf("jobSubmit got %q, work %+v", got, w)
			}
			run(w, err)
		}
		b, _ := matchmaker.NewDurableService(m)
		if err := open().Run(ctx, b.Set, b.Set.Recover()); err != nil {
			t.Fatal(err)
		}
		pq := d.Service.Queue.(*matchmaker.MachineQueueProxy).Object()
		bq := b.Service.Queue.(*matchmaker.MachineQueueProxy).Object()
		pa := d.Service.Accounts.(*matchmaker.AccountSetProxy).Object()
		ba := b.Service.Accounts.(*matchmaker.AccountSetProxy).Object()
		if !reflect.DeepEqual(pq, bq) || !reflect.DeepEqual(pa, ba) {
			t.Fatalf("recovered %+v %+v, primary %+v %+v", bq, ba, pq, pa)
		}
		// All or nothing: a request whose second statement fails (a
		// duplicate account) leaves the machine it removed in the table.
		d.MachineAdvertise("m9", 9999, 9999)
		run(d.MachineAdvertise("m9", 9999, 9999))
		w := durability.Work{SQL: []durability.Stmt{
			{Object: "MachineQueue", SQL: "DELETE FROM machines WHERE name = ?", Args: []durability.Value{"m9"}},
			{Object: "AccountSet", SQL: "INSERT INTO bills (clientID, balance) VALUES (?, ?)", Args: []durability.Value{"a", int64(1)}},
		}}
		if err := st.Exec(ctx, w.SQL); err == nil || !strings.Contains(err.Error(), "AccountSet") {
			t.Fatalf("the duplicate account was accepted: %v", err)
		}
		c, _ := matchmaker.NewDurableService(m)
		if err := st.Run(ctx, c.Set, c.Set.Recover()); err != nil {
			t.Fatal(err)
		}
		if _, ok := c.Service.Queue.First(9999, 9999); !ok {
			t.Fatal("the failed request's DELETE was committed")
		}
	})
}

// TestPreparedStatementsReused: a statement with arguments is prepared
// once and reused by every later transaction that sends it; statements
// without arguments are not kept; a failing transaction that used a kept
// statement rolls back all of its statements and leaves the statement
// usable; Close releases them.
func TestPreparedStatementsReused(t *testing.T) {
	stores(t, func(t *testing.T, open func() *sqlstore.Store) {
		s := open()
		ddl := []durability.Stmt{{Object: "kv", SQL: "CREATE TABLE kv (k TEXT PRIMARY KEY, v INT NOT NULL)"}}
		if err := s.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
		if n := s.Prepared(); n != 0 {
			t.Fatalf("after DDL without arguments: %d prepared, want 0", n)
		}
		ins := "INSERT INTO kv (k, v) VALUES (?, ?)"
		upd := "UPDATE kv SET v = v + ? WHERE k = ?"
		for i := 0; i < 20; i++ {
			k := fmt.Sprintf("k%d", i%5)
			var w []durability.Stmt
			if i < 5 {
				w = append(w, durability.Stmt{Object: "kv", SQL: ins, Args: []any{k, 0}})
			}
			w = append(w, durability.Stmt{Object: "kv", SQL: upd, Args: []any{1, k}, Fence: true})
			if err := s.Exec(ctx, w); err != nil {
				t.Fatalf("transaction %d: %v", i, err)
			}
			if n := s.Prepared(); n != 2 {
				t.Fatalf("after transaction %d: %d prepared, want 2 (insert and update)", i, n)
			}
		}
		// A duplicate insert fails: the update before it in the same
		// transaction must not stay applied.
		bad := []durability.Stmt{
			{Object: "kv", SQL: upd, Args: []any{100, "k0"}, Fence: true},
			{Object: "kv", SQL: ins, Args: []any{"k1", 7}},
		}
		if err := s.Exec(ctx, bad); err == nil {
			t.Fatal("duplicate insert: no error")
		}
		// A fenced update that matches no row fails the same way.
		fenced := []durability.Stmt{{Object: "kv", SQL: upd, Args: []any{1, "nope"}, Fence: true}}
		if err := s.Exec(ctx, fenced); !errors.Is(err, durability.ErrFenced) {
			t.Fatalf("fenced update of a missing row: %v, want ErrFenced", err)
		}
		if err := s.Exec(ctx, []durability.Stmt{{Object: "kv", SQL: upd, Args: []any{1, "k0"}, Fence: true}}); err != nil {
			t.Fatalf("kept statement after a rolled-back transaction: %v", err)
		}
		rows, err := s.Query(ctx, durability.Query{Object: "kv", SQL: "SELECT k, v FROM kv ORDER BY k"})
		if err != nil {
			t.Fatal(err)
		}
		want := [][]durability.Value{{"k0", int64(5)}, {"k1", int64(4)}, {"k2", int64(4)}, {"k3", int64(4)}, {"k4", int64(4)}}
		if !reflect.DeepEqual(rows, want) {
			t.Fatalf("rows %v, want %v", rows, want)
		}
		if n := s.Prepared(); n != 2 {
			t.Fatalf("at the end: %d prepared, want 2", n)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if n := s.Prepared(); n != 0 {
			t.Fatalf("after Close: %d prepared, want 0", n)
		}
	})
}

// TestStatementsKeptBounded: a store keeps at most MaxPrepared statements
// (translation and prepared statement, by the proxy's text); the
// statements past the bound still run, translated and unprepared, with the
// same results as kept ones; kept statements are reused, not kept twice;
// transactions from several goroutines share the kept statements (go test
// -race); Close releases them.
func TestStatementsKeptBounded(t *testing.T) {
	stores(t, func(t *testing.T, open func() *sqlstore.Store) {
		s := open()
		if err := s.Exec(ctx, []durability.Stmt{{Object: "kv", SQL: "CREATE TABLE kv (k TEXT PRIMARY KEY, v INT NOT NULL)"}}); err != nil {
			t.Fatal(err)
		}
		// One distinct text per key, more than the bound: the text holds
		// the key's number, and a quoted '?' that is no placeholder.
		n := sqlstore.MaxPrepared + 20
		ins := func(i int) durability.Stmt {
			return durability.Stmt{Object: "kv", SQL: fmt.Sprintf("INSERT INTO kv (k, v) VALUES (? || '?%d', ? + %d)", i, i), Args: []any{"k", 1}}
		}
		for i := 0; i < n; i += 2 {
			if err := s.Exec(ctx, []durability.Stmt{ins(i), ins(i + 1)}); err != nil {
				t.Fatalf("insert %d: %v", i, err)
			}
			want := min(i+2, sqlstore.MaxPrepared)
			if got := s.Prepared(); got != want {
				t.Fatalf("after %d inserts: %d kept, want %d", i+2, got, want)
			}
		}
		// Every key, kept statement or not, updated by the same
		// statement from several goroutines at once.
		upd := "UPDATE kv SET v = v + ? WHERE k = ?"
		const workers, rounds = 4, 10
		errs := make(chan error, workers)
		for w := 0; w < workers; w++ {
			go func() {
				for r := 0; r < rounds; r++ {
					var tx []durability.Stmt
					for _, i := range []int{0, sqlstore.MaxPrepared - 1, sqlstore.MaxPrepared, n - 1} {
						tx = append(tx, durability.Stmt{Object: "kv", SQL: upd, Args: []any{1, fmt.Sprintf("k?%d", i)}, Fence: true})
					}
					if err := s.Exec(ctx, tx); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for w := 0; w < workers; w++ {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if got := s.Prepared(); got != sqlstore.MaxPrepared {
			t.Fatalf("after the updates: %d kept, want %d (the bound)", got, sqlstore.MaxPrepared)
		}
		rows, err := s.Query(ctx, durability.Query{Object: "kv", SQL: "SELECT k, v FROM kv"})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != n {
			t.Fatalf("%d rows, want %d", len(rows), n)
		}
		got := map[string]int64{}
		for _, r := range rows {
			got[r[0].(string)] = r[1].(int64)
		}
		for i := 0; i < n; i++ {
			want := int64(1 + i)
			if i == 0 || i == sqlstore.MaxPrepared-1 || i == sqlstore.MaxPrepared || i == n-1 {
				want += workers * rounds
			}
			if k := fmt.Sprintf("k?%d", i); got[k] != want {
				t.Fatalf("%s = %d, want %d", k, got[k], want)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if got := s.Prepared(); got != 0 {
			t.Fatalf("after Close: %d kept, want 0", got)
		}
	})
}

// BenchmarkExecKept: a transaction of two kept statements with arguments
// (a fenced update and an update, as a pbdurable request's), the store's
// in-process cost per transaction (allocations exact; time includes the
// database's own work and, with Sync, its fsync).
func BenchmarkExecKept(b *testing.B) {
	for _, driver := range []string{sqlstore.SQLite, sqlstore.Postgres} {
		b.Run(driver, func(b *testing.B) {
			cfg := sqlstore.Config{Driver: driver, DSN: filepath.Join(b.TempDir(), "state.db")}
			if driver == sqlstore.Postgres {
				if pgErr != nil {
					b.Skip(pgErr)
				}
				pgDBs++
				dsn, err := pg.CreateDB(fmt.Sprintf("b%d", pgDBs))
				if err != nil {
					b.Fatal(err)
				}
				cfg.DSN = dsn
			}
			s, err := sqlstore.Open(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := s.Exec(ctx, []durability.Stmt{
				{Object: "kv", SQL: "CREATE TABLE kv (k TEXT PRIMARY KEY, v INT NOT NULL)"},
				{Object: "kv", SQL: "INSERT INTO kv (k, v) VALUES ('a', 0), ('b', 0)"},
			}); err != nil {
				b.Fatal(err)
			}
			tx := []durability.Stmt{
				{Object: "kv", SQL: "UPDATE kv SET v = v + ? WHERE k = ? AND v >= ?", Args: []any{1, "a", 0}, Fence: true},
				{Object: "kv", SQL: "UPDATE kv SET v = ? WHERE k = ?", Args: []any{7, "b"}},
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := s.Exec(ctx, tx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
