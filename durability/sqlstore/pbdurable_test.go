package sqlstore_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability/examples/matchmaker"
	"github.com/synod-dev/synod/durability/pgserver"
	"github.com/synod-dev/synod/durability/sqlstore"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/protocol/pbdurable"
	"github.com/synod-dev/synod/service"
)

func op(kind, key string, args ...string) service.Op {
	o := service.Op{Kind: kind, Key: key}
	for _, a := range args {
		o.Args = append(o.Args, []byte(a))
	}
	return o
}

// drive delivers every message and completes every effect until nothing
// is left.
func drive(c *harness.Cluster) {
	for c.DeliverAll()+c.CompleteEffects() > 0 {
	}
}

// TestPBDurableOnPostgres replays on the private PostgreSQL server (when
// installed) every database effect a cluster emits under each mapping
// with a database object (init, requests with the commit decision, a new
// primary's recovery): the statements the simulator and the harness run
// on SQLite must run on PostgreSQL too, and recover the same rows.
func TestPBDurableOnPostgres(t *testing.T) {
	if errors.Is(pgErr, pgserver.ErrNotInstalled) {
		t.Skip(pgErr)
	}
	if pgErr != nil {
		t.Fatal(pgErr)
	}
	for _, tc := range []struct {
		svc     service.Service
		mapping string
		writes  []service.Op
	}{
		{matchmaker.Synod{}, "pbdb", []service.Op{op("advertise", "m1", "2000", "1024"), op("submit", "alice", "1", "1")}},
		{matchmaker.Synod{}, "db", []service.Op{op("advertise", "m1", "2000", "1024"), op("advertise", "m2", "2", "2"), op("submit", "alice", "1", "1")}},
		{matchmaker.Synod{}, "reconstructible", []service.Op{op("advertise", "m1", "2000", "1024"), op("submit", "alice", "1", "1")}},
		{service.Counter{}, "db", []service.Op{op("add", "", "5")}},
		{service.KV{}, "pbdb", []service.Op{op("set", "k", "v")}},
		{service.KV{}, "db", []service.Op{op("set", "k", "v")}},
	} {
		t.Run(tc.svc.Name()+"/"+tc.mapping, func(t *testing.T) {
			pgDBs++
			dsn, err := pg.CreateDB(fmt.Sprintf("t%d", pgDBs))
			if err != nil {
				t.Fatal(err)
			}
			st, err := sqlstore.Open(sqlstore.Config{Driver: sqlstore.Postgres, DSN: dsn, Sync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			c := harness.New(t, harness.Options{Protocol: pbdurable.Name, Nodes: 3, Service: tc.svc,
				Params: map[string]string{"mapping": tc.mapping}, Down: []automaton.NodeID{"n1", "n2", "n3"}})
			// The effects in the order they were emitted (one at a time:
			// the harness runs them in this order on SQLite).
			var payloads []*sqlstore.Payload
			c.Observe(func(_ automaton.NodeID, o automaton.Output) {
				if e, ok := o.(automaton.Effect); ok {
					payloads = append(payloads, e.Payload.(*sqlstore.Payload))
				}
			})
			c.Boot("n1")
			c.Boot("n2")
			c.Boot("n3")
			drive(c)
			for _, w := range tc.writes {
				id := c.Request("n1", w, automaton.Options{})
				drive(c)
				if _, ok := c.Response(id); !ok {
					t.Fatalf("%v: no answer", w)
				}
			}
			c.Crash("n1")
			for range 4 {
				c.FireAllNodes()
				drive(c)
			}
			if len(payloads) < 2 {
				t.Fatalf("%d effects", len(payloads))
			}
			var last [][][]any
			for _, p := range payloads {
				if err := st.Exec(ctx, p.Stmts); err != nil {
					t.Fatal(err)
				}
				last = nil
				for _, q := range p.Queries {
					rows, err := st.Query(ctx, q)
					if err != nil {
						t.Fatal(err)
					}
					var rs [][]any
					for _, r := range rows {
						rs = append(rs, append([]any(nil), r...))
					}
					last = append(last, rs)
				}
			}
			if len(last) == 0 {
				t.Fatalf("the last effect (the new primary's recovery) ran no query")
			}
			for qi, rows := range last {
				if len(rows) == 0 {
					t.Errorf("recovery query %d returned no rows on PostgreSQL: %v", qi, payloads[len(payloads)-1].Queries[qi])
				}
			}
		})
	}
}
