package adam

// runNaive is agree-execute (§3.2.1, Fig 3.2): one thread runs each request's
// local computation, sends its nested request and waits for the answer before
// the next request; "while remote computation is happening, no local
// computation can be performed". Deterministic: no checkpoints.
func runNaive(c Config) Result {
	s := newSim(c, 1)
	t := s.threads[0]
	var next func()
	next = func() {
		if t.hasWork() {
			s.compute(t, func() { s.call(t, t.current(), 0, next) })
		}
	}
	next()
	return s.loop(func() float64 { return s.now })
}
