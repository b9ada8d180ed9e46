package sim

import (
	"fmt"
	"time"
)

// Open-loop clients: with Config.Rate > 0, operations arrive at Rate per
// second in total (fixed intervals of 1/Rate, or exponential ones with
// Config.PoissonArrivals), whatever the answers, until Config.Ops have
// arrived; the first arrives at time 0. Each arrival is handed to the next
// idle client in round-robin order (with StickyClients and Clients a multiple
// of Nodes, arrival k goes to node k mod Nodes: the seed's front end spreading
// operations "in a balanced fashion"); when every client is busy it waits
// for the first client to finish (Stats.Backlogged counts those, and their
// latency is recorded from when they are issued, so give enough clients).
// Clients do not think between operations in this mode.

func (s *simulator) initOpenLoop() error {
	if s.cfg.Rate < 0 || s.cfg.Rate != s.cfg.Rate {
		return fmt.Errorf("sim: rate %v is not a positive number (or 0 for closed-loop clients)", s.cfg.Rate)
	}
	if s.cfg.PoissonArrivals && s.cfg.Rate == 0 {
		return fmt.Errorf("sim: Poisson arrivals need a rate")
	}
	return nil
}

func (s *simulator) openLoop() bool { return s.cfg.Rate > 0 }

// onArrival issues the arriving operation and schedules the next arrival.
func (s *simulator) onArrival() {
	if s.stopping || s.issued+s.backlog >= s.cfg.Ops {
		return
	}
	if c := s.idleClient(); c != nil {
		s.onClientNext(c)
	} else {
		s.backlog++
		s.stats.Backlogged++
	}
	if s.issued+s.backlog >= s.cfg.Ops {
		return
	}
	gap := time.Duration(float64(time.Second) / s.cfg.Rate)
	if s.cfg.PoissonArrivals {
		gap = time.Duration(s.rngClient.ExpFloat64() * float64(time.Second) / s.cfg.Rate)
	}
	s.after(gap, &event{kind: evArrival})
}

// idleClient returns the next idle client in round-robin order, or nil.
func (s *simulator) idleClient() *client {
	for i := 0; i < len(s.clients); i++ {
		c := s.clients[(s.nextClient+i)%len(s.clients)]
		if !c.busy {
			s.nextClient = (c.idx + 1) % len(s.clients)
			return c
		}
	}
	return nil
}

// openLoopDone is finishOp's open-loop tail: a waiting arrival takes the
// client at once.
func (s *simulator) openLoopDone(c *client) {
	if s.backlog > 0 {
		s.backlog--
		s.onClientNext(c)
	}
}
