package livetest

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/cluster"
)

// TestDurabilityKillPrimary (issue 11 item 5, seed 002 IV.C.2 recover):
// for each durability mapping of the kv service under pbdurable, a client
// writes while the primary's process is killed with SIGKILL; afterwards
// every acknowledged write must be readable for the replicated and the
// database mappings, and none for the reconstructible one (documented
// loss: the new primary starts empty). The time from the kill to the
// first acknowledged write is logged per mechanism, not asserted.
func TestDurabilityKillPrimary(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real node processes")
	}
	for _, m := range []string{"db", "pb", "reconstructible"} {
		t.Run(m, func(t *testing.T) {
			dsn := filepath.Join(t.TempDir(), "durability.db")
			c := upCluster(t, cluster.UpOptions{Nodes: 3, Protocol: "pbdurable",
				Params: map[string]string{"mapping": m, "durability_dsn": dsn}})
			addrs := c.ClientAddrs()
			cl, err := client.New(addrs, client.Options{Timeout: 500 * time.Millisecond, PoolSize: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx := context.Background()
			var mu sync.Mutex
			var acked []string
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					k := fmt.Sprintf("k%d", i)
					if err := cl.Set(ctx, k, []byte("v")); err == nil {
						mu.Lock()
						acked = append(acked, k)
						mu.Unlock()
					}
				}
			}()
			time.Sleep(time.Second)
			id, _, err := cl.Leader(ctx)
			if err != nil || id == "" {
				t.Fatalf("no primary: %q %v", id, err)
			}
			mu.Lock()
			before := len(acked)
			mu.Unlock()
			if err := c.Kill(id); err != nil {
				t.Fatalf("kill %s: %v", id, err)
			}
			killed := time.Now()
			var took time.Duration
			for {
				mu.Lock()
				n := len(acked)
				mu.Unlock()
				if n > before+1 {
					took = time.Since(killed)
					break
				}
				if time.Since(killed) > 15*time.Second {
					t.Fatalf("no write acknowledged within 15s after kill -9 of the primary %s", id)
				}
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond)
			close(stop)
			<-done
			t.Logf("mapping %s: kill -9 of the primary %s, first acknowledged write after %v (%d writes acknowledged before the kill)", m, id, took.Round(time.Millisecond), before)
			mu.Lock()
			defer mu.Unlock()
			if before < 10 {
				t.Fatalf("too little progress before the kill: %d writes", before)
			}
			lost := 0
			for _, k := range acked[:before] {
				_, found, err := cl.Get(ctx, k)
				if err != nil {
					t.Fatalf("get %s: %v", k, err)
				}
				if !found {
					lost++
				}
			}
			switch m {
			case "reconstructible":
				if lost != before {
					t.Fatalf("reconstructible: %d of %d writes acknowledged before the kill survived; the new primary should start empty", before-lost, before)
				}
			default:
				if lost > 0 {
					t.Fatalf("%s: %d of %d acknowledged writes lost after kill -9 of the primary", m, lost, before)
				}
			}
		})
	}
}
