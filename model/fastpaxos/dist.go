package fastpaxos

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Dist is the distribution of one link's message latency, in milliseconds.
// Latencies are non-negative. CDF is right-continuous (P{X ≤ x}); Quantile is
// its inverse on (0, 1), non-decreasing, with Quantile(1) possibly +Inf.
type Dist interface {
	CDF(x float64) float64
	Quantile(u float64) float64
	String() string
}

// Pareto is the seed's synthetic latency model (chapter V.B.1): shape Alpha > 1
// and minimum B (ms): P{X ≤ x} = 1 − (B/x)^Alpha for x ≥ B.
type Pareto struct {
	Alpha, B float64
}

// NewPareto checks the parameters (Alpha > 1 as the seed requires, B > 0).
func NewPareto(alpha, b float64) (Pareto, error) {
	if !(alpha > 1) || !(b > 0) || math.IsInf(alpha, 0) || math.IsInf(b, 0) {
		return Pareto{}, fmt.Errorf("pareto(α=%v, b=%v): want α > 1 and 0 < b < ∞", alpha, b)
	}
	return Pareto{alpha, b}, nil
}

func (p Pareto) CDF(x float64) float64 {
	if x <= p.B {
		return 0
	}
	return 1 - math.Pow(p.B/x, p.Alpha)
}

func (p Pareto) Quantile(u float64) float64 {
	switch {
	case u <= 0:
		return p.B
	case u >= 1:
		return math.Inf(1)
	}
	return p.B * math.Pow(1-u, -1/p.Alpha)
}

func (p Pareto) String() string { return fmt.Sprintf("pareto(α=%g, b=%gms)", p.Alpha, p.B) }

// Empirical is the distribution of a latency trace (one sample per message).
// It is made continuous, so that two messages never arrive at the same instant
// (the collision model needs an order): its CDF is the empirical CDF
// interpolated linearly between the trace's distinct values, i.e. the mass of
// each distinct value v_k is spread uniformly over (v_{k−1}, v_k] (the mass of
// the smallest value goes with the second's). That moves no sample by more
// than the gap to the next smaller distinct value (1 µs in our traces).
type Empirical struct {
	Name string
	v    []float64 // distinct values, increasing
	cum  []float64 // cum[k] = F(v[k]); cum[0] = 0, cum[last] = 1
	n    int       // samples
}

// NewEmpirical builds the distribution of samples (ms, non-negative, finite;
// at least two distinct values).
func NewEmpirical(name string, samples []float64) (*Empirical, error) {
	if len(samples) < 2 {
		return nil, fmt.Errorf("trace %s: %d samples, want at least 2", name, len(samples))
	}
	s := append([]float64(nil), samples...)
	for _, x := range s {
		if x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("trace %s: sample %v is not a non-negative latency", name, x)
		}
	}
	sort.Float64s(s)
	e := &Empirical{Name: name, n: len(s)}
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] == s[i] {
			j++
		}
		e.v = append(e.v, s[i])
		e.cum = append(e.cum, float64(j)/float64(len(s)))
		i = j
	}
	if len(e.v) < 2 {
		return nil, fmt.Errorf("trace %s: all %d samples equal %v; want at least two distinct values", name, len(s), s[0])
	}
	e.cum[0] = 0
	return e, nil
}

// Len is the number of samples.
func (e *Empirical) Len() int { return e.n }

// Min and Max are the trace's smallest and largest samples.
func (e *Empirical) Min() float64 { return e.v[0] }
func (e *Empirical) Max() float64 { return e.v[len(e.v)-1] }

func (e *Empirical) CDF(x float64) float64 {
	if x <= e.v[0] {
		return 0
	}
	k := sort.SearchFloat64s(e.v, x) // first v[k] ≥ x, k ≥ 1
	if k == len(e.v) {
		return 1
	}
	f := (x - e.v[k-1]) / (e.v[k] - e.v[k-1])
	return e.cum[k-1] + f*(e.cum[k]-e.cum[k-1])
}

func (e *Empirical) Quantile(u float64) float64 {
	switch {
	case u <= 0:
		return e.v[0]
	case u >= 1:
		return e.v[len(e.v)-1]
	}
	k := sort.SearchFloat64s(e.cum, u) // first cum[k] ≥ u, k ≥ 1
	f := (u - e.cum[k-1]) / (e.cum[k] - e.cum[k-1])
	return e.v[k-1] + f*(e.v[k]-e.v[k-1])
}

func (e *Empirical) String() string {
	return fmt.Sprintf("trace(%s, %d samples, %.3g–%.3gms)", e.Name, e.n, e.Min(), e.Max())
}

// ReadTrace reads a latency trace: one latency in milliseconds per line; blank
// lines and lines starting with '#' are comments.
func ReadTrace(r io.Reader) ([]float64, error) {
	var out []float64
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no samples")
	}
	return out, nil
}

// The seed's link parameters (chapter V.B.1): client (WAN) links Pareto
// with scale b_w = 100 ms (α_w varies: 1.2, 1.8), server (LAN) links
// Pareto(α_l = 2.0, b_l = 3 ms). Milliseconds.
const (
	SeedWANScale = 100.0
	SeedLANAlpha = 2.0
	SeedLANScale = 3.0
)
