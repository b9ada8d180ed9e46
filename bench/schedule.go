package bench

import (
	"math/rand"
	"time"
)

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
