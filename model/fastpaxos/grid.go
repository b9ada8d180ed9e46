package fastpaxos

import (
	"fmt"
	"math"
)

// Grid is the lattice the time-to-learn distributions are computed on: the
// points x_j = j·H for j = 0 … N−1 (ms).
type Grid struct {
	H float64
	N int
}

// NewGrid spans [0, xmax] with n points.
func NewGrid(xmax float64, n int) (Grid, error) {
	if !(xmax > 0) || math.IsInf(xmax, 0) || n < 2 {
		return Grid{}, fmt.Errorf("grid: xmax %v, %d points: want xmax > 0 and at least 2 points", xmax, n)
	}
	return Grid{H: xmax / float64(n-1), N: n}, nil
}

// X returns x_j.
func (g Grid) X(j int) float64 { return float64(j) * g.H }

// Xs returns every point.
func (g Grid) Xs() []float64 {
	out := make([]float64, g.N)
	for j := range out {
		out[j] = g.X(j)
	}
	return out
}

// lattice is a random variable on the grid's lattice: pmf[j] = P{X = x_j};
// 1 − Σ pmf is the overflow P{X ≥ x_N}.
type lattice []float64

// roundDown is X rounded down to the lattice (X − H < ⌊X⌋ ≤ X): the mass of
// (x_j, x_{j+1}] goes to x_j, that of (−∞, 0] to x_0.
func roundDown(d Dist, g Grid) lattice {
	p := make(lattice, g.N)
	prev := d.CDF(0)
	p[0] = prev
	for j := 0; j < g.N; j++ {
		next := d.CDF(g.X(j + 1))
		p[j] += next - prev
		prev = next
	}
	return p
}

// roundUp is X rounded up to the lattice (X ≤ ⌈X⌉ < X + H): the mass of
// (x_{j−1}, x_j] goes to x_j, that of (−∞, 0] to x_0.
func roundUp(d Dist, g Grid) lattice {
	p := make(lattice, g.N)
	prev := d.CDF(0)
	p[0] = prev
	for j := 1; j < g.N; j++ {
		next := d.CDF(g.X(j))
		p[j] = next - prev
		prev = next
	}
	return p
}

// cdf returns P{X ≤ x_j} for every j.
func (p lattice) cdf() []float64 {
	out := make([]float64, len(p))
	s := 0.0
	for j, v := range p {
		s += v
		out[j] = min(s, 1)
	}
	return out
}

// fromCDF is the lattice variable with P{X ≤ x_j} = c[j].
func fromCDF(c []float64) lattice {
	p := make(lattice, len(c))
	prev := 0.0
	for j, v := range c {
		p[j] = max(v-prev, 0)
		prev = max(prev, v)
	}
	return p
}

// Bracket is a CDF known to lie between Lo and Hi at every grid point:
// Lo[j] ≤ P{X ≤ x_j} ≤ Hi[j].
type Bracket struct {
	Lo, Hi []float64
}

// Mid is the estimate (Lo+Hi)/2 at point j; its error is at most Err(j).
func (b Bracket) Mid(j int) float64 { return (b.Lo[j] + b.Hi[j]) / 2 }

// Err is the bound on |Mid(j) − P{X ≤ x_j}|.
func (b Bracket) Err(j int) float64 { return (b.Hi[j] - b.Lo[j]) / 2 }

// MaxErr is the largest Err over the grid.
func (b Bracket) MaxErr() float64 {
	m := 0.0
	for j := range b.Lo {
		m = max(m, b.Err(j))
	}
	return m
}

// Mids returns Mid at every point.
func (b Bracket) Mids() []float64 {
	out := make([]float64, len(b.Lo))
	for j := range out {
		out[j] = b.Mid(j)
	}
	return out
}

// pair is a latency bracketed pathwise by two lattice variables:
// down ≤ X ≤ up, each no further than H·links from X.
type pair struct {
	down, up lattice
}

func link(d Dist, g Grid) pair { return pair{roundDown(d, g), roundUp(d, g)} }

func (p pair) plus(q pair) pair {
	return pair{convolve(p.down, q.down), convolve(p.up, q.up)}
}

// kth is the k-th smallest of n independent copies (order statistics are
// monotone in every argument, so the bracket carries over).
func (p pair) kth(k, n int) pair {
	return pair{fromCDF(kthCDF(p.down.cdf(), k, n)), fromCDF(kthCDF(p.up.cdf(), k, n))}
}

// bracket: the rounded-up variable is larger, so its CDF is the lower bound.
func (p pair) bracket() Bracket { return Bracket{Lo: p.up.cdf(), Hi: p.down.cdf()} }
