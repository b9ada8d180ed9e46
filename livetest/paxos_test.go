package livetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/cluster"
)

// TestPaxosKillUnderLoad runs 6 clients against a 3-node Multi-Paxos cluster
// (fsync), kill -9s the leader (as SYNOD LEADER names it), restarts it, then
// kill -9s the new leader, and measures how long writes stay unavailable
// after each kill. A different node must lead after each kill. No
// acknowledged write may be lost, and the whole history, including final
// reads through every node, must be linearizable.
func TestPaxosKillUnderLoad(t *testing.T) {
	const (
		clients = 6
		nkeys   = 10
	)
	c := upCluster(t, cluster.UpOptions{Nodes: 3, Protocol: "paxos", Durability: "fsync"})
	addrs := c.ClientAddrs()
	keys := keyNames(nkeys)
	r := newRecorder(t, "paxos", "fsync")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runClient(t, r, i, addrs, keys, stop)
		}()
	}
	time.Sleep(time.Second)
	// Each kill hits the leader and costs an election (about
	// election_timeout plus a random part).
	for k := range 2 {
		id := leaderOf(t, addrs)
		victim := int(id[1] - '1')
		if err := c.Kill(id); err != nil {
			t.Fatalf("kill %s: %v", id, err)
		}
		killed := time.Now()
		// Probe the survivors with writes until one is acknowledged.
		var others []string
		for i, a := range addrs {
			if i != victim {
				others = append(others, a)
			}
		}
		pc, err := client.New(others, client.Options{Timeout: 500 * time.Millisecond, PoolSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		proc := r.newProc()
		var took time.Duration
		for n := 0; ; n++ {
			if err := r.set(context.Background(), proc, pc, "probe", fmt.Sprintf("p%d-%d", k, n)); err == nil {
				took = time.Since(killed)
				break
			}
			proc = r.newProc()
			if time.Since(killed) > 10*time.Second {
				pc.Close()
				t.Fatalf("no write acknowledged within 10s after kill -9 of %s", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
		pc.Close()
		if next := leaderOf(t, others); next == id {
			t.Fatalf("after kill -9 of the leader %s, the survivors still name it leader", id)
		}
		t.Logf("kill -9 %s (the leader): first acknowledged write after %v", id, took.Round(time.Millisecond))
		time.Sleep(500 * time.Millisecond)
		if err := restartRetrying(t, c, id); err != nil {
			t.Fatalf("restart %s: %v", id, err)
		}
		time.Sleep(time.Second)
	}
	close(stop)
	wg.Wait()
	t.Logf("load: %d acknowledged writes, %d acknowledged reads, %d unknown writes, %d failed reads",
		r.stats.ackedWrites.Load(), r.stats.ackedReads.Load(), r.stats.unknownWrites.Load(), r.stats.failedReads.Load())
	if r.stats.ackedWrites.Load() < 100 || r.stats.ackedReads.Load() < 100 {
		t.Fatalf("too little progress under load: %d writes, %d reads acknowledged",
			r.stats.ackedWrites.Load(), r.stats.ackedReads.Load())
	}
	readAll(t, r, addrs, append(keys, "probe"), "after the kills")
	checkHistory(t, r, "after the kills")
}

// leaderOf asks the nodes at addrs for the paxos leader until they name one
// (within 10 s).
func leaderOf(t *testing.T, addrs []string) string {
	t.Helper()
	c, err := client.New(addrs, client.Options{Timeout: time.Second, PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		id, _, err := c.Leader(context.Background())
		if err == nil && len(id) == 2 && id[0] == 'n' && id[1] >= '1' && id[1] <= '3' {
			return id
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader named within 10 s (last: %q, %v)", id, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
