package livetest

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/cluster"
)

// TestESDSKillReplicaUnderLoad runs non-strict INCRBY load (the ESDS thesis's Counter
// service, answered as soon as the contacted replica has done the operation)
// against a 3-node ESDS cluster with fsync durability, kill -9s one replica
// mid-run and restarts it, then stops the load and reads the counter through
// every node until all three agree. They must converge on one value that
// counts every acknowledged add and at most the adds of unknown outcome.
func TestESDSKillReplicaUnderLoad(t *testing.T) {
	c := upCluster(t, cluster.UpOptions{Nodes: 3, Protocol: "esds", Service: "counter"})
	addrs := c.ClientAddrs()
	var acked, unknown atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for id := 0; id < 4; id++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			rot := append(append([]string{}, addrs[id%len(addrs):]...), addrs[:id%len(addrs)]...)
			cl, err := client.New(rot, client.Options{Timeout: opTimeout, PoolSize: 1})
			if err != nil {
				t.Error(err)
				return
			}
			defer cl.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				_, err := cl.IncrBy(ctx, "counter", 1)
				cancel()
				if err != nil {
					unknown.Add(1)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				acked.Add(1)
			}
		}(id)
	}
	time.Sleep(700 * time.Millisecond)
	if err := c.Kill("n2"); err != nil {
		t.Fatalf("kill n2: %v", err)
	}
	before := acked.Load()
	time.Sleep(700 * time.Millisecond)
	if acked.Load() == before {
		t.Errorf("no add was acknowledged while n2 was down: non-strict operations must not wait for it")
	}
	if err := restartRetrying(t, c, "n2"); err != nil {
		t.Fatalf("restart n2: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	a, u := acked.Load(), unknown.Load()
	t.Logf("acknowledged adds %d, unknown %d", a, u)
	if a == 0 {
		t.Fatal("no add acknowledged")
	}

	// Convergence: every node reads the same value, within bounds.
	deadline := time.Now().Add(20 * time.Second)
	var vals []int64
	for {
		vals = vals[:0]
		for i, addr := range addrs {
			cl, err := client.New([]string{addr}, client.Options{Timeout: opTimeout, PoolSize: 1})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			v, found, err := cl.Get(ctx, "counter")
			cancel()
			cl.Close()
			if err != nil || !found {
				t.Logf("GET through n%d: %v (found %v)", i+1, err, found)
				vals = append(vals, -1)
				continue
			}
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				t.Fatalf("GET through n%d: %q is not an integer", i+1, v)
			}
			vals = append(vals, n)
		}
		if vals[0] >= 0 && vals[0] == vals[1] && vals[1] == vals[2] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas did not converge within 20 s: %v", vals)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if vals[0] < a || vals[0] > a+u {
		t.Fatalf("replicas agree on %d, but %d adds were acknowledged and %d of unknown outcome", vals[0], a, u)
	}
	t.Logf("all replicas read %d", vals[0])
}
