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
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

const (
	ns        = "default"
	opTimeout = 2 * time.Second
)

// loadStats counts what the clients saw.
type loadStats struct {
	ackedWrites, ackedReads, unknownWrites, failedReads atomic.Int64
}

// keyLog remembers which keys had a write acknowledged.
type keyLog struct {
	mu    sync.Mutex
	acked map[string]bool
}

func (k *keyLog) ack(key string) {
	k.mu.Lock()
	k.acked[key] = true
	k.mu.Unlock()
}

func (k *keyLog) has(key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.acked[key]
}

// recorder wraps history.Recorder with the RESP calls the test makes.
type recorder struct {
	*history.Recorder
	procs atomic.Int64 // next fresh process id
	keys  *keyLog
	stats *loadStats
}

func (r *recorder) newProc() int { return int(r.procs.Add(1)) }

// kv is what the recorder drives: a node-coordinated client (client.Client)
// or a client-driven ABD client (client.ABD, which runs both phases itself).
type kv interface {
	Set(ctx context.Context, key string, value []byte) error
	Get(ctx context.Context, key string) (value []byte, found bool, err error)
}

// set runs SET key val and records it. Any error (a broken connection, a
// timeout, an error reply, a failed phase) makes the write's outcome
// unknown: it may have reached replicas.
func (r *recorder) set(ctx context.Context, proc int, c kv, key, val string) error {
	p := r.Invoke(proc, ns, service.Op{Kind: "set", Key: key, Args: [][]byte{[]byte(val)}}, "")
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := c.Set(ctx, key, []byte(val)); err != nil {
		p.Unknown()
		r.stats.unknownWrites.Add(1)
		return err
	}
	p.Complete(service.OK())
	r.stats.ackedWrites.Add(1)
	r.keys.ack(key)
	return nil
}

// get runs GET key and records it. A read that got no value is Failed: it had
// no effect, and its outcome is known (a client-driven read's write-back
// stores only a tag some writer already stored).
func (r *recorder) get(ctx context.Context, proc int, c kv, key string) (service.Result, error) {
	p := r.Invoke(proc, ns, service.Op{Kind: "get", Key: key}, "")
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	v, found, err := c.Get(ctx, key)
	if err != nil {
		p.Fail(service.Result{})
		r.stats.failedReads.Add(1)
		return service.Result{}, err
	}
	res := service.Nil()
	if found {
		res = service.Bytes(append([]byte{}, v...))
	}
	p.Complete(res)
	r.stats.ackedReads.Add(1)
	return res, nil
}

// runClient issues random GETs and SETs with unique values until stop. The
// client fails over between nodes by itself, starting at node id mod N. After
// a write of unknown outcome it continues as a fresh process, so that every
// process stays sequential.
func runClient(t *testing.T, r *recorder, id int, addrs []string, keys []string, stop <-chan struct{}) {
	runClientOn(t, r, id, addrs, func(rng *rand.Rand) string { return keys[rng.IntN(len(keys))] }, stop)
}

// runClientOn is runClient with the key of each operation drawn by pick.
func runClientOn(t *testing.T, r *recorder, id int, addrs []string, pick func(*rand.Rand) string, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(uint64(id), 42))
	rot := append(append([]string{}, addrs[id%len(addrs):]...), addrs[:id%len(addrs)]...)
	c, err := client.New(rot, client.Options{Timeout: opTimeout, PoolSize: 1})
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	proc := r.newProc()
	writeLoop(stop, func(seq int) error {
		return r.randomOp(&proc, c, rng, pick(rng), fmt.Sprintf("c%d-%d", id, seq))
	})
}

