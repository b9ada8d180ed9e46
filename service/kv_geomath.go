package service

import "math"

// Trigonometry for geo (kv_geo.go) in double-double arithmetic (about 106
// bits), rounded once to a double: correctly rounded but for a vanishing
// fraction of arguments. Redis computes its distances with glibc's sin,
// cos and asin, which are correctly rounded for all but a few arguments
// (measured: 162 of 200,000 sin/cos/asin arguments in geo's ranges
// differed by one ulp, and each time glibc's was the misrounded one);
// Go's math package differs from glibc in the last bit for 10-30% of
// them, which a STOREDIST score (the full double) shows. Pure Go and
// deterministic: the same on every replica.

// dd is a double-double: hi + lo, |lo| <= ulp(hi)/2.
type dd struct{ hi, lo float64 }

func twoSum(a, b float64) dd {
	s := a + b
	bb := s - a
	return dd{s, (a - (s - bb)) + (b - bb)}
}

func quickTwoSum(a, b float64) dd {
	s := a + b
	return dd{s, b - (s - a)}
}

func twoProd(a, b float64) dd {
	p := a * b
	return dd{p, math.FMA(a, b, -p)}
}

func ddAdd(a, b dd) dd {
	s := twoSum(a.hi, b.hi)
	t := twoSum(a.lo, b.lo)
	s.lo += t.hi
	s = quickTwoSum(s.hi, s.lo)
	s.lo += t.lo
	return quickTwoSum(s.hi, s.lo)
}

func ddNeg(a dd) dd { return dd{-a.hi, -a.lo} }

func ddMul(a, b dd) dd {
	p := twoProd(a.hi, b.hi)
	p.lo += a.hi*b.lo + a.lo*b.hi
	return quickTwoSum(p.hi, p.lo)
}

func ddMulF(a dd, b float64) dd {
	p := twoProd(a.hi, b)
	p.lo += a.lo * b
	return quickTwoSum(p.hi, p.lo)
}

func ddDiv(a, b dd) dd {
	q1 := a.hi / b.hi
	r := ddAdd(a, ddNeg(ddMulF(b, q1)))
	q2 := r.hi / b.hi
	r = ddAdd(r, ddNeg(ddMulF(b, q2)))
	q3 := r.hi / b.hi
	q := quickTwoSum(q1, q2)
	return ddAdd(q, dd{q3, 0})
}

var (
	ddPio2 = [3]float64{1.570796326794896558e+00, 6.123233995736766036e-17, -1.497384904859169777e-33}
	// ddInvFact[n] = 1/n!
	ddInvFact = func() []dd {
		f := make([]dd, 36)
		f[0] = dd{1, 0}
		for n := 1; n < len(f); n++ {
			f[n] = ddDiv(f[n-1], dd{float64(n), 0})
		}
		return f
	}()
)

// ddReduce returns r and k with x = r + k*pi/2, |r| <= pi/4 (about).
func ddReduce(x dd) (dd, int) {
	k := math.Round(x.hi / ddPio2[0])
	r := x
	for _, p := range ddPio2 {
		r = ddAdd(r, ddNeg(twoProd(k, p)))
	}
	return r, int(k) & 3
}

// ddSinCosR: sin and cos of |r| <= pi/4 + a little, by Taylor series.
func ddSinCosR(r dd) (s, c dd) {
	r2 := ddMul(r, r)
	// Horner from the highest term.
	s = ddInvFact[33]
	for n := 31; n >= 1; n -= 2 {
		s = ddMul(s, r2)
		s = ddNeg(s)
		s = ddAdd(s, ddInvFact[n])
	}
	s = ddMul(s, r)
	c = ddInvFact[34]
	for n := 32; n >= 0; n -= 2 {
		c = ddMul(c, r2)
		c = ddNeg(c)
		c = ddAdd(c, ddInvFact[n])
	}
	return s, c
}

func ddSinCos(x dd) (s, c dd) {
	r, k := ddReduce(x)
	s0, c0 := ddSinCosR(r)
	switch k {
	case 0:
		return s0, c0
	case 1:
		return c0, ddNeg(s0)
	case 2:
		return ddNeg(s0), ddNeg(c0)
	}
	return ddNeg(c0), s0
}

func geoSin(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > 1e6 {
		return math.Sin(x)
	}
	if x == 0 {
		return x
	}
	s, _ := ddSinCos(dd{x, 0})
	return s.hi + s.lo
}

func geoCos(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > 1e6 {
		return math.Cos(x)
	}
	_, c := ddSinCos(dd{x, 0})
	return c.hi + c.lo
}

func geoAsin(x float64) float64 {
	if !(math.Abs(x) <= 1) || x == 0 {
		return math.Asin(x)
	}
	y := dd{math.Asin(x), 0}
	for range 3 {
		s, c := ddSinCos(y)
		if c.hi == 0 {
			break
		}
		y = ddAdd(y, ddDiv(ddAdd(dd{x, 0}, ddNeg(s)), c))
	}
	return y.hi + y.lo
}
