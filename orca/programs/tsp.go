package programs

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"time"

	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/service"
)

// TSP is a travelling-salesman instance: a symmetric distance matrix.
type TSP struct{ D [][]int64 }

// NewTSP makes n cities at seeded random points of a 1000×1000 square,
// distances rounded Euclidean.
func NewTSP(n int, seed int64) TSP {
	r := rand.New(rand.NewSource(seed))
	x, y := make([]float64, n), make([]float64, n)
	for i := range x {
		x[i], y[i] = r.Float64()*1000, r.Float64()*1000
	}
	d := make([][]int64, n)
	for i := range d {
		d[i] = make([]int64, n)
		for j := range d[i] {
			d[i][j] = int64(math.Round(math.Hypot(x[i]-x[j], y[i]-y[j])))
		}
	}
	return TSP{D: d}
}

// noBound is the bound before any full route is known.
const noBound = int64(1) << 40

// Jobs are the master's partial routes: city 0 then two more cities
// (the Orca paper §5.3: "the master generates initial routes containing 2
// cities. So, the master generates 11·10 = 110 jobs" for 12 cities).
func (t TSP) Jobs() [][]int {
	n := len(t.D)
	var jobs [][]int
	for a := 1; a < n; a++ {
		for b := 1; b < n; b++ {
			if a != b {
				jobs = append(jobs, []int{0, a, b})
			}
		}
	}
	return jobs
}

// search is branch and bound below one job: it calls bound() for the
// current best length (a read of the shared bound every readEvery
// expansions, or a local variable), better(l) when it completes a shorter
// route, and tick(k) after every k expansions (the computation's time).
type search struct {
	t         TSP
	best      int64
	expanded  int64
	charged   int64 // expansions whose time tick has been given
	readEvery int64
	bound     func() int64
	better    func(int64)
	tick      func(int64)
}

func (s *search) run(route []int) {
	n := len(s.t.D)
	visited := make([]bool, n)
	var length int64
	for i, c := range route {
		visited[c] = true
		if i > 0 {
			length += s.t.D[route[i-1]][c]
		}
	}
	s.dfs(route, visited, length)
}

func (s *search) dfs(route []int, visited []bool, length int64) {
	s.expanded++
	if s.readEvery > 0 && s.expanded-s.charged >= s.readEvery {
		s.flush()
		if b := s.bound(); b < s.best {
			s.best = b
		}
	}
	if length >= s.best {
		return
	}
	n, last := len(s.t.D), route[len(route)-1]
	if len(route) == n {
		if total := length + s.t.D[last][0]; total < s.best {
			s.best = total
			s.better(total)
		}
		return
	}
	for c := 0; c < n; c++ {
		if !visited[c] {
			visited[c] = true
			s.dfs(append(route, c), visited, length+s.t.D[last][c])
			visited[c] = false
		}
	}
}

// flush gives the time of the expansions not yet charged.
func (s *search) flush() {
	if s.tick != nil && s.expanded > s.charged {
		s.tick(s.expanded - s.charged)
	}
	s.charged = s.expanded
}

// SolveTSP is the sequential reference: the same branch and bound over
// the same jobs in order with one bound. It returns the shortest tour's
// length and the partial routes expanded.
func SolveTSP(t TSP) (best, expanded int64) {
	s := &search{t: t, best: noBound, better: func(int64) {}}
	for _, j := range t.Jobs() {
		s.run(j)
	}
	return s.best, s.expanded
}

// TSPConfig shapes a parallel run.
type TSPConfig struct {
	// NodeCost is the processor time of one expansion (virtual time).
	NodeCost time.Duration
	// ReadEvery is how many expansions a worker makes between reads of
	// the shared bound (the paper's program reads it at every one, "a
	// million times" for 12 cities; reading it every few hundred keeps the
	// simulation small and changes only how soon a better bound is seen).
	ReadEvery int64
}

// DefaultTSPConfig: 20 µs per expansion (an MC68030-class processor),
// the bound read every 200 expansions.
var DefaultTSPConfig = TSPConfig{NodeCost: 20 * time.Microsecond, ReadEvery: 200}

