package fastpaxos

import "math"

// binom is C(n, k) as a float.
func binom(n, k int) float64 {
	if k < 0 || k > n {
		return 0
	}
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return r
}

// AtLeast is P{Binomial(n, p) ≥ k}: the probability that at least k of n
// independent events of probability p occur. Exact (a finite sum).
func AtLeast(k, n int, p float64) float64 {
	if k <= 0 {
		return 1
	}
	if k > n {
		return 0
	}
	s := 0.0
	for i := k; i <= n; i++ {
		s += binom(n, i) * math.Pow(p, float64(i)) * math.Pow(1-p, float64(n-i))
	}
	return min(max(s, 0), 1)
}

// KthSmallestCDF is the CDF of the k-th smallest of n i.i.d. variables whose
// common CDF at x is g: P{X_(k) ≤ x} = P{at least k of the n are ≤ x} =
// Σ_{i=k}^{n} C(n,i) g^i (1−g)^{n−i}. Exact; non-decreasing in g.
func KthSmallestCDF(g float64, k, n int) float64 { return AtLeast(k, n, g) }

func kthCDF(g []float64, k, n int) []float64 {
	out := make([]float64, len(g))
	for j, v := range g {
		out[j] = KthSmallestCDF(v, k, n)
	}
	return out
}
