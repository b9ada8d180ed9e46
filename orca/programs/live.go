package programs

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/service"
)

// Live runs: the same programs against a real cluster (synod orca run
// --live), each process a client of one node (its own connection, so the
// node is the process's processor in Figure 1's sense and the runtime's
// sequential consistency, promised to a client that stays on its node,
// holds). Time is the machine's clock; a process's Compute burns the
// processor for the time the cost model gives an expansion (a busy loop,
// not a sleep: the workers really compete for the machine's cores, which is
// what bounds the speedup on a small machine).

// LiveProc is a process of a program on a live cluster.
type LiveProc struct {
	c   *client.GRPC
	ctx context.Context
}

// NewLiveProc connects a process to the node at addr. Guarded operations
// block at the node (a job queue's get, the master's await), so the
// client's timeout is long.
func NewLiveProc(ctx context.Context, addr string) (*LiveProc, error) {
	c, err := client.NewGRPC([]string{addr}, client.Options{Timeout: time.Hour})
	if err != nil {
		return nil, err
	}
	return &LiveProc{c: c, ctx: ctx}, nil
}

// Close closes the process's connection.
func (p *LiveProc) Close() error { return p.c.Close() }

// Must applies op at the process's node; an error panics (RunTSPLive
// reports it).
//
// A node answers a request it could not complete in its request timeout
// (10 s) with an unknown outcome; a guarded read still blocked then (the
// master's await of every worker) is asked again, which a read allows. A
// write whose outcome is unknown fails the run.
func (p *LiveProc) Must(op service.Op) service.Result {
	r, _, err := p.c.DoOp(p.ctx, "", op, client.OpOptions{})
	for err != nil && p.ctx.Err() == nil && objects.IsRead(op) {
		r, _, err = p.c.DoOp(p.ctx, "", op, client.OpOptions{})
	}
	if err != nil {
		panic(fmt.Sprintf("%v: %v", op, err))
	}
	if r.IsErr() {
		panic(fmt.Sprintf("%v: %s", op, r.Err))
	}
	return r
}

// Compute keeps the processor busy for d.
func (p *LiveProc) Compute(d time.Duration) { spin(d) }

func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

var objects = &orca.Service{Types: orca.Builtin}

// LiveResult is one live run.
type LiveResult struct {
	Answer   int64
	Elapsed  time.Duration // wall time from the master's start to its end
	Work     int64
	Writes   int
	BoundSet int
	Requests int // operations the processes made
	CPUs     int // runtime.NumCPU of the machine
}

// counting wraps a process to count its operations.
type counting struct {
	Process
	n int
}

func (c *counting) Must(op service.Op) service.Result { c.n++; return c.Process.Must(op) }

// RunTSPLive runs TSP's master and one worker per node (worker i a client
// of addrs[i], the master of addrs[0]) against a live cluster whose
// default namespace serves the orca service, on a fresh cluster (the
// objects' names are fixed).
func RunTSPLive(ctx context.Context, addrs []string, t TSP, cfg TSPConfig) (LiveResult, error) {
	res := LiveResult{CPUs: runtime.NumCPU()}
	ctx, cancel := context.WithCancel(ctx) // a failed process unblocks the others
	defer cancel()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	fail := func(who string) {
		if x := recover(); x != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("%s: %v", who, x))
			mu.Unlock()
			cancel()
		}
	}
	procs := make([]*counting, len(addrs)+1)
	for i := range procs {
		lp, err := NewLiveProc(ctx, addrs[max(i-1, 0)])
		if err != nil {
			return res, err
		}
		defer lp.Close()
		procs[i] = &counting{Process: lp}
	}
	start := time.Now()
	func() {
		defer fail("master")
		var writes int
		res.Answer, writes = tspMaster(procs[0], t, len(addrs), func() {
			for i := range addrs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer fail(fmt.Sprintf("worker%d", i))
					c := tspWorker(procs[i+1], t, cfg)
					mu.Lock()
					res.Work += c.work
					res.Writes += c.writes
					res.BoundSet += c.lowered
					mu.Unlock()
				}()
			}
		})
		mu.Lock()
		res.Writes += writes
		mu.Unlock()
	}()
	res.Elapsed = time.Since(start)
	wg.Wait()
	for _, p := range procs {
		res.Requests += p.n
	}
	if len(errs) > 0 {
		return res, errs[0]
	}
	return res, nil
}

// SequentialTSPLive is the sequential solver with the same processor cost
// per expansion, timed on this machine: the baseline of a live speedup.
func SequentialTSPLive(t TSP, cfg TSPConfig) (best int64, elapsed time.Duration) {
	start := time.Now()
	s := &search{t: t, best: noBound, better: func(int64) {}, readEvery: cfg.ReadEvery,
		bound: func() int64 { return noBound }, tick: func(k int64) { spin(time.Duration(k) * cfg.NodeCost) }}
	for _, j := range t.Jobs() {
		s.run(j)
	}
	s.flush()
	return s.best, time.Since(start)
}
