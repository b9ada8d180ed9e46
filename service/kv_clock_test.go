package service

import (
	"math/rand"
	"testing"
	"time"
)

// TestLeaderClockBound: with ticks that fire no earlier than a heartbeat
// apart (late ones included) and requests observed at their arrival times,
// the estimate never runs ahead of the real clock and never behind the
// latest arrival observed (kv_clock.go's bound, one clock). Adding the
// heartbeat to an arrival observed between two ticks, the rule before,
// ran up to a heartbeat ahead (the first case).
func TestLeaderClockBound(t *testing.T) {
	const hb = 50 * time.Millisecond
	// An arrival 30 ms after a tick, then the next tick.
	var c LeaderClock
	real := int64(1_700_000_000) * 1e9
	c.Observe(Env{Time: real})
	c.Tick(hb, 1)
	c.Observe(Env{Time: real + 30e6})
	real += int64(hb)
	c.Tick(hb, 1)
	if now := c.Now(nil); now > real {
		t.Fatalf("estimate %d ms ahead of the clock after a tick", (now-real)/1e6)
	}
	rng := rand.New(rand.NewSource(1))
	for run := 0; run < 200; run++ {
		var c LeaderClock
		real := int64(1_700_000_000+run) * 1e9
		nextTick := real + int64(hb)
		var last int64
		for step := 0; step < 500; step++ {
			real += rng.Int63n(int64(hb))
			if real >= nextTick {
				c.Tick(hb, 2)
				nextTick = real + int64(hb) + rng.Int63n(int64(3*hb)) // late ticks
			}
			if rng.Intn(3) == 0 {
				last = real - rng.Int63n(int64(10*time.Millisecond)) // stamped on arrival, a little earlier
				c.Observe(Env{Time: last})
			}
			if now := c.Now(nil); now > real || now < last {
				t.Fatalf("run %d step %d: estimate %d, clock %d, last arrival %d", run, step, now, real, last)
			}
		}
	}
}
