package pbdurable

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/durability/sqlstore"
	"github.com/synod-dev/synod/protocol/proto"
)

// TestFenceRefusesDeposedPrimary: on a real SQLite file, the primary of
// view (2,1) commits a write; the primary of view (3,2) takes over (its
// recovery transaction carries the fence); the deposed primary's next
// write is refused by the database (durability.ErrFenced) and changes
// nothing, while the new primary's writes commit.
func TestFenceRefusesDeposedPrimary(t *testing.T) {
	st, err := sqlstore.Open(sqlstore.Config{DSN: filepath.Join(t.TempDir(), "fence.db"), Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	table := durability.Stmt{Object: "t", SQL: "CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v TEXT NOT NULL)"}
	put := func(k, v string) durability.Stmt {
		return durability.Stmt{Object: "t", SQL: "INSERT INTO t (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
			Args: []durability.Value{k, v}}
	}
	ensure := durability.Stmt{Object: viewObject, SQL: viewEnsure}
	old, next := proto.Ballot{Round: 2, Node: 1}, proto.Ballot{Round: 3, Node: 2}
	if err := st.Exec(ctx, []durability.Stmt{table, viewTable, ensure, fence(old), put("a", "old")}); err != nil {
		t.Fatalf("the primary of %v: %v", old, err)
	}
	if err := st.Exec(ctx, []durability.Stmt{viewTable, ensure, fence(next)}); err != nil {
		t.Fatalf("the recovery of %v: %v", next, err)
	}
	err = st.Exec(ctx, []durability.Stmt{fence(old), put("a", "deposed"), put("b", "deposed")})
	if !errors.Is(err, durability.ErrFenced) {
		t.Fatalf("the deposed primary's write: %v, want ErrFenced", err)
	}
	if err := st.Exec(ctx, []durability.Stmt{fence(next), put("c", "new")}); err != nil {
		t.Fatalf("the new primary's write: %v", err)
	}
	rows, err := st.Query(ctx, durability.Query{Object: "t", SQL: "SELECT k, v FROM t ORDER BY k"})
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, r := range rows {
		k, _ := durability.AsString(r[0])
		v, _ := durability.AsString(r[1])
		got += k + "=" + v + " "
	}
	if got != "a=old c=new " {
		t.Fatalf("rows %q, want the old primary's write before the take-over and the new primary's only", got)
	}
}
