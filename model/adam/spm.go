package adam

// runSPM is single-threaded deterministic pipelining, the Sequential Pipeline
// Manager (§3.2.3, Fig 3.4; §5.1.2). Requests are assigned to the threads
// round-robin; one thread holds the turn at a time, starting with thread 0.
// The holder runs until its nested request, yields and sends it at once; the
// turn passes to the next thread (by id, modulo the number of threads) that
// has work. A holder whose answer is not back yet waits, holding the turn.
// Only one thread computes at a time in a fixed order, so execution is
// deterministic: no checkpoints, no rollback.
func runSPM(c Config) Result {
	s := newSim(c, c.Threads)
	holder := -1
	var run func(t *thread)
	pass := func(from int) {
		holder = -1
		for i := 1; i <= len(s.threads); i++ {
			t := s.threads[(from+i)%len(s.threads)]
			if t.hasWork() {
				holder = t.id
				s.turn(t.id)
				if !t.pending {
					run(t)
				}
				return
			}
		}
	}
	run = func(t *thread) {
		s.compute(t, func() {
			s.call(t, t.current(), 0, func() {
				if holder == t.id && t.hasWork() {
					run(t)
				}
			})
			pass(t.id) // yield
		})
	}
	pass(len(s.threads) - 1)
	return s.loop(func() float64 { return s.now })
}
