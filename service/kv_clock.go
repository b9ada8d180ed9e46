package service

import "time"

// LeaderClock is a log-based protocol's estimate of its leader's time, for
// services that read the time (UsesTime; kv_doc.go "Expiry"). Automata read
// no clock, so the estimate is the latest Env.Time of the requests that
// reached the node directly (its own runtime stamped them on arrival),
// advanced by the heartbeat at every tick, and never behind the state's
// clock (the largest time in the executed log). Timers fire no earlier than
// asked, so it never runs ahead of the node's own clock. The zero value is
// ready to use. protocol/paxos/expiry.go and protocol/pbpaxos/expiry.go use
// it.
type LeaderClock struct {
	now   int64 // ns since the Unix epoch; 0: nothing observed yet
	ticks int
	seq   uint64
}

// NextSeq is the sequence number of the next active expiry request: above
// the previous one and at least atLeast (the protocol's next instance, so
// that numbers grow across leaders too and a duplicate table never takes
// one request for another).
func (c *LeaderClock) NextSeq(atLeast uint64) uint64 {
	c.seq = max(c.seq+1, atLeast)
	return c.seq
}

// Observe takes the environment of a request that reached this node
// directly.
func (c *LeaderClock) Observe(env Env) {
	c.now = max(c.now, env.Time)
}

// ObserveForwarded takes the environment of a request another node
// forwarded, only while this node has observed no time of its own: a
// leader that no client reaches directly (every client behind a follower,
// or a namespace whose clients all use one node) would otherwise never
// have a time, and refuse every deadline. After that first estimate the
// leader's own arrivals and heartbeats advance it; the follower's clock
// enters once, bounded by the skew assumption in the package doc.
func (c *LeaderClock) ObserveForwarded(env Env) {
	if c.now == 0 {
		c.now = env.Time
	}
}

// Tick advances the estimate by one heartbeat (once anything was observed)
// and reports whether every heartbeats have passed since the last time it
// said so (the active expiry period, in heartbeats).
func (c *LeaderClock) Tick(heartbeat time.Duration, every int) bool {
	if c.now > 0 {
		c.now += int64(heartbeat)
	}
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
