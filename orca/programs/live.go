package programs

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/synod-dev/synod/automaton/cpuwork"
	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/service"
)

// Live runs: the same programs against a real cluster (synod-lab orca run
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

// Must applies op at the process's node; an error panics (RunTSPLive and
// RunASPLive report it).
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

// spin burns d of processor time: it counts the calling thread's CPU
// time, not the wall clock, so workers that share a core each take
// longer, as the paper's processes would on fewer processors than
// processes (a wall-clock busy loop would end on time while descheduled,
// and hide the machine's core count from the speedup). The goroutine is
// locked to its thread for the loop. Where the thread's CPU clock cannot
// be read, it falls back to the wall clock.
func spin(d time.Duration) {
	if d <= 0 {
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if t0, ok := cpuwork.ThreadCPU(); ok {
		for t, _ := cpuwork.ThreadCPU(); t-t0 < d; t, _ = cpuwork.ThreadCPU() {
		}
		return
	}
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

// liveGroup is the processes of one live run: process i a client of
// addrs[max(i-1, 0)] (process 0 the master, process i+1 the worker of
// node i). A process that fails (a panic of Must) cancels the others.
type liveGroup struct {
	procs  []*counting
	cancel context.CancelFunc
	mu     sync.Mutex // guards errs and what the processes add to a result
	errs   []error
	wg     sync.WaitGroup
}

func newLiveGroup(ctx context.Context, addrs []string) (*liveGroup, error) {
	ctx, cancel := context.WithCancel(ctx)
	g := &liveGroup{cancel: cancel}
	for i := 0; i <= len(addrs); i++ {
		lp, err := NewLiveProc(ctx, addrs[max(i-1, 0)])
		if err != nil {
			g.close()
			return nil, err
		}
		g.procs = append(g.procs, &counting{Process: lp})
	}
	return g, nil
}

// fail, deferred by a process, records its panic and stops the others.
func (g *liveGroup) fail(who string) {
	if x := recover(); x != nil {
		g.mu.Lock()
		g.errs = append(g.errs, fmt.Errorf("%s: %v", who, x))
		g.mu.Unlock()
		g.cancel()
	}
}

// goWorker starts worker i (process i+1) running f.
func (g *liveGroup) goWorker(i int, f func(p Process)) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer g.fail(fmt.Sprintf("worker%d", i))
		f(g.procs[i+1])
	}()
}

// wait waits for the workers, counts the requests into res, and returns
// the first failure.
func (g *liveGroup) wait(res *LiveResult) error {
	g.wg.Wait()
	for _, p := range g.procs {
		res.Requests += p.n
	}
	if len(g.errs) > 0 {
		return g.errs[0]
	}
	return nil
}

func (g *liveGroup) close() {
	for _, p := range g.procs {
		p.Process.(*LiveProc).Close()
	}
	g.cancel()
}

// RunTSPLive runs TSP's master and one worker per node (worker i a client
// of addrs[i], the master of addrs[0]) against a live cluster whose
// default namespace serves the orca service, on a fresh cluster (the
// objects' names are fixed).
func RunTSPLive(ctx context.Context, addrs []string, t TSP, cfg TSPConfig) (LiveResult, error) {
	res := LiveResult{CPUs: runtime.NumCPU()}
	g, err := newLiveGroup(ctx, addrs)
	if err != nil {
		return res, err
	}
	defer g.close()
	start := time.Now()
	func() {
		defer g.fail("master")
		answer, writes := tspMaster(g.procs[0], t, len(addrs), func() {
			for i := range addrs {
				g.goWorker(i, func(p Process) {
					c := tspWorker(p, t, cfg)
					g.mu.Lock()
					res.Work += c.work
					res.Writes += c.writes
					res.BoundSet += c.lowered
					g.mu.Unlock()
				})
			}
		})
		g.mu.Lock()
		res.Answer = answer
		res.Writes += writes
		g.mu.Unlock()
	}()
	res.Elapsed = time.Since(start)
	return res, g.wait(&res)
}

// RunASPLive runs ASP's master and one worker per node (worker i a client
// of addrs[i], the master of addrs[0]) against a live cluster whose
// default namespace serves the orca service, on a fresh cluster (the
// pivot-rows object's name is fixed). It returns the matrix gathered from
// the workers (Answer is its checksum); Elapsed runs from the master's
// start to the last worker's end.
func RunASPLive(ctx context.Context, addrs []string, gr Graph, cfg ASPConfig) (LiveResult, Graph, error) {
	res := LiveResult{CPUs: runtime.NumCPU()}
	g, err := newLiveGroup(ctx, addrs)
	if err != nil {
		return res, nil, err
	}
	defer g.close()
	out := make(Graph, len(gr)) // each worker writes only its own rows
	start := time.Now()
	func() {
		defer g.fail("master")
		writes := aspMaster(g.procs[0], func() {
			for i := range addrs {
				g.goWorker(i, func(p Process) {
					cells, writes := aspWorker(p, gr, i, len(addrs), out, cfg)
					g.mu.Lock()
					res.Work += cells
					res.Writes += writes
					g.mu.Unlock()
				})
			}
		})
		g.mu.Lock()
		res.Writes += writes
		g.mu.Unlock()
	}()
	err = g.wait(&res)
	res.Elapsed = time.Since(start)
	if err != nil {
		return res, nil, err
	}
	res.Answer = out.checksum()
	return res, out, nil
}

// SequentialASPLive is Floyd-Warshall with the same processor cost per
// cell update, timed on this machine: the baseline of a live speedup.
func SequentialASPLive(g Graph, cfg ASPConfig) (Graph, time.Duration) {
	start := time.Now()
	d := solveASP(g, func(cells int) { spin(time.Duration(cells) * cfg.CellCost) })
	return d, time.Since(start)
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
