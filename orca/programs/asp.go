package programs

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"time"

	"github.com/synod-dev/synod/orca"
)

// Inf is ASP's "no path" distance.
const Inf = int32(1) << 29

// Graph is a distance matrix for all-pairs shortest paths.
type Graph [][]int32

// NewGraph makes n vertices with a seeded random edge (weight 1..100) on
// each ordered pair with probability one half.
func NewGraph(n int, seed int64) Graph {
	r := rand.New(rand.NewSource(seed))
	g := make(Graph, n)
	for i := range g {
		g[i] = make([]int32, n)
		for j := range g[i] {
			switch {
			case i == j:
			case r.Intn(2) == 0:
				g[i][j] = int32(1 + r.Intn(100))
			default:
				g[i][j] = Inf
			}
		}
	}
	return g
}

func (g Graph) clone() Graph {
	c := make(Graph, len(g))
	for i := range g {
		c[i] = append([]int32(nil), g[i]...)
	}
	return c
}

// relax is one row's step of iteration k: d[i][j] = min(d[i][j], d[i][k]+pivot[j]).
func relax(row, pivot []int32, k int) {
	dik := row[k]
	if dik >= Inf {
		return
	}
	for j, pk := range pivot {
		if v := dik + pk; v < row[j] {
			row[j] = v
		}
	}
}

// Equal reports whether two matrices hold the same distances.
func (g Graph) Equal(o Graph) bool {
	if len(g) != len(o) {
		return false
	}
	for i := range g {
		if len(g[i]) != len(o[i]) {
			return false
		}
		for j := range g[i] {
			if g[i][j] != o[i][j] {
				return false
			}
		}
	}
	return true
}

// SolveASP is the sequential reference: Floyd-Warshall.
func SolveASP(g Graph) Graph { return solveASP(g, nil) }

// solveASP is Floyd-Warshall calling tick(cells) after each iteration's
// cell updates (the computation's time), when tick is not nil.
func solveASP(g Graph, tick func(cells int)) Graph {
	d := g.clone()
	for k := range d {
		pivot := append([]int32(nil), d[k]...)
		for i := range d {
			relax(d[i], pivot, k)
		}
		if tick != nil {
			tick(len(d) * len(d))
		}
	}
	return d
}

func encodeRow(r []int32) []byte {
	b := make([]byte, 4*len(r))
	for i, v := range r {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return b
}

func decodeRow(b []byte) []int32 {
	r := make([]int32, len(b)/4)
	for i := range r {
		r[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return r
}

// ASPConfig shapes a parallel run.
type ASPConfig struct {
	// CellCost is the processor time of one d[i][j] update (virtual time).
	CellCost time.Duration
}

// DefaultASPConfig: 5 µs per cell (an MC68030-class processor; N=256 on
// one processor then takes 256³·5 µs ≈ 84 s, the paper's "on the order of
// 90 seconds").
var DefaultASPConfig = ASPConfig{CellCost: 5 * time.Microsecond}

// owner is the worker holding row i when n rows are split in blocks over p.
func owner(i, n, p int) int { return i * p / n }

// RunASP runs the Orca paper §5.3's parallel Floyd on w: one worker per node
// owns a block of rows (aspWorker); the master creates the shared
// pivot-rows object (aspMaster). It returns the matrix, gathered from the
// workers, and in Result.Answer a checksum of it.
func RunASP(w *World, g Graph, cfg ASPConfig) (Result, Graph, error) {
	var res Result
	workers := w.Nodes()
	out := make(Graph, len(g))
	finished := 0
	w.Spawn(0, "master", func(p *Proc) {
		res.Writes += aspMaster(p, func() {
			for k := 0; k < workers; k++ {
				// processes run one at a time: no lock around res
				w.Spawn(k, fmt.Sprintf("worker%d", k), func(p *Proc) {
					cells, writes := aspWorker(p, g, k, workers, out, cfg)
					res.Work += cells
					res.Writes += writes
					finished++
					if finished == workers {
						res.Elapsed = p.Now()
					}
				})
			}
		})
	})
	if err := w.Run(24 * time.Hour); err != nil {
		return res, nil, err
	}
	res.Stats = w.Stats
	res.Answer = out.checksum()
	return res, out, nil
}

func (g Graph) checksum() int64 {
	var c int64
	for _, r := range g {
		for _, v := range r {
			c = c*31 + int64(v)
		}
	}
	return c
}

// aspMaster creates the shared pivot-rows object and starts the workers
// (start). It returns the writes it made.
func aspMaster(p Process, start func()) (writes int) {
	p.Must(orca.New("rows", "asp.pivots"))
	start()
	return 1
}

// aspWorker is worker k of workers (the Orca paper §5.3): it owns the block of
// rows owner gives it, copied from g into out; before iteration it the
// owner of row it puts it in the pivot-rows object (a write carrying the
// row, 4N bytes), and every worker takes it with the guarded get (a read
// that blocks until the row is there) and relaxes its rows. It writes
// only its own rows of out, and returns the cell updates and writes it
// made.
func aspWorker(p Process, g Graph, k, workers int, out Graph, cfg ASPConfig) (cells int64, writes int) {
	n := len(g)
	var mine []int
	for i := 0; i < n; i++ {
		if owner(i, n, workers) == k {
			mine = append(mine, i)
			out[i] = append([]int32(nil), g[i]...)
		}
	}
	for it := 0; it < n; it++ {
		if owner(it, n, workers) == k {
			p.Must(orca.Call("rows", "asp.pivots", "put", orca.Int(int64(it)), encodeRow(out[it])))
			writes++
		}
		pivot := decodeRow(p.Must(orca.Call("rows", "asp.pivots", "get", orca.Int(int64(it)))).Bytes)
		for _, i := range mine {
			relax(out[i], pivot, it)
		}
		cells += int64(len(mine) * n)
		p.Compute(time.Duration(len(mine)*n) * cfg.CellCost)
	}
	return cells, writes
}

// RunASP runs ASP on n nodes under r.
func (r Runtime) RunASP(n int, g Graph, cfg ASPConfig, net Net, seed int64) (Result, Graph, error) {
	w, err := r.World(n, net, seed)
	if err != nil {
		return Result{}, nil, err
	}
	return RunASP(w, g, cfg)
}
