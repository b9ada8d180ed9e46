package seed002fastsim

import (
	"math/rand"
	"sort"

	"github.com/synod-dev/synod/model/fastpaxos"
)

// roundTrips samples the client round trip of the chapter's model, message by
// message: the seed's L_c and L_f (model/fastpaxos's doc) plus the reply to
// the client, which the seed leaves out ("we concentrate on the time to
// learn") but a simulated client can only see. Classic: the leader learns
// and replies, so RTT_c = L_c + W. Fast: every learner learns and replies and
// the client takes the first reply, so RTT_f = min over learners j of
// (L_f at j + W(j→client)), the acceptors' votes shared by every learner.
//
// selfFree chooses between two readings of messages a node sends itself. The
// seed's (model/fastpaxos): every message crosses a link, the leader's phase
// 2a to itself and an acceptor's vote to its own learner included. The
// simulator's: a node's own message takes no time (the automaton contract
// has no sends to self), which is what the simulated runs do.
//
// The same draws give the time to learn (the seed's L_c and L_f without the
// reply): Classic at the leader, Fast at learner 0 (every learner's is
// distributed alike).
func roundTrips(w, l fastpaxos.Dist, t, samples int, seed int64, selfFree bool) modelSamples {
	var m modelSamples
	rng := rand.New(rand.NewSource(seed))
	draw := func(d fastpaxos.Dist) float64 { return d.Quantile(rng.Float64()) }
	nc, nf := 2*t+1, 3*t+1
	buf := make([]float64, nf)
	wa := make([]float64, nf)
	for range samples {
		// Classic: the leader is acceptor 0.
		for a := range nc {
			if selfFree && a == 0 {
				buf[a] = 0
			} else {
				buf[a] = draw(l) + draw(l)
			}
		}
		sort.Float64s(buf[:nc])
		lc := draw(w) + buf[t]
		m.learnC = append(m.learnC, lc)
		m.rttC = append(m.rttC, lc+draw(w))
		// Fast.
		for a := range nf {
			wa[a] = draw(w)
		}
		first := -1.0
		for j := range nf {
			for a := range nf {
				buf[a] = wa[a]
				if !(selfFree && a == j) {
					buf[a] += draw(l)
				}
			}
			sort.Float64s(buf)
			if j == 0 {
				m.learnF = append(m.learnF, buf[2*t])
			}
			if r := buf[2*t] + draw(w); first < 0 || r < first {
				first = r
			}
		}
		m.rttF = append(m.rttF, first)
	}
	for _, s := range [][]float64{m.rttC, m.rttF, m.learnC, m.learnF} {
		sort.Float64s(s)
	}
	return m
}

// modelSamples are sorted samples of the model's client round trips and
// times to learn (ms).
type modelSamples struct {
	rttC, rttF, learnC, learnF []float64
}

// ecdf is P{X ≤ x} of sorted samples.
func ecdf(s []float64, x float64) float64 {
	return float64(sort.Search(len(s), func(i int) bool { return s[i] > x })) / float64(len(s))
}

// quantileOf is the u-quantile of sorted samples.
func quantileOf(s []float64, u float64) float64 {
	if len(s) == 0 {
		return 0
	}
	i := int(u * float64(len(s)))
	return s[min(i, len(s)-1)]
}

// cross is the last crossing of two empirical CDFs: x is the first sample
// point after the last one where Classic leads (Pc > Pf); twoRegions when
// Fast leads somewhere after it; leadC and leadF are each curve's largest
// lead anywhere.
type cross struct {
	x, pc, pf      float64
	leadC, leadF   float64
	twoRegions, ok bool // ok: Classic leads somewhere and stops leading
}

func crossing(c, f []float64, xmax float64) cross {
	xs := append(append([]float64(nil), c...), f...)
	sort.Float64s(xs)
	var r cross
	lastC := -1.0 // last x where Classic leads
	for _, x := range xs {
		if x > xmax {
			break
		}
		d := ecdf(c, x) - ecdf(f, x)
		r.leadC, r.leadF = max(r.leadC, d), max(r.leadF, -d)
		if d > 0 {
			lastC = x
		}
	}
	if lastC < 0 {
		return r
	}
	i := sort.SearchFloat64s(xs, lastC)
	for ; i < len(xs) && ecdf(c, xs[i])-ecdf(f, xs[i]) > 0; i++ {
	}
	if i < len(xs) {
		r.x = xs[i]
		r.pc, r.pf = ecdf(c, r.x), ecdf(f, r.x)
		r.ok = true
		// Two regions: Fast ahead somewhere after the last Classic lead.
		for _, y := range xs[i:] {
			if y <= xmax && ecdf(f, y) > ecdf(c, y) {
				r.twoRegions = true
				break
			}
		}
	}
	return r
}
