package bench

import (
	"math/rand"
	"time"
)

// Open-loop arrival processes (Config.Arrivals).
const (
	ArrivalsPoisson = "poisson"
	ArrivalsUniform = "uniform"
)

// arrivals yields arrival offsets from the start of the measured phase.
type arrivals interface{ next() time.Duration }

// newArrivals returns the generator of the named process at rate per second.
func newArrivals(kind string, rate float64, r *rand.Rand) arrivals {
	if kind == ArrivalsUniform {
		return &uniform{r: r, rate: rate}
	}
	return newPoisson(rate, r)
}

// uniform yields arrivals whose gaps are uniform on [0, 2/rate]: mean
// 1/rate, as the ABD report's "uniform distribution with the average 50 requests
// per second" (§4.1) reads when the rate is an average.
type uniform struct {
	r    *rand.Rand
	rate float64
	t    float64
}

func (u *uniform) next() time.Duration {
	u.t += 2 * u.r.Float64() / u.rate
	return time.Duration(u.t * float64(time.Second))
}

// poisson yields the arrival times of a Poisson process of the given rate
// (events per second): inter-arrival gaps are exponential with mean 1/rate.
// It is a pure generator; the open-loop scheduler turns its offsets into
// wall-clock deadlines.
type poisson struct {
	r    *rand.Rand
	rate float64
	t    float64 // seconds since the start
}

func newPoisson(rate float64, r *rand.Rand) *poisson { return &poisson{r: r, rate: rate} }

// next returns the next arrival's offset from the start.
func (p *poisson) next() time.Duration {
	p.t += p.r.ExpFloat64() / p.rate
	return time.Duration(p.t * float64(time.Second))
}
