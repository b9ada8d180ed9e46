package node

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/storage"
)

// A group whose commits do not finish (its commit queue full, its
// committer waiting for an fsync that does not come) does not hold a pool
// worker (sched.go): with as many such groups as the pool has workers,
// another group on the node still answers. Each stuck group takes one
// batch per request (BatchLimit 1) and more requests than its commit
// queue holds. When a full commit queue made the pass wait (before
// parking), every worker waited there and the other group's write was
// never stepped. Once the commits go on, every stuck request is answered.
func TestStuckCommitDelaysNoOtherGroup(t *testing.T) {
	stuck := poolWorkers()
	var nss []config.Namespace
	// Commits in the stuck groups wait until release.
	g := &gateEngine{Memory: storage.NewMemory(), block: make(chan struct{}), only: map[string]bool{}}
	for i := range stuck {
		name := fmt.Sprintf("st%d", i)
		nss = append(nss, config.Namespace{Name: name, Protocol: "nodetest-reg", Service: "kv"})
		g.only[name] = true
	}
	nss = append(nss, config.Namespace{Name: "free", Protocol: "nodetest-reg", Service: "kv"})
	cfg, ls := mkCluster(t, 1, config.Memory, nss...)
	var once sync.Once
	release := func() { once.Do(func() { close(g.block) }) }
	n := startNode(t, cfg, "n1", ls[0], Options{Storage: g, BatchLimit: 1})
	t.Cleanup(release) // before the node's cleanup: a failed test cannot hang in Commit

	// Flood each stuck group with more batches (a set each: one record,
	// one batch per pass with BatchLimit 1) than its committer's commit
	// (up to commitQueueLen batches) and its commit queue
	// (commitQueueLen) hold.
	const perGroup = 2*commitQueueLen + 64
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := range stuck {
		for j := range perGroup {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := n.Do(ctx, fmt.Sprintf("st%d", i), req("set", fmt.Sprintf("k%d", j), "v"))
				if err != nil || r.Result.Type != service.ResultOK {
					if failed.Add(1) <= 3 {
						t.Logf("stuck request: %v %v", r.Result, err)
					}
				}
			}()
		}
	}
	// Wait until every stuck group's commit queue is full and inputs
	// wait behind it: the state in which a pass used to wait for room.
	full := func(l *nsLoop) bool { return len(l.commitQ) == cap(l.commitQ) && l.inbox.len() > 0 }
	deadline := time.Now().Add(time.Minute)
	for {
		k := 0
		for i := range stuck {
			if full(n.loop(fmt.Sprintf("st%d", i))) {
				k++
			}
		}
		if k == stuck {
			break
		}
		if time.Now().After(deadline) {
			for i := range stuck {
				l := n.loop(fmt.Sprintf("st%d", i))
				t.Logf("group %d: commit queue %d of %d, inbox %d, %d requests, park %d", i, len(l.commitQ), cap(l.commitQ), l.inbox.len(), l.requests.Load(), l.park.Load())
			}
			t.Fatalf("the stuck groups' commit queues did not fill within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The free group answers while the others stay stuck.
	octx, ocancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer ocancel()
	t0 := time.Now()
	r, err := n.Do(octx, "free", req("set", "k", "x"))
	if err != nil || r.Result.Type != service.ResultOK {
		t.Fatalf("write to the free group while %d groups' commits are stuck (%d pool workers): %v %v", stuck, poolWorkers(), r.Result, err)
	}
	t.Logf("the free group answered in %v while %d groups were stuck", time.Since(t0), stuck)
	for i := range stuck {
		if l := n.loop(fmt.Sprintf("st%d", i)); l.responses.Load() != 0 {
			t.Fatalf("group %d answered %d requests before its commits finished", i, l.responses.Load())
		}
	}
	// The commits go on: every stuck request is answered, and every
	// value is there.
	release()
	wg.Wait()
	if f := failed.Load(); f != 0 {
		t.Fatalf("%d stuck requests failed after the commits resumed", f)
	}
	for i := range stuck {
		for j := range perGroup {
			if v := do(t, n, fmt.Sprintf("st%d", i), req("get", fmt.Sprintf("k%d", j))); string(v.Bytes) != "v" {
				t.Fatalf("st%d k%d = %v after resume", i, j, v)
			}
		}
	}
}
