package node

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	_ "github.com/synod-dev/synod/protocol/pb"
)

// primaryCluster starts a 3-node cluster of protocol proto (namespace
// "default", kv, fsync; pbdurable's database in a temporary file) with
// each node's options opts, and returns it with the node SYNOD LEADER
// names (pb's primary), else the first.
func primaryCluster(t testing.TB, proto string, opts Options) (nodes []*Node, at *Node) {
	ns := config.Namespace{Name: "default", Protocol: proto, Service: "kv"}
	if proto == "pbdurable" {
		ns.Params = map[string]string{"durability_dsn": filepath.Join(t.TempDir(), "durability.db")}
	}
	cfg, ls := mkCluster(t, 3, config.Fsync, ns)
	for i, n := range cfg.Nodes {
		nodes = append(nodes, startNode(t, cfg, n.ID, ls[i], opts))
	}
	do(t, nodes[0], "default", req("set", "warm", "x"))
	at = nodes[0]
	if id, _, err := nodes[0].Leader("default"); err == nil && id != "" {
		for _, n := range nodes {
			if n.ID() == id {
				at = n
			}
		}
	}
	return nodes, at
}

// TestLoneRequestNoYield: one client's GETs over RESP at a pb primary (a
// protocol that steps client batches, so each GET is a lone request on a
// direct pass) do not yield before they are stepped (yieldForRequests:
// runtime.Gosched wakes an idle P, 1.7 context switches more per get on a
// live cluster), while a lone write, a batch of requests, and a lone
// request right after a batch still yield. With loneYield (before
// session 56) every lone GET yields.
func TestLoneRequestNoYield(t *testing.T) {
	const gets = 50
	for _, loneYield := range []bool{false, true} {
		t.Run(fmt.Sprintf("loneYield=%v", loneYield), func(t *testing.T) {
			_, at := primaryCluster(t, "pb", Options{loneYield: loneYield})
			l := at.loop("default")
			if !l.direct {
				t.Fatal("pb's loop runs no direct passes")
			}
			cl := dialReplyClient(t, at.ClientAddr().String())
			cl.do(t, "SET", "k", "v")
			y0, d0 := l.yields.Load(), l.directs.Load()
			for range gets {
				if got := cl.do(t, "GET", "k"); got != `"v"` {
					t.Fatalf("GET k: %s", got)
				}
			}
			y, d := l.yields.Load()-y0, l.directs.Load()-d0
			if d == 0 {
				t.Fatalf("%d lone GETs at an idle primary, no direct pass", gets)
			}
			if !loneYield && y != 0 {
				t.Errorf("%d lone GETs one at a time yielded %d times, want 0", gets, y)
			}
			if loneYield && y < gets {
				t.Errorf("loneYield: %d lone GETs yielded %d times, want %d", gets, y, gets)
			}
			// A lone write yields as before (its step hands work to other
			// goroutines: pbdurable's Effect); so does a batch, for the
			// requests that may join it, and the lone request after it.
			y0 = l.yields.Load()
			if got := cl.do(t, "SET", "k", "w"); got != "OK" {
				t.Fatalf("SET k: %s", got)
			}
			if y := l.yields.Load() - y0; y != 1 {
				t.Errorf("a lone SET yielded %d times, want 1", y)
			}
			y0 = l.yields.Load()
			rs := []automaton.Request{req("set", "b", "1"), req("get", "b"), req("set", "b", "2"), req("get", "b")}
			out, errs := at.DoBatch(context.Background(), "default", rs)
			for i, want := range []string{"OK", `"1"`, "OK", `"2"`} {
				if errs[i] != nil || out[i].Result.String() != want {
					t.Fatalf("batch answer %d: %v %v, want %s", i, out[i].Result, errs[i], want)
				}
			}
			if y := l.yields.Load() - y0; y == 0 {
				t.Errorf("a batch of 4 requests did not yield")
			}
			y0 = l.yields.Load()
			if got := cl.do(t, "GET", "b"); got != `"2"` {
				t.Fatalf("GET b: %s", got)
			}
			if y := l.yields.Load() - y0; y != 1 {
				t.Errorf("a lone GET after a batch yielded %d times, want 1", y)
			}
		})
	}
}
