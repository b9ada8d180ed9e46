package fastpaxos

import (
	"fmt"
)

// Setting is one configuration of the chapter V.B model: the latency of a
// client's (proposer's) link to a server, the latency of a link between two
// servers, and t, the number of faulty acceptors tolerated.
type Setting struct {
	// WAN is the client-to-server link latency (the seed's α_w, b_w).
	WAN Dist
	// LAN is the server-to-server link latency (the seed's α_l, b_l).
	LAN Dist
	// T is the number of acceptor failures tolerated.
	T int
}

// Quorums is the seed's Table V.1: Classic Paxos has 2t+1 acceptors and
// learns on t+1 of them; Fast Paxos has 3t+1 and learns on 2t+1.
type Quorums struct {
	ClassicN, ClassicQ, FastN, FastQ int
}

// TableV1 returns the acceptor and quorum counts of Table V.1 for t.
func TableV1(t int) Quorums {
	return Quorums{ClassicN: 2*t + 1, ClassicQ: t + 1, FastN: 3*t + 1, FastQ: 2*t + 1}
}

func (s Setting) check() error {
	if s.WAN == nil || s.LAN == nil {
		return fmt.Errorf("setting: WAN and LAN latency distributions are required")
	}
	if s.T < 1 || s.T > 20 {
		return fmt.Errorf("setting: t = %d, want 1 ≤ t ≤ 20", s.T)
	}
	return nil
}

// Curves are the time-to-learn distributions of one Setting on a Grid.
type Curves struct {
	Setting Setting
	Grid    Grid
	// Classic is P{L_c ≤ x}, Fast P{L_f ≤ x}, WAN P{W ≤ x} (one client
	// message: the seed plots it for comparison), each at every grid point.
	Classic, Fast Bracket
	WAN           []float64
}

// TimeToLearn computes P{L_c ≤ x} and P{L_f ≤ x} on the grid g (see the
// package documentation for the formulas and the error bound):
//
//	L_c = W(prop→leader) + R(leader, learner, A_c, t+1)
//	    = W + (t+1)-th smallest over a ∈ A_c (|A_c| = 2t+1) of ℓ(leader→a) + ℓ(a→learner)
//	L_f = R(prop, learner, A_f, 2t+1)
//	    = (2t+1)-th smallest over a ∈ A_f (|A_f| = 3t+1) of W(prop→a) + ℓ(a→learner)
func TimeToLearn(s Setting, g Grid) (*Curves, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	q := TableV1(s.T)
	w, l := link(s.WAN, g), link(s.LAN, g)
	// Classic: the leader's phase 2a to acceptor a, then a's phase 2b to the learner.
	r := l.plus(l).kth(q.ClassicQ, q.ClassicN)
	classic := w.plus(r)
	// Fast: the client's request to acceptor a, then a's phase 2b to the learner.
	fast := w.plus(l).kth(q.FastQ, q.FastN)
	c := &Curves{Setting: s, Grid: g, Classic: classic.bracket(), Fast: fast.bracket()}
	c.WAN = make([]float64, g.N)
	for j := range c.WAN {
		c.WAN[j] = s.WAN.CDF(g.X(j))
	}
	return c, nil
}

// Links is the number of links on each chain: the grid step H bounds the
// horizontal error of the brackets by Links·H.
const (
	ClassicLinks = 3
	FastLinks    = 2
)
