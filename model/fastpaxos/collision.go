package fastpaxos

import (
	"fmt"
	"math"
)

// Interval is a probability known to lie in [Lo, Hi].
type Interval struct{ Lo, Hi float64 }

// Mid is the estimate; Err bounds its error.
func (i Interval) Mid() float64 { return (i.Lo + i.Hi) / 2 }
func (i Interval) Err() float64 { return (i.Hi - i.Lo) / 2 }

// DefaultPanels is the number of panels of the quantile integral in
// FirstProb: its error is at most 1/DefaultPanels (≈3·10⁻⁵).
const DefaultPanels = 1 << 15

// FirstProb is the probability that client i's request reaches a given
// acceptor before every other client's, when client j sends at offsets[j] and
// each client-to-acceptor latency is an independent draw from w:
//
//	p_i = P{o_i + W_i < min_{j≠i} o_j + W_j} = ∫₀¹ Π_{j≠i} (1 − F(Q(u) + o_i − o_j)) du
//
// with F the CDF and Q the quantile function of w (ties have probability 0:
// every Dist here is continuous). The integrand is non-increasing in u, so the
// left and right Riemann sums over `panels` equal panels bracket the integral
// and differ by at most 1/panels.
func FirstProb(w Dist, offsets []float64, i, panels int) Interval {
	if panels < 1 {
		panels = DefaultPanels
	}
	g := func(u float64) float64 {
		x := w.Quantile(u)
		v := 1.0
		for j, o := range offsets {
			if j == i {
				continue
			}
			if math.IsInf(x, 1) {
				return 0
			}
			v *= 1 - w.CDF(x+offsets[i]-o)
		}
		return v
	}
	var inner float64
	for k := 1; k < panels; k++ {
		inner += g(float64(k) / float64(panels))
	}
	m := float64(panels)
	return Interval{Lo: (inner + g(1)) / m, Hi: (inner + g(0)) / m}
}

// Collision is the probability of a collision in the chapter V.B sense: the
// clients' requests are sent at the given offsets (ms) to all n = 3t+1
// acceptors over links with latency w; each acceptor votes for the request it
// receives first; "the requests conflict if none of them can obtain a quorum
// of acceptors", a fast quorum being 2t+1. Votes at distinct acceptors are
// independent, so request i's count is Binomial(n, p_i); two requests cannot
// both reach 2t+1 of 3t+1 votes, so
//
//	P{collision} = 1 − Σ_i P{Binomial(3t+1, p_i) ≥ 2t+1}.
//
// Exact given the p_i; the bracket comes from FirstProb's.
func Collision(w Dist, t int, offsets []float64, panels int) (Interval, error) {
	if t < 1 || t > 20 {
		return Interval{}, fmt.Errorf("collision: t = %d, want 1 ≤ t ≤ 20", t)
	}
	if len(offsets) < 2 {
		return Interval{}, fmt.Errorf("collision: %d clients, want at least 2", len(offsets))
	}
	q := TableV1(t)
	lo, hi := 1.0, 1.0
	for i := range offsets {
		p := FirstProb(w, offsets, i, panels)
		hi -= AtLeast(q.FastQ, q.FastN, p.Lo)
		lo -= AtLeast(q.FastQ, q.FastN, p.Hi)
	}
	return Interval{Lo: min(max(lo, 0), 1), Hi: min(max(hi, 0), 1)}, nil
}

// Staggered returns the offsets of c clients sending δ apart: 0, δ, 2δ, …
// (two clients: the seed's r and r + δ).
func Staggered(c int, delta float64) []float64 {
	out := make([]float64, c)
	for i := range out {
		out[i] = float64(i) * delta
	}
	return out
}

// SimultaneousCollision is the δ = 0 value with c clients and i.i.d.
// continuous latencies: each acceptor's first request is uniform over the c
// clients, so P = 1 − c·P{Binomial(3t+1, 1/c) ≥ 2t+1}, whatever the latency
// distribution. For c = 2: Σ_{k=t+1}^{2t} C(3t+1,k)/2^{3t+1}, 0.375 at t = 1
// and 0.65625 at t = 3 (the seed's "approximately 0.38" and "0.65").
func SimultaneousCollision(t, c int) float64 {
	q := TableV1(t)
	return 1 - float64(c)*AtLeast(q.FastQ, q.FastN, 1/float64(c))
}
