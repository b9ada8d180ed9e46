package livetest

import (
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/synod-dev/synod/cluster"
)

// TestPaxosMembershipUnderLoad: a 3-node Multi-Paxos cluster (fsync) under
// load gets n4 added, n1 removed (n1 often leads: the removal then also
// makes the leader step down), and then n2 killed with kill -9. n3 and n4
// are a majority of {n2, n3, n4}: the cluster keeps serving, no
// acknowledged write is lost, and the history is linearizable.
func TestPaxosMembershipUnderLoad(t *testing.T) {
	const nkeys = 8
	c := upCluster(t, cluster.UpOptions{Nodes: 3, Protocol: "paxos", Durability: "fsync"})
	keys := keyNames(nkeys)
	r := newRecorder(t, "paxos", "")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	load := func(id int, addrs []string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runClient(t, r, id, addrs, keys, stop)
		}()
	}
	old := c.ClientAddrs()
	for i := 0; i < 4; i++ {
		load(i, old)
	}
	time.Sleep(700 * time.Millisecond)

	t0 := time.Now()
	n4, err := cluster.Add(c.Dir)
	if err != nil {
		t.Fatalf("add: %v", err)
	}
	t.Logf("added %s in %v", n4.ID, time.Since(t0).Round(time.Millisecond))
	for i := 4; i < 6; i++ {
		load(i, []string{n4.Client, old[1], old[2]})
	}
	time.Sleep(700 * time.Millisecond)

	t0 = time.Now()
	if err := cluster.Remove(c.Dir, "n1"); err != nil {
		t.Fatalf("remove n1: %v", err)
	}
	t.Logf("removed n1 in %v", time.Since(t0).Round(time.Millisecond))
	mem, from, err := cluster.Members(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !reflect.DeepEqual(mem["default"], []string{"n2", "n3", "n4"}) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		mem, from, _ = cluster.Members(c.Dir)
	}
	if !reflect.DeepEqual(mem["default"], []string{"n2", "n3", "n4"}) {
		t.Fatalf("live membership as %s reports: %v", from, mem)
	}
	time.Sleep(500 * time.Millisecond)
	before := r.stats.ackedWrites.Load()
	if err := c.Kill("n2"); err != nil {
		t.Fatal(err)
	}
	t.Logf("kill -9 n2 (an original member)")
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	after := r.stats.ackedWrites.Load()
	t.Logf("load: %d acknowledged writes (%d after the kill), %d acknowledged reads, %d unknown writes, %d failed reads",
		after, after-before, r.stats.ackedReads.Load(), r.stats.unknownWrites.Load(), r.stats.failedReads.Load())
	if after-before < 20 {
		t.Fatalf("n3+n4 did not keep serving: %d writes acknowledged after n2 was killed", after-before)
	}
	readAll(t, r, []string{old[2], n4.Client}, keys, "after the membership changes")
	checkHistory(t, r, "after the membership changes")
}
