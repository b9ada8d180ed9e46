package adam

// runPPM is multi-threaded pipelining (§4.1, Fig 4.1): the Parallel Pipeline
// Manager (§5.2.1) and one Parallel Group Manager per group (§5.2.2).
//
// Assignment is group-major round-robin: request i goes to slot i mod G·k,
// group slot/k, thread slot mod k. Group 0 starts with the pipeline. Only the
// active group computes; all its threads compute at once. A thread that
// reaches its nested request yields: it flips its bit in the yield bit-array.
// When every bit of the active group is set (a thread with no local work left
// keeps its bit set), the group is at its wall: it checkpoints (HashFixed +
// HashPerRequest per request run in the turn; the pipeline stays with it),
// its nested requests leave after the verification (Verify; output commit,
// §5.2.3) and the PPM hands the pipeline to the next group in index order
// (modulo G) that has local work left. On taking the pipeline back, the PPM's
// control thread clears the bits of the group's threads that have work left:
// only it clears bits, and only of threads swapped off at least once. A
// thread whose bit is clear runs when its answer is back; until then it
// waits, holding its group's turn. The end of the batch adds a checkpoint and
// a verification before results are released.
func runPPM(c Config) Result {
	G, k := c.Groups, c.Threads
	s := newSim(c, G*k)
	for i, t := range s.threads {
		t.group = i / k
		t.bit = !t.hasWork()
	}
	members := func(g int) []*thread { return s.threads[g*k : (g+1)*k] }
	hasWork := func(g int) bool {
		for _, t := range members(g) {
			if t.hasWork() {
				return true
			}
		}
		return false
	}
	active, swapping, inTurn := -1, false, 0
	var run func(t *thread)
	var answer func(t *thread) func()
	var take func(g int)

	// wall: the active group's bits are all set (§5.2.1: the last thread to
	// yield notifies the control thread).
	wall := func() {
		if active < 0 || swapping {
			return
		}
		for _, t := range members(active) {
			if !t.bit {
				return
			}
		}
		g := active
		swapping = true
		cost := 0.0
		if inTurn > 0 {
			s.res.Checkpoints++
			cost = c.checkpointCost(inTurn)
		}
		inTurn = 0
		s.at(cost, evTimer, -1, func() {
			swapping = false
			for _, t := range members(g) {
				if t.waiting >= 0 {
					ri := t.waiting
					t.waiting = -1
					s.call(t, ri, c.Verify, answer(t))
				}
			}
			active = -1
			for i := 1; i <= G; i++ {
				if n := (g + i) % G; hasWork(n) {
					take(n)
					return
				}
			}
		})
	}
	// take gives group g the pipeline; the control thread clears its bits.
	take = func(g int) {
		active = g
		s.turn(g)
		for _, t := range members(g) {
			if t.hasWork() {
				t.bit = false
			}
		}
		for _, t := range members(g) {
			if !t.bit && !t.pending && !t.computing && t.hasWork() {
				run(t)
			}
		}
	}
	run = func(t *thread) {
		s.compute(t, func() {
			inTurn++
			t.bit = true // yield
			if c.SendAtYield {
				s.call(t, t.current(), 0, answer(t))
			} else {
				t.waiting = t.current()
			}
			wall()
		})
	}
	answer = func(t *thread) func() {
		return func() {
			switch c.Variant {
			case SelfClear:
				t.bit = false // the thread marks itself ready again
			case Eager:
				if t.hasWork() && t.group != active {
					t.bit = false
					run(t) // without waiting for its group's turn
					return
				}
			}
			if t.group == active && !t.bit && t.hasWork() && !t.computing {
				run(t)
			}
			wall()
		}
	}
	take(0)
	return s.loop(func() float64 {
		s.res.Checkpoints++ // end of batch
		return s.now + c.checkpointCost(inTurn) + c.Verify
	})
}
