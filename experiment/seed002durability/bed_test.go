package seed002durability

import (
	"context"
	"strconv"
	"testing"

	"github.com/synod-dev/synod/durability/sqlstore"
)

// The test bed's short pass (CI): each Counter configuration answers a
// run of adds in order, the PB backup ends with the primary's value, and
// the DB table holds it.
func TestCounterBed(t *testing.T) {
	for _, cfg := range []string{"original", "pb", "db"} {
		t.Run(cfg, func(t *testing.T) {
			handle, set, bset, bval, err := counterHandler(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var bk *backup
			if bset != nil {
				if bk, err = startBackup(bset); err != nil {
					t.Fatal(err)
				}
			}
			var st *sqlstore.Store
			if cfg == "db" {
				st, err = sqlstore.Open(sqlstore.Config{DSN: t.TempDir() + "/c.db"})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				if err := st.Run(context.Background(), set, set.Init()); err != nil {
					t.Fatal(err)
				}
			}
			svc, err := startService(handle, st, bk)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := dial(svc)
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 50; i++ {
				ans, err := cl.call("add")
				if err != nil || ans != strconv.Itoa(i) {
					t.Fatalf("add %d answered %q, %v", i, ans, err)
				}
			}
			cl.c.Close()
			if err := svc.close(); err != nil {
				t.Fatal(err)
			}
			if bk != nil {
				if err := bk.close(); err != nil {
					t.Fatal(err)
				}
				// The backup acknowledged every add before its answer left.
				if v := bval(); v != 50 {
					t.Fatalf("backup holds %d, want 50", v)
				}
			}
			if st != nil {
				var v int64
				if err := st.DB().QueryRow("SELECT value FROM counter WHERE id = 1").Scan(&v); err != nil || v != 50 {
					t.Fatalf("table holds %d (%v), want 50", v, err)
				}
			}
		})
	}
}
