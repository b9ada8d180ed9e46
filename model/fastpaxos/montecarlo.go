package fastpaxos

import (
	"math"
	"math/rand/v2"
	"sort"
)

// Monte Carlo: the same model simulated message by message, with a fixed seed.
// It cross-checks the numerical computation (the tests) and is the method
// `synod-lab model fastpaxos --monte-carlo N` prints beside it.

func sample(d Dist, r *rand.Rand) float64 { return d.Quantile(r.Float64()) }

// kthSmallest returns the k-th smallest (1-based) of xs, reordering xs.
func kthSmallest(xs []float64, k int) float64 {
	sort.Float64s(xs)
	return xs[k-1]
}

// SampleLearn draws n values of L_c and of L_f (each sorted) by drawing every
// link latency of the two chains independently (PCG seeded with seed).
func SampleLearn(s Setting, n int, seed uint64) (lc, lf []float64, err error) {
	if err := s.check(); err != nil {
		return nil, nil, err
	}
	r := rand.New(rand.NewPCG(seed, 0x5eed002))
	q := TableV1(s.T)
	lc, lf = make([]float64, n), make([]float64, n)
	cs, fs := make([]float64, q.ClassicN), make([]float64, q.FastN)
	for i := 0; i < n; i++ {
		for a := range cs {
			cs[a] = sample(s.LAN, r) + sample(s.LAN, r)
		}
		lc[i] = sample(s.WAN, r) + kthSmallest(cs, q.ClassicQ)
		for a := range fs {
			fs[a] = sample(s.WAN, r) + sample(s.LAN, r)
		}
		lf[i] = kthSmallest(fs, q.FastQ)
	}
	sort.Float64s(lc)
	sort.Float64s(lf)
	return lc, lf, nil
}

// ECDF is the empirical CDF of sorted samples at x: the fraction ≤ x.
func ECDF(sorted []float64, x float64) float64 {
	return float64(sort.Search(len(sorted), func(i int) bool { return sorted[i] > x })) / float64(len(sorted))
}

// DKW is the Dvoretzky–Kiefer–Wolfowitz bound: with probability at least
// 1 − fail, the empirical CDF of n samples is within ε of the true CDF
// everywhere, ε = sqrt(ln(2/fail) / 2n).
func DKW(n int, fail float64) float64 { return math.Sqrt(math.Log(2/fail) / (2 * float64(n))) }

// SampleCollision estimates Collision by drawing every client-to-acceptor
// latency: the fraction of n trials in which no request is first at a fast
// quorum of acceptors.
func SampleCollision(w Dist, t int, offsets []float64, n int, seed uint64) float64 {
	r := rand.New(rand.NewPCG(seed, 0xc0111de))
	q := TableV1(t)
	votes := make([]int, len(offsets))
	hits := 0
	for i := 0; i < n; i++ {
		clear(votes)
		for a := 0; a < q.FastN; a++ {
			best, first := math.Inf(1), 0
			for c, o := range offsets {
				if x := o + sample(w, r); x < best {
					best, first = x, c
				}
			}
			votes[first]++
		}
		collided := true
		for _, v := range votes {
			if v >= q.FastQ {
				collided = false
			}
		}
		if collided {
			hits++
		}
	}
	return float64(hits) / float64(n)
}
