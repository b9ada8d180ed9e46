package adam

import (
	"container/heap"
	"errors"
	"fmt"
)

// Strategy is one of the four execution strategies of the Eve/Adam thesis §3.2 and §4.
type Strategy string

// The four strategies.
const (
	// Naive is agree-execute: one thread, local then remote (§3.2.1, Fig 3.2).
	Naive Strategy = "naive"
	// Walls is the Eve modification: Threads threads run speculatively and
	// checkpoint at every wall and at the end of the batch (§3.2.2, Fig 3.3).
	Walls Strategy = "walls"
	// SPM is single-threaded deterministic pipelining: Threads threads, one
	// runs at a time in a fixed turn order (§3.2.3, Fig 3.4; §5.1.2).
	SPM Strategy = "spm"
	// PPM is multi-threaded pipelining: Groups groups of Threads threads, one
	// group computes at a time (§4.1, Fig 4.1; §5.2.1).
	PPM Strategy = "ppm"
)

// Strategies lists the four in the seed's order.
var Strategies = []Strategy{Naive, Walls, SPM, PPM}

// Request is one client request: Local time of local computation up to its
// nested request, then Remote time until the answer is back (Fig 3.1). The
// request is complete when the answer arrives.
type Request struct {
	Local, Remote float64
}

// Uniform returns n requests of the same local and remote cost.
func Uniform(n int, local, remote float64) []Request {
	rs := make([]Request, n)
	for i := range rs {
		rs[i] = Request{local, remote}
	}
	return rs
}

// Variant selects a scheduler: the seed's, or a deliberately wrong one that
// the tests must catch.
type Variant string

const (
	// Correct is the seed's scheduler.
	Correct Variant = ""
	// SelfClear lets a PPM thread clear its own yield bit when its nested
	// answer returns (the rule §5.2.1 rejects): a thread with nothing left
	// to run then keeps its group on the pipeline and the machine idles.
	SelfClear Variant = "selfclear"
	// Eager lets a PPM thread whose answer returned compute at once, without
	// waiting for its group's turn (§5.2.2: threads "ensure that it is their
	// corresponding group's turn"): two groups then compute at once.
	Eager Variant = "eager"
)

// Config is one batch run.
type Config struct {
	Strategy Strategy
	// Threads: of the walls strategy and the SPM; per group for the PPM.
	Threads int
	// Groups of the PPM (ignored by the others).
	Groups   int
	Requests []Request
	// Checkpoint cost: local CPU time during which no request computes,
	// HashFixed plus HashPerRequest for every request whose local
	// computation ran since the previous checkpoint (the state it wrote is
	// what the Merkle tree re-hashes).
	HashFixed, HashPerRequest float64
	// Verify is the verification round trip after a checkpoint: nested
	// requests leave (output commit, §5.2.3) and results are released only
	// after it. It is latency, not CPU: a PPM hands the pipeline on during it.
	Verify float64
	// SendAtYield makes a PPM thread send its nested request when it yields,
	// as §5.2.1's scenario tells it, instead of after its group's checkpoint
	// and verification (§5.2.3, §5.3). See the package doc.
	SendAtYield bool
	Variant     Variant
}

// Interval is one request's local computation.
type Interval struct {
	Group, Thread, Request int
	Start, End             float64
}

// Turn is one turn on the pipeline: the group (for the SPM: the thread) and
// the requests whose local computation ran in it, in start order.
type Turn struct {
	Group    int
	Requests []int
}

// Result of one batch.
type Result struct {
	// Makespan: from the start of the batch until its results are released.
	Makespan float64
	// Checkpoints taken (walls and end of batch).
	Checkpoints int
	Compute     []Interval
	Turns       []Turn
	// Stalled is set when the run could not finish: nothing left to happen
	// while requests were incomplete. StallAt is when the last event was.
	Stalled bool
	StallAt float64
}

// ErrStalled is returned (wrapped) for a run that cannot finish.
var ErrStalled = errors.New("stalled")

// Throughput is requests per unit of time of the batch.
func (r Result) Throughput(n int) float64 { return float64(n) / r.Makespan }

// Validate checks a configuration.
func (c Config) Validate() error {
	if len(c.Requests) == 0 {
		return errors.New("adam: no requests")
	}
	for i, r := range c.Requests {
		if r.Local < 0 || r.Remote < 0 {
			return fmt.Errorf("adam: request %d: negative cost", i)
		}
	}
	if c.HashFixed < 0 || c.HashPerRequest < 0 || c.Verify < 0 {
		return errors.New("adam: negative overhead")
	}
	switch c.Strategy {
	case Naive:
	case Walls, SPM:
		if c.Threads < 1 {
			return fmt.Errorf("adam: %s needs threads ≥ 1", c.Strategy)
		}
	case PPM:
		if c.Threads < 1 || c.Groups < 1 {
			return errors.New("adam: ppm needs groups ≥ 1 and threads ≥ 1")
		}
	default:
		return fmt.Errorf("adam: unknown strategy %q", c.Strategy)
	}
	return nil
}

