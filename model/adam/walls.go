package adam

// runWalls is the Eve modification (§3.2.2, Fig 3.3; the Batch Manager,
// §5.1.1). Threads run their round-robin requests speculatively in parallel.
// A thread that reaches its nested request "hits the wall" and waits. When
// every thread is at the wall or finished with the batch (no local work left),
// the replica checkpoints (HashFixed + HashPerRequest per request run since
// the last checkpoint, no thread computing), verifies (Verify), and only then
// do the waiting threads send their nested requests. A thread whose answer is
// back runs its next request. An extra checkpoint and verification at the end
// of the batch precede the release of the results.
func runWalls(c Config) Result {
	s := newSim(c, c.Threads)
	since := 0 // requests run since the last checkpoint
	var run func(t *thread)
	hitWall := func() {
		atWall := false
		for _, t := range s.threads {
			switch {
			case t.waiting >= 0:
				atWall = true
			case t.computing || t.hasWork():
				return // still computing, or will compute when its answer is back
			}
		}
		if !atWall {
			return
		}
		s.res.Checkpoints++
		delay := c.checkpointCost(since) + c.Verify
		since = 0
		for _, t := range s.threads {
			if t.waiting >= 0 {
				ri := t.waiting
				t.waiting = -1
				s.call(t, ri, delay, func() {
					if t.hasWork() {
						run(t)
					}
				})
			}
		}
	}
	run = func(t *thread) {
		s.compute(t, func() {
			since++
			t.waiting = t.current()
			hitWall()
		})
	}
	for _, t := range s.threads {
		if t.hasWork() {
			run(t)
		}
	}
	return s.loop(func() float64 {
		s.res.Checkpoints++ // end of batch
		return s.now + c.checkpointCost(since) + c.Verify
	})
}