// writeLoop runs step(seq) for seq = 0, 1, ... until stop is closed, and
// backs off 10 ms after a step that failed, so that a client does not spin
// while a node is down. step picks its key and handles its own errors
// (the livetests' load clients: runClientOn, runABDClient, stickyClient,
// slotWriter).
func writeLoop(stop <-chan struct{}, step func(seq int) error) {
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		if step(seq) != nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// randomOp is one operation of process *proc, recorded: SET key val or
// GET key, even odds. After a SET that failed (its outcome unknown) the
// client continues as a fresh process, so that every process stays
// sequential.
func (r *recorder) randomOp(proc *int, c kv, rng *rand.Rand, key, val string) error {
	if rng.IntN(2) == 0 {
		err := r.set(context.Background(), *proc, c, key, val)
		if err != nil {
			*proc = r.newProc()
		}
		return err
	}
	_, err := r.get(context.Background(), *proc, c, key)
	return err
}

// readAll reads every key through every node, recording the reads in the
// history, and fails the test if a key with an acknowledged write reads nil.
// A read that fails (a node still reconnecting to its peers after a restart)
// is retried, within 20 s for the whole pass; every attempt is recorded.
func readAll(t *testing.T, r *recorder, addrs, keys []string, phase string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for i, addr := range addrs {
		c, err := client.New([]string{addr}, client.Options{Timeout: opTimeout, PoolSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		proc := r.newProc()
		for _, key := range keys {
			for {
				res, err := r.get(ctx, proc, c, key)
				if err == nil {
					if res.Type == service.ResultNil && r.keys.has(key) {
						t.Errorf("%s: GET %s on n%d is nil, but a write of %s was acknowledged", phase, key, i+1, key)
					}
					break
				}
				if time.Now().After(deadline) {
					c.Close()
					t.Fatalf("%s: GET %s on n%d: no answer before the deadline (last: %v)", phase, key, i+1, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		c.Close()
	}
}

// checkHistory runs the linearizability checker on everything recorded so
// far and, on failure, saves the history and Porcupine's view.
func checkHistory(t *testing.T, r *recorder, phase string) {
	t.Helper()
	h := r.History()
	rep, err := check.Linearizable(h, check.Options{IgnoreDelCount: true, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("%s: check: %v", phase, err)
	}
	t.Logf("%s: %d ops, verdict %s (%d maybe-applied, %d dropped, %d partitions, %v)",
		phase, len(h.Ops), rep.Result, rep.MaybeApplied, rep.Dropped, rep.Partitions, rep.Elapsed)
	if rep.Result == check.Ok {
		return
	}
	dir, err := os.MkdirTemp("", "synod-livetest-failure-")
	if err == nil {
		path := filepath.Join(dir, "history.json")
		if err := h.Save(path); err != nil {
			t.Logf("saving history: %v", err)
		}
		if err := rep.WriteHTML(filepath.Join(dir, "history.html")); err != nil {
			t.Logf("writing HTML: %v", err)
		}
		t.Logf("history saved in %s (replay: synod check %s)", dir, path)
	}
	t.Fatalf("%s: history is %s, not linearizable:\n%s", phase, rep.Result, rep.Detail)
}

// TestABDKillNodeUnderLoad runs 8 clients against a 3-node ABD cluster with
// fsync durability, kill -9s one node mid-run and restarts it, then kill -9s
// and restarts all three. Acknowledged writes must survive, and the whole
// history, final reads included, must be linearizable.
func TestABDKillNodeUnderLoad(t *testing.T) {
	const (
		clients = 8
		nkeys   = 20
		runFor  = 6 * time.Second
	)
	c := upCluster(t, cluster.UpOptions{Nodes: 3, Protocol: "abd", Durability: "fsync"})
	addrs := c.ClientAddrs()
	keys := keyNames(nkeys)
	r := newRecorder(t, "abd", "fsync")

	// Mid-run: kill -9 n2, let the others carry on without it, restart it.
	loadKillingN2(t, c, r, clients, runFor, func(i int, stop chan struct{}) { runClient(t, r, i, addrs, keys, stop) })

	readAll(t, r, addrs, keys, "after restarting n2")
	checkHistory(t, r, "after restarting n2")

	// Crash the whole cluster: every acknowledged write was fsynced by a
	// majority, so it must survive.
	killAll(t, c)
	readAll(t, r, addrs, keys, "after kill -9 of all nodes")
	checkHistory(t, r, "after kill -9 of all nodes")
}

// loadKillingN2 runs clients load goroutines (run(i, stop)) for runFor;
// 1.5 s in, n2 is killed with kill -9, and restarted 1.5 s later. It fails
// the test unless both writes and reads made progress.
func loadKillingN2(t *testing.T, c *cluster.Cluster, r *recorder, clients int, runFor time.Duration, run func(i int, stop chan struct{})) {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(i, stop)
		}()
	}
	chaosErr := make(chan error, 1)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		if err := c.Kill("n2"); err != nil {
			chaosErr <- fmt.Errorf("kill n2: %w", err)
			return
		}
		time.Sleep(1500 * time.Millisecond)
		if err := restartRetrying(t, c, "n2"); err != nil {
			chaosErr <- fmt.Errorf("restart n2: %w", err)
			return
		}
		chaosErr <- nil
	}()
	time.Sleep(runFor)
	close(stop)
	wg.Wait()
	if err := <-chaosErr; err != nil {
		t.Fatal(err)
	}
	t.Logf("load: %d acknowledged writes, %d acknowledged reads, %d unknown writes, %d failed reads",
		r.stats.ackedWrites.Load(), r.stats.ackedReads.Load(), r.stats.unknownWrites.Load(), r.stats.failedReads.Load())
	if r.stats.ackedWrites.Load() < 100 || r.stats.ackedReads.Load() < 100 {
		t.Fatalf("too little progress under load: %d writes, %d reads acknowledged",
			r.stats.ackedWrites.Load(), r.stats.ackedReads.Load())
	}
}

// killAll kills every node of c with kill -9 and restarts them: every
// acknowledged write was fsynced by a majority, so it must survive.
func killAll(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	for _, id := range []string{"n1", "n2", "n3"} {
		if err := c.Kill(id); err != nil {
			t.Fatalf("kill %s: %v", id, err)
		}
	}
	for _, id := range []string{"n1", "n2", "n3"} {
		if err := restartRetrying(t, c, id); err != nil {
			t.Fatalf("restart %s: %v", id, err)
		}
	}
}
