package service

import "time"

// LeaderClock is a log-based protocol's estimate of its leader's time, for
// services that read the time (UsesTime; kv_doc.go "Expiry"). Automata read
// no clock, so the estimate is built from the times the runtime stamped on
// requests (Env.Time: the clock of the node the client reached, read on
// arrival) and from the protocol's ticks:
//
//	estimate = max(largest Env.Time of every request that reached the
//	               leader, directly or forwarded or relayed by another node,
//	               the estimate at the previous tick + one heartbeat,
//	               the state's clock: the largest time in the executed log)
//
// (A tick adds the heartbeat to the estimate as it was at the previous
// tick, not to a time observed since: that one plus a heartbeat could run
// up to a heartbeat ahead of every clock, and an XPENDING IDLE read 20 ms
// after a delivery then found it not yet 1 ms old.)
//
// Bound. Let ε be the largest skew between the nodes' clocks. Timers fire
// no earlier than asked and every Env.Time is some node's clock reading at
// arrival, so the estimate never runs ahead of the fastest node's clock
// (at most ε ahead of any node's). And a request the leader stamps is
// stamped no earlier than its arrival time at the node the client reached,
// in that node's clock: a client never sees the leader's time behind its
// own node's, whichever node leads and however late ticks fire under load.
// Taking forwarded times (the max rule) is what keeps the second half; the
// earlier rule, which took a forwarded time only while nothing else was
// known, let a leader that clients reached only through another node fall
// ~19 s behind under load (its estimate advanced by one nominal heartbeat
// per late tick; issue 34: Redis's expire unit and XPENDING IDLE). The
// price is the first half: a node with a fast clock moves deadlines and
// expiry earlier by up to ε for everyone, the skew assumption protocol's
// expiry already makes between successive leaders. The zero value is ready
// to use. protocol/paxos/expiry.go and protocol/pbpaxos/expiry.go use it.
type LeaderClock struct {
	now   int64 // ns since the Unix epoch; 0: nothing observed yet
	ticks int
	seq   uint64
	base  int64 // the estimate at the previous tick (0: none yet)
}

// NextSeq is the sequence number of the next active expiry request: above
// the previous one and at least atLeast (the protocol's next instance, so
// that numbers grow across leaders too and a duplicate table never takes
// one request for another).
func (c *LeaderClock) NextSeq(atLeast uint64) uint64 {
	c.seq = max(c.seq+1, atLeast)
	return c.seq
}

// Observe takes the environment of a request that reached the leader,
// directly or through another node (the max rule above).
func (c *LeaderClock) Observe(env Env) {
	c.now = max(c.now, env.Time)
}

// Tick advances the estimate to the estimate at the previous tick plus one
// heartbeat (once anything was observed) and reports whether every
// heartbeats have passed since the last time it said so (the active expiry
// period, in heartbeats).
func (c *LeaderClock) Tick(heartbeat time.Duration, every int) bool {
	if c.base > 0 {
		c.now = max(c.now, c.base+int64(heartbeat))
	}
	c.base = c.now
	c.ticks++
	if c.ticks < every {
		return false
	}
	c.ticks = 0
	return true
}

// Now returns the estimate, raised to st's clock when st has one.
func (c *LeaderClock) Now(st State) int64 {
	if es, ok := st.(ExpiringState); ok {
		c.now = max(c.now, es.Clock()*1e6)
	}
	return c.now
}

// Stamp returns the environment to log (or read with) for a request whose
// own environment is env: env itself unless svc reads the time, else the
// estimate with env's seed.
func (c *LeaderClock) Stamp(svc Service, st State, env Env) Env {
	if !UsesTime(svc) {
		return env
	}
	return Env{Time: c.Now(st), Seed: env.Seed}
}

// Due reports whether st has a deadline the estimate has passed: the
// leader should propose ActiveExpire.
func (c *LeaderClock) Due(st State) bool {
	es, ok := st.(ExpiringState)
	if !ok {
		return false
	}
	d, ok := es.NextDeadline()
	return ok && c.Now(st)/1e6 >= d
}