// Run simulates one batch.
func Run(c Config) (Result, error) {
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	var r Result
	switch c.Strategy {
	case Naive:
		r = runNaive(c)
	case Walls:
		r = runWalls(c)
	case SPM:
		r = runSPM(c)
	default:
		r = runPPM(c)
	}
	if r.Stalled {
		return r, fmt.Errorf("adam: %s %w at %g with requests incomplete", c.Strategy, ErrStalled, r.StallAt)
	}
	return r, nil
}

// Speedup is the naive makespan of the same requests over c's.
func Speedup(c Config) (float64, error) {
	r, err := Run(c)
	if err != nil {
		return 0, err
	}
	n := c
	n.Strategy = Naive
	base, err := Run(n)
	if err != nil {
		return 0, err
	}
	return base.Makespan / r.Makespan, nil
}

// checkpointCost is the CPU time of one checkpoint covering n requests.
func (c Config) checkpointCost(n int) float64 {
	return c.HashFixed + c.HashPerRequest*float64(n)
}

// thread is one execution thread and the requests assigned to it.
type thread struct {
	group, id int
	reqs      []int // assigned request indices, in order
	next      int   // index into reqs of the next request to start
	pending   bool  // a nested answer is outstanding
	waiting   int   // request whose nested request waits for the wall (-1: none)
	bit       bool  // PPM yield bit: "ready to yield"
	computing bool
}

func (t *thread) hasWork() bool { return t.next < len(t.reqs) }

// roundRobin assigns request i to slot i mod slots (§5.1.2; for the PPM the
// slots are group-major, §5.2.1: group g thread j is slot g·k + j).
func roundRobin(n, slots int) [][]int {
	out := make([][]int, slots)
	for i := 0; i < n; i++ {
		out[i%slots] = append(out[i%slots], i)
	}
	return out
}

// event kinds.
const (
	evLocalDone = iota // a thread finished a request's local computation
	evAnswer           // a nested answer arrived
	evTimer            // a strategy's own timer (checkpoint done, calls leave)
)

type event struct {
	at     float64
	seq    int
	kind   int
	thread int
	fn     func()
}

type queue []event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// sim is the discrete-event core the strategies share: virtual time, an
// event queue ordered by time then by scheduling order, and the trace.
type sim struct {
	cfg     Config
	now     float64
	seq     int
	q       queue
	res     Result
	threads []*thread
	done    int // requests complete (answer back)
}

func newSim(c Config, slots int) *sim {
	s := &sim{cfg: c}
	for i, reqs := range roundRobin(len(c.Requests), slots) {
		s.threads = append(s.threads, &thread{id: i, reqs: reqs, waiting: -1})
	}
	return s
}

func (s *sim) at(d float64, kind, thread int, fn func()) {
	heap.Push(&s.q, event{at: s.now + d, seq: s.seq, kind: kind, thread: thread, fn: fn})
	s.seq++
}

// compute starts thread t's next request's local computation; done runs at
// its end.
func (s *sim) compute(t *thread, done func()) {
	ri := t.reqs[t.next]
	t.next++
	l := s.cfg.Requests[ri].Local
	s.res.Compute = append(s.res.Compute, Interval{Group: t.group, Thread: t.id, Request: ri, Start: s.now, End: s.now + l})
	if n := len(s.res.Turns); n > 0 {
		s.res.Turns[n-1].Requests = append(s.res.Turns[n-1].Requests, ri)
	}
	t.computing = true
	s.at(l, evLocalDone, t.id, func() {
		t.computing = false
		done()
	})
}

// call sends request ri's nested request for thread t after delay d; answer
// runs when it is back.
func (s *sim) call(t *thread, ri int, d float64, answer func()) {
	t.pending = true
	s.at(d+s.cfg.Requests[ri].Remote, evAnswer, t.id, func() {
		t.pending = false
		s.done++
		answer()
	})
}

// current is the request thread t most recently started.
func (t *thread) current() int { return t.reqs[t.next-1] }

func (s *sim) turn(g int) { s.res.Turns = append(s.res.Turns, Turn{Group: g}) }

// loop runs events until none is left; finish is called once every request
// is complete and must return the release time.
func (s *sim) loop(finish func() float64) Result {
	for s.q.Len() > 0 {
		e := heap.Pop(&s.q).(event)
		s.now = e.at
		e.fn()
	}
	if s.done < len(s.cfg.Requests) {
		s.res.Stalled, s.res.StallAt = true, s.now
		return s.res
	}
	s.res.Makespan = finish()
	return s.res
}
