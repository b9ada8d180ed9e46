package livetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synod-dev/synod/check"
	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/cluster"
)

// outage records when writes resumed after a kill: the acknowledgement time
// of the first write invoked after killedAt (0 until the kill).
type outage struct{ killedAt, resumed atomic.Int64 }

// stickyClient issues random GETs and SETs through one node only (sequential
// consistency is promised per server session) until stop; with o, it notes
// the first write invoked after the kill that is acknowledged.
func stickyClient(t *testing.T, r *recorder, id int, addr string, keys []string, writeFrac int, o *outage, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(uint64(id), 7))
	c, err := client.New([]string{addr}, client.Options{Timeout: opTimeout, PoolSize: 1})
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	ctx := context.Background()
	proc := r.newProc()
	writeLoop(stop, func(seq int) error {
		key := keys[rng.IntN(len(keys))]
		if rng.IntN(10) >= writeFrac {
			_, err := r.get(ctx, proc, c, key)
			return err
		}
		call := r.Now()
		err := r.set(ctx, proc, c, key, fmt.Sprintf("c%d-%d", id, seq))
		if err == nil && o != nil {
			if k := o.killedAt.Load(); k != 0 && call > k {
				o.resumed.CompareAndSwap(0, r.Now())
			}
		}
		return err
	})
}

// TestBlockingKillLockHolder runs a 3-node blocking cluster (fsync) under
// write load concentrated on n1, so that n1 holds the lock nearly all the
// time, and kill -9s n1. Writes through n2 and n3 must resume once the
// failure timeout / lease has passed and a view without n1 is formed; n1 is
// then restarted and recovers; acknowledged writes survive; the whole history
// is sequentially consistent.
func TestBlockingKillLockHolder(t *testing.T) {
	const nkeys = 10
	c := upCluster(t, cluster.UpOptions{Nodes: 3, Protocol: "blocking", Durability: "fsync"})
	addrs := c.ClientAddrs()
	keys := keyNames(nkeys)
	r := newRecorder(t, "blocking", "fsync")

	// Four writers on n1; one mixed client each on n2 and n3 (their write
	// acknowledgements time the outage); one reader each.
	var out outage
	stop := make(chan struct{})
	var wg sync.WaitGroup
	spawn := func(id int, addr string, writeFrac int, ack *outage) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stickyClient(t, r, id, addr, keys, writeFrac, ack, stop)
		}()
	}
	for i := 0; i < 4; i++ {
		spawn(i, addrs[0], 10, nil)
	}
	spawn(4, addrs[1], 5, &out)
	spawn(5, addrs[2], 5, &out)
	spawn(6, addrs[1], 0, nil)
	spawn(7, addrs[2], 0, nil)

	time.Sleep(1500 * time.Millisecond)
	before := r.stats.ackedWrites.Load()
	killedAt := r.Now()
	out.killedAt.Store(killedAt)
	if err := c.Kill("n1"); err != nil {
		t.Fatalf("kill n1: %v", err)
	}
	// Wait for a write through n2 or n3, invoked after the kill, to be
	// acknowledged.
	deadline := time.Now().Add(10 * time.Second)
	for out.resumed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	resumed := out.resumed.Load()
	if resumed == 0 {
		t.Fatalf("no write invoked through n2/n3 after killing n1 was acknowledged within 10s")
	}
	t.Logf("kill -9 of n1 (the writers' node, %d writes acknowledged before): the first write invoked through n2/n3 after it was acknowledged %v after the kill (heartbeat 20ms, fail_timeout 300ms, lease 500ms, fsync)",
		before, time.Duration(resumed-killedAt).Round(time.Millisecond))
	time.Sleep(1 * time.Second)
	if err := restartRetrying(t, c, "n1"); err != nil {
		t.Fatalf("restart n1: %v", err)
	}
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("load: %d acknowledged writes, %d acknowledged reads, %d unknown writes, %d failed reads",
		r.stats.ackedWrites.Load(), r.stats.ackedReads.Load(), r.stats.unknownWrites.Load(), r.stats.failedReads.Load())
	if r.stats.ackedWrites.Load() < 50 || r.stats.ackedReads.Load() < 50 {
		t.Fatalf("too little progress: %d writes, %d reads", r.stats.ackedWrites.Load(), r.stats.ackedReads.Load())
	}
	readAll(t, r, addrs, keys, "after restarting n1")

	h := r.History()
	rep, err := check.Sequential(h, check.Options{IgnoreDelCount: true, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d ops: %s", len(h.Ops), rep)
	if rep.Result != check.Ok {
		dir, _ := os.MkdirTemp("", "synod-livetest-failure-")
		path := filepath.Join(dir, "history.json")
		if err := h.Save(path); err == nil {
			t.Logf("history saved: synod check %s", path)
		}
		t.Fatalf("history is %s: %s", rep.Result, rep.Detail)
	}
}
