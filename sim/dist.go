package sim

import (
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"time"
)

// DistKind names a family of delay distributions.
type DistKind uint8

const (
	// Constant always yields A.
	Constant DistKind = iota
	// Uniform yields a duration uniformly in [A, B].
	Uniform
	// Normal yields a normal sample with mean A and standard deviation B,
	// clamped at zero (a delay is never negative).
	Normal
	// Pareto yields A / U^(1/Shape) for U uniform in (0, 1]: the heavy-tailed
	// distribution of the Grid Services thesis's latency analysis. A is the minimum (scale) and
	// Shape the tail index. Samples are capped at ParetoCap*A so that one draw
	// cannot stall a run for hours of virtual time.
	Pareto
)

// ParetoCap bounds a Pareto sample, as a multiple of its scale.
const ParetoCap = 1000

// Dist is a delay distribution: link latencies, fsync times, client think time.
type Dist struct {
	Kind  DistKind
	A, B  time.Duration
	Shape float64 // Pareto only
}

// ParseDist parses "constant:D", "uniform:MIN:MAX", "normal:MEAN:STDDEV" or
// "pareto:SCALE:SHAPE", with durations in Go syntax ("1ms", "250us", "0").
func ParseDist(s string) (Dist, error) {
	parts := strings.Split(s, ":")
	bad := func(format string, a ...any) (Dist, error) {
		return Dist{}, fmt.Errorf("distribution %q: %s (want constant:D, uniform:MIN:MAX, normal:MEAN:STDDEV or pareto:SCALE:SHAPE)", s, fmt.Sprintf(format, a...))
	}
	dur := func(i int) (time.Duration, error) {
		d, err := time.ParseDuration(parts[i])
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration", parts[i])
		}
		if d < 0 {
			return 0, fmt.Errorf("%q is negative", parts[i])
		}
		return d, nil
	}
	want := map[string]int{"constant": 2, "uniform": 3, "normal": 3, "pareto": 3}
	n, ok := want[parts[0]]
	if !ok {
		return bad("unknown kind %q", parts[0])
	}
	if len(parts) != n {
		return bad("%s takes %d parameters, got %d", parts[0], n-1, len(parts)-1)
	}
	a, err := dur(1)
	if err != nil {
		return bad("%v", err)
	}
	switch parts[0] {
	case "constant":
		return Dist{Kind: Constant, A: a}, nil
	case "uniform", "normal":
		b, err := dur(2)
		if err != nil {
			return bad("%v", err)
		}
		if parts[0] == "uniform" {
			if b < a {
				return bad("max %v is below min %v", b, a)
			}
			return Dist{Kind: Uniform, A: a, B: b}, nil
		}
		return Dist{Kind: Normal, A: a, B: b}, nil
	default: // pareto
		shape, err := strconv.ParseFloat(parts[2], 64)
		if err != nil || !(shape > 0) || math.IsInf(shape, 0) {
			return bad("shape %q is not a positive number", parts[2])
		}
		if a == 0 {
			return bad("pareto scale must be positive")
		}
		return Dist{Kind: Pareto, A: a, Shape: shape}, nil
	}
}

// MustParseDist is ParseDist for constants in code; it panics on error.
func MustParseDist(s string) Dist {
	d, err := ParseDist(s)
	if err != nil {
		panic(err)
	}
	return d
}

// Sample draws one delay from r.
func (d Dist) Sample(r *rand.Rand) time.Duration {
	switch d.Kind {
	case Constant:
		return d.A
	case Uniform:
		if d.B <= d.A {
			return d.A
		}
		return d.A + time.Duration(r.Int63n(int64(d.B-d.A)+1))
	case Normal:
		v := float64(d.A) + r.NormFloat64()*float64(d.B)
		if v < 0 {
			return 0
		}
		return time.Duration(v)
	case Pareto:
		u := 1 - r.Float64() // (0, 1]
		v := float64(d.A) / math.Pow(u, 1/d.Shape)
		if limit := float64(d.A) * ParetoCap; v > limit {
			v = limit
		}
		return time.Duration(v)
	}
	panic(fmt.Sprintf("sim: bad distribution kind %d", d.Kind))
}

// String returns the form ParseDist accepts.
func (d Dist) String() string {
	switch d.Kind {
	case Constant:
		return "constant:" + d.A.String()
	case Uniform:
		return "uniform:" + d.A.String() + ":" + d.B.String()
	case Normal:
		return "normal:" + d.A.String() + ":" + d.B.String()
	case Pareto:
		return "pareto:" + d.A.String() + ":" + strconv.FormatFloat(d.Shape, 'g', -1, 64)
	}
	return fmt.Sprintf("Dist(%d)", d.Kind)
}