// Result is one parallel run's outcome.
type Result struct {
	Answer   int64         // the tour length (TSP) or a checksum (ASP)
	Elapsed  time.Duration // virtual time from start to the master's end
	Work     int64         // expansions (TSP) or cell updates (ASP), all workers
	Stats    Stats
	Writes   int // write operations on shared objects the program made
	BoundSet int // TSP: times a worker lowered the shared bound
}

func encodeRoute(r []int) []byte {
	b := make([]byte, 0, 2*len(r))
	for _, c := range r {
		b = binary.AppendUvarint(b, uint64(c))
	}
	return b
}

func decodeRoute(b []byte) []int {
	var r []int
	for len(b) > 0 {
		v, k := binary.Uvarint(b)
		if k <= 0 {
			return nil
		}
		r = append(r, int(v))
		b = b[k:]
	}
	return r
}

// RunTSP runs the master/worker branch and bound of the Orca paper §5.3 on w:
// a master on node 0 creates the bound (an int object, replicated and
// read often) and the job queue (written by every operation), adds every
// job and closes the queue; one worker per node takes jobs with the
// guarded get until the queue is closed and empty, and lowers the bound
// when it finds a shorter route; the master waits for every worker through
// a counter object and reads the bound.
func RunTSP(w *World, t TSP, cfg TSPConfig) (Result, error) {
	var res Result
	workers := w.Nodes()
	w.Spawn(0, "master", func(p *Proc) {
		var writes int
		res.Answer, writes = tspMaster(p, t, workers, func() {
			for i := 0; i < workers; i++ {
				// processes run one at a time: no lock around res
				w.Spawn(i, fmt.Sprintf("worker%d", i), func(p *Proc) { tspWorker(p, t, cfg).addTo(&res) })
			}
		})
		res.Writes += writes
		res.Elapsed = p.Now()
	})
	if err := w.Run(24 * time.Hour); err != nil {
		return res, err
	}
	res.Stats = w.Stats
	return res, nil
}

// Process is what a program's process does: operations on the shared
// objects through its node, and its own computation. A simulated Proc
// (virtual time) and a LiveProc (a client of a real node) are both.
type Process interface {
	Must(op service.Op) service.Result
	Compute(d time.Duration)
}

// tspCounts is what one worker did.
type tspCounts struct {
	work            int64
	writes, lowered int
}

func (c tspCounts) addTo(res *Result) {
	res.Work += c.work
	res.Writes += c.writes
	res.BoundSet += c.lowered
}

func tspWorker(p Process, t TSP, cfg TSPConfig) tspCounts {
	var n tspCounts
	readBound := func() int64 { return p.Must(orca.Call("int", "tsp.bound", "value")).Int }
	s := &search{t: t, readEvery: cfg.ReadEvery, bound: readBound,
		better: func(l int64) {
			n.lowered++
			n.writes++
			p.Must(orca.Call("int", "tsp.bound", "lower", orca.Int(l)))
		},
		tick: func(k int64) { p.Compute(time.Duration(k) * cfg.NodeCost) }}
	for {
		j := p.Must(orca.Call("queue", "tsp.jobs", "get"))
		n.writes++
		if j.Type == service.ResultNil {
			break
		}
		s.best = readBound()
		s.run(decodeRoute(j.Bytes))
		s.flush()
	}
	n.work = s.expanded
	p.Must(orca.Call("int", "tsp.done", "inc", orca.Int(1)))
	n.writes++
	return n
}

// tspMaster is the master's part: create the objects, start the workers
// (start), fill and close the queue, wait for every worker, read the bound.
func tspMaster(p Process, t TSP, workers int, start func()) (answer int64, writes int) {
	p.Must(orca.New("int", "tsp.bound", orca.Int(noBound)))
	p.Must(orca.New("queue", "tsp.jobs"))
	p.Must(orca.New("int", "tsp.done"))
	writes += 3
	start()
	for _, j := range t.Jobs() {
		p.Must(orca.Call("queue", "tsp.jobs", "add", encodeRoute(j)))
		writes++
	}
	p.Must(orca.Call("queue", "tsp.jobs", "close"))
	p.Must(orca.Call("int", "tsp.done", "await", orca.Int(int64(workers))))
	answer = p.Must(orca.Call("int", "tsp.bound", "value")).Int
	return answer, writes + 1
}
