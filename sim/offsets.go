package sim

import (
	"fmt"
	"time"
)

// Client start offsets: RunWithStarts makes each closed-loop client issue
// its first operation at a virtual time of the caller's choosing, so that an
// experiment can place two clients' requests δ apart (the Grid Services thesis chapter V.B,
// Fig V.5: "the first client sends a request at time r and ... the second
// client sends a request at time r + δ"). Everything else is Run's: the
// first think time is still drawn (so the random streams, and every run
// without offsets, are unchanged), and the client then waits until its
// start time, which must not come before that think time ends.
//
// It is a function beside Run rather than a Config field because Config
// lives in sim.go; a --start-at flag and Command's replay line would need
// one there.

// RunWithStarts is Run with client i's first operation issued at virtual
// time startAt[i]; it needs one start time per client and closed-loop
// clients (no Rate).
func RunWithStarts(cfg Config, startAt []time.Duration) (*Result, error) {
	if cfg.Rate > 0 {
		return nil, fmt.Errorf("sim: start times are for closed-loop clients, not open-loop (Rate %g)", cfg.Rate)
	}
	return runWith(cfg, func(s *simulator) error {
		if len(startAt) != len(s.clients) {
			return fmt.Errorf("sim: %d start times for %d clients", len(startAt), len(s.clients))
		}
		for i, c := range s.clients {
			if startAt[i] < 0 {
				return fmt.Errorf("sim: client %d's start time %v is negative", i, startAt[i])
			}
			c.startAt, c.startPending = startAt[i], true
		}
		return nil
	})
}

// deferStart holds back a client's first operation until its start time
// (RunWithStarts): true when it rescheduled the client instead of issuing.
func (s *simulator) deferStart(c *client) bool {
	if !c.startPending {
		return false
	}
	c.startPending = false
	if c.startAt < s.now {
		s.fail("client %d's start time %v is before its first think time ended (%v): use a shorter Think", c.idx, c.startAt, s.now)
		return true
	}
	if c.startAt == s.now {
		return false
	}
	s.tracef("client %d starts at %v", c.idx, c.startAt)
	s.schedule(c.startAt, &event{kind: evClientNext, client: c.idx})
	return true
}
