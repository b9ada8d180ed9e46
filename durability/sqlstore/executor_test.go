package sqlstore_test

import (
	"fmt"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/durability/examples/counter"
	"github.com/synod-dev/synod/durability/sqlstore"
)

// The effect executor carries a database proxy's Work for a pure
// automaton: init, a request's statements, and after a crash of the
// executor's node a new instance answers the recovery query with what was
// committed.
func TestEffectExecutor(t *testing.T) {
	newX, err := automaton.LookupExecutor(sqlstore.EffectKind)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := automaton.ExecEnv{Self: "n1", Namespace: "c", DataDir: dir, Params: map[string]string{sqlstore.ParamSync: "false"}}
	d, _ := counter.NewDurableService(mapping(t, "../examples/counter/db.yaml"))
	x, err := newX(env)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Execute(&sqlstore.Payload{Stmts: d.Set.Init().SQL}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		_, w, _ := d.Add()
		if _, err := x.Execute(&sqlstore.Payload{Stmts: w.SQL}); err != nil {
			t.Fatal(err)
		}
	}
	x.Close()
	x2, err := newX(env)
	if err != nil {
		t.Fatal(err)
	}
	defer x2.Close()
	b, _ := counter.NewDurableService(mapping(t, "../examples/counter/db.yaml"))
	w := b.Set.Recover()
	res, err := x2.Execute(&sqlstore.Payload{Queries: w.Queries})
	if err != nil {
		t.Fatal(err)
	}
	rows := res.(sqlstore.Result).Rows
	if err := b.Set.Restore(w.Queries[0], rows[0]); err != nil || b.Service.Get() != 3 {
		t.Fatalf("recovered %d (%v), want 3", b.Service.Get(), err)
	}
	if _, err := x2.Execute("nonsense"); err == nil {
		t.Fatal("a foreign payload was accepted")
	}
	_ = durability.Work{}
}

// A simulated run's database is dropped once many newer runs made theirs,
// but an executor still holding it keeps working until it closes (the
// model checker makes a run per effect on several workers at once: it once
// failed with "sql: database is closed" half-way through re-applying a
// log).
func TestSimDatabaseHeldWhileDropped(t *testing.T) {
	newX, err := automaton.LookupExecutor(sqlstore.EffectKind)
	if err != nil {
		t.Fatal(err)
	}
	env := func(run string) automaton.ExecEnv {
		return automaton.ExecEnv{Self: "n1", Namespace: "c", Simulated: true, Run: run}
	}
	d, _ := counter.NewDurableService(mapping(t, "../examples/counter/db.yaml"))
	held, err := newX(env("held"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := held.Execute(&sqlstore.Payload{Stmts: d.Set.Init().SQL}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ { // far more runs than are kept
		x, err := newX(env(fmt.Sprintf("newer-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		x.Close()
	}
	_, w, _ := d.Add()
	if _, err := held.Execute(&sqlstore.Payload{Stmts: w.SQL}); err != nil {
		t.Fatalf("the held executor's database was closed under it: %v", err)
	}
	held.Close()
	held.Close() // a second Close is harmless
}
