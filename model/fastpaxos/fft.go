package fastpaxos

import (
	"math"
	"math/bits"
	"math/cmplx"
)

// fft transforms a in place (radix 2; len(a) a power of two); inverse divides by len(a).
func fft(a []complex128, inverse bool) {
	n := len(a)
	shift := 64 - uint(bits.TrailingZeros(uint(n)))
	for i := range a {
		j := int(bits.Reverse64(uint64(i)) >> shift)
		if j > i {
			a[i], a[j] = a[j], a[i]
		}
	}
	sign := -1.0
	if inverse {
		sign = 1
	}
	for size := 2; size <= n; size <<= 1 {
		half := size / 2
		step := sign * 2 * math.Pi / float64(size)
		for k := 0; k < half; k++ {
			w := cmplx.Rect(1, step*float64(k))
			for start := k; start < n; start += size {
				u, v := a[start], a[start+half]*w
				a[start], a[start+half] = u+v, u-v
			}
		}
	}
	if inverse {
		inv := 1 / float64(n)
		for i := range a {
			a[i] *= complex(inv, 0)
		}
	}
}

// convolve returns the first n terms of the convolution of pmfs a and b (each
// of length n): the distribution of the sum of two independent lattice
// variables, truncated to the lattice [0, n) (mass beyond is overflow). It uses
// the FFT; round-off makes entries off by at most ~1e-15 per unit of total
// mass, and negative round-off is clamped to 0 (a test compares it with the
// direct sum).
func convolve(a, b []float64) []float64 {
	n := len(a)
	size := 1
	for size < 2*n {
		size <<= 1
	}
	fa := make([]complex128, size)
	fb := make([]complex128, size)
	for i := range a {
		fa[i] = complex(a[i], 0)
		fb[i] = complex(b[i], 0)
	}
	fft(fa, false)
	fft(fb, false)
	for i := range fa {
		fa[i] *= fb[i]
	}
	fft(fa, true)
	out := make([]float64, n)
	for i := range out {
		out[i] = max(real(fa[i]), 0)
	}
	return out
}

// convolveDirect is the O(n²) sum convolve replaces, for tests.
func convolveDirect(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i, x := range a {
		if x == 0 {
			continue
		}
		for j := 0; i+j < len(out); j++ {
			out[i+j] += x * b[j]
		}
	}
	return out
}
