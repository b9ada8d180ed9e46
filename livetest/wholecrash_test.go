package livetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/durability/sqlstore"
)

// TestWholeClusterKill is issue 29's crash table, on real processes: for
// every registered protocol, three nodes with `durability: fsync` (the
// default), N acknowledged SETs, kill -9 of every node at once, a restart
// of all, and a read of the N keys: every acknowledged write must read
// back. N is 20 in CI (a few seconds per protocol);
// SYNOD_WHOLECRASH_WRITES=50 (or more) is the long run. Each protocol
// logs its row of the table.
func TestWholeClusterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real node processes")
	}
	n := 20
	if s := os.Getenv("SYNOD_WHOLECRASH_WRITES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("SYNOD_WHOLECRASH_WRITES=%q: want a positive count", s)
		}
		n = v
	}
	for _, p := range automaton.Names() {
		t.Run(p, func(t *testing.T) { wholeClusterKill(t, p, nil, n) })
	}
	// pbdurable's mappings with replicated objects (the default, db, is
	// above): the node whose durable state is of the latest view takes
	// over once every node reported (protocol/pbdurable, "Restarts").
	for _, m := range []string{"pb", "pbdb"} {
		prm := map[string]string{"mapping": m}
		t.Run("pbdurable-"+m, func(t *testing.T) { wholeClusterKill(t, "pbdurable", prm, n) })
	}
}

func wholeClusterKill(t *testing.T, p string, params map[string]string, n int) {
	opts := cluster.UpOptions{Nodes: 3, Protocol: p, Durability: config.Fsync, Params: params}
	// A protocol that calls other namespaces (adam) gets them, replicated
	// by paxos: the crash takes them down too.
	for _, callee := range automaton.Callees(p, nil) {
		opts.Extra = append(opts.Extra, config.Namespace{Name: callee, Protocol: "paxos", Service: "kv"})
	}
	c := upCluster(t, opts)
	defer func() {
		if t.Failed() {
			logTails(t, c.Dir, 30)
		}
	}()
	ctx := context.Background()
	cl, err := client.New(c.ClientAddrs(), client.Options{Timeout: time.Second, PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	acked := 0
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("k%d", i)
		for {
			err := cl.Set(ctx, k, []byte("v"+k))
			if err == nil {
				acked++
				break
			}
			if time.Now().After(deadline) {
				cl.Close()
				t.Fatalf("%s: set %s not acknowledged within 20 s: %v", p, k, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	cl.Close()

	// kill -9 of every node at once, then a restart of all.
	onEveryNode(t, c, "kill -9", c.Kill)
	onEveryNode(t, c, "restart", func(id string) error { return restartRetrying(t, c, id) })

	cl, err = client.New(c.ClientAddrs(), client.Options{Timeout: time.Second, PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	start := time.Now()
	deadline = start.Add(20 * time.Second)
	read, lastErr := 0, error(nil)
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("k%d", i)
		for {
			v, found, err := cl.Get(ctx, k)
			if err == nil && found && string(v) == "v"+k {
				read++
				break
			}
			if err == nil && found {
				t.Fatalf("%s: %s reads back %q after kill -9 of every node", p, k, v)
			}
			lastErr = err
			if err == nil {
				lastErr = fmt.Errorf("%s not found", k)
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if time.Now().After(deadline) {
			break
		}
	}
	if m := params["mapping"]; m != "" {
		p += " (mapping " + m + ")"
	}
	t.Logf("crash table: | %s | %d acknowledged, kill -9 of all 3, restart | %d read back (first read after restart took %v; last error %v) |",
		p, acked, read, time.Since(start).Round(time.Millisecond), lastErr)
	if read != acked {
		t.Fatalf("%s: %d of %d acknowledged writes read back after kill -9 of every node and a restart (last error: %v)", p, read, acked, lastErr)
	}
}

// TestDatabaseOutlivesCluster (issue 29; the Grid Services thesis IV.C.1: "a new instance
// is created and proxies restore state before serving"): a pbdurable
// cluster under the db mapping acknowledges writes into a SQLite file; all
// its nodes are killed with SIGKILL and its directory is dropped; a fresh
// cluster, in another directory, pointed at the same file reads every
// write back: an existing database is recovered, never emptied.
func TestDatabaseOutlivesCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real node processes")
	}
	dsn := filepath.Join(t.TempDir(), "shared.db")
	params := map[string]string{"mapping": "db", sqlstore.ParamDSN: dsn}
	first := upCluster(t, cluster.UpOptions{Nodes: 3, Protocol: "pbdurable", Params: params})
	cl, err := client.New(first.ClientAddrs(), client.Options{Timeout: time.Second, PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 10
	for i := 0; i < n; i++ {
		if err := cl.Set(ctx, fmt.Sprintf("k%d", i), []byte("v")); err != nil {
			t.Fatalf("set k%d: %v", i, err)
		}
	}
	cl.Close()
	onEveryNode(t, first, "kill -9", first.Kill)
	second := upCluster(t, cluster.UpOptions{Nodes: 3, Protocol: "pbdurable", Params: params})
	cl, err = client.New(second.ClientAddrs(), client.Options{Timeout: time.Second, PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("k%d", i)
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, found, err := cl.Get(ctx, k)
			if err == nil && found {
				break
			}
			if err == nil || time.Now().After(deadline) {
				logTails(t, second.Dir, 20)
				t.Fatalf("%s after a fresh cluster recovered the database: found %v, %v", k, found, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// onEveryNode runs f on every node of c at once and fails on any error.
func onEveryNode(t *testing.T, c *cluster.Cluster, what string, f func(id string) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(c.Nodes))
	for i, nd := range c.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f(nd.ID) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s %s: %v", what, c.Nodes[i].ID, err)
		}
	}
}

// restartRetrying restarts node id, again while its fixed port is taken:
// on a shared machine another process (or an outgoing connection's
// ephemeral port) may hold a port for a moment after the kill.
func restartRetrying(t *testing.T, c *cluster.Cluster, id string) error {
	var err error
	for try := 0; try < 10; try++ {
		if err = c.Restart(id); err == nil || !strings.Contains(err.Error(), "address already in use") {
			return err
		}
		t.Logf("restart %s: a port is taken, again in 500 ms: %v", id, err)
		time.Sleep(500 * time.Millisecond)
	}
	return err
}
