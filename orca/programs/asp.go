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
func SolveASP(g Graph) Graph {
	d := g.clone()
	for k := range d {
		pivot := append([]int32(nil), d[k]...)
		for i := range d {
			relax(d[i], pivot, k)
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

// RunASP runs seed 004 §5.3's parallel Floyd on w: one worker per node
// owns a block of rows; before iteration k the owner of row k puts it in
// the shared pivot-rows object (a write carrying the row, 4N bytes), and
// every worker takes it with the guarded get (a read that blocks until
// the row is there) and relaxes its rows. It returns the matrix, gathered
// from the workers, in Result.Answer's place (Answer is a checksum).
func RunASP(w *World, g Graph, cfg ASPConfig) (Result, Graph, error) {
	var res Result
	n, workers := len(g), w.Nodes()
	out := make(Graph, n)
	finished := 0
	w.Spawn(0, "master", func(p *Proc) {
		p.Must(orca.New("rows", "asp.pivots"))
		res.Writes++
		for k := 0; k < workers; k++ {
			w.Spawn(k, fmt.Sprintf("worker%d", k), func(p *Proc) {
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
						res.Writes++
					}
					pivot := decodeRow(p.Must(orca.Call("rows", "asp.pivots", "get", orca.Int(int64(it)))).Bytes)
					for _, i := range mine {
						relax(out[i], pivot, it)
					}
					res.Work += int64(len(mine) * n)
					p.Compute(time.Duration(len(mine)*n) * cfg.CellCost)
				}
				finished++
				if finished == workers {
					res.Elapsed = p.Now()
				}
			})
		}
	})
	if err := w.Run(24 * time.Hour); err != nil {
		return res, nil, err
	}
	res.Stats = w.Stats
	for _, r := range out {
		for _, v := range r {
			res.Answer = res.Answer*31 + int64(v)
		}
	}
	return res, out, nil
}

// RunASP runs ASP on n nodes under r.
func (r Runtime) RunASP(n int, g Graph, cfg ASPConfig, net Net, seed int64) (Result, Graph, error) {
	w, err := r.World(n, net, seed)
	if err != nil {
		return Result{}, nil, err
	}
	return RunASP(w, g, cfg)
}
