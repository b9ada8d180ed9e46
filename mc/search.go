package mc

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// The search: breadth-first (level by level, every level expanded by all
// workers in parallel, then merged in a fixed order so that counts and the
// counterexample do not depend on scheduling), or depth-first (workers take
// states from a shared stack; the counterexample is the first found, not
// the shortest).
//
// A state is reached once: its fingerprint enters the visited set, and a
// state whose fingerprint is there already is not expanded again. States
// are expanded by copying (world.clone) or, with Config.Replay, by
// replaying their path from fresh automata.

// path is a persistent list of events from the initial state.
type path struct {
	parent *path
	ev     Event
	n      int
}

func (p *path) push(ev Event) *path {
	n := 1
	if p != nil {
		n = p.n + 1
	}
	return &path{parent: p, ev: ev, n: n}
}

func (p *path) events() []Event {
	if p == nil {
		return nil
	}
	out := make([]Event, p.n)
	for q := p; q != nil; q = q.parent {
		out[q.n-1] = q.ev
	}
	return out
}

// PropResult says whether a sometimes property was reached, and how.
type PropResult struct {
	Name    string
	Reached bool
	// Witness is a shortest path to it (breadth-first).
	Witness []Event
}

// Result is the outcome of a check.
type Result struct {
	Config Config
	// States counts distinct states (fingerprints); Transitions the events
	// applied (every successor generated, visited or not).
	States, Transitions int64
	// Depth is the deepest level reached.
	Depth int
	// Complete: every state within the depth was explored (no violation
	// stopped the search and MaxStates was not reached).
	Complete bool
	// Frontier counts states at the depth bound left unexpanded (0: the
	// state space is exhausted below the bound).
	Frontier int
	Elapsed  time.Duration
	// HistoryChecks counts distinct histories judged by the consistency
	// checker.
	HistoryChecks int64
	// PeakHeap is the largest heap in use during the search.
	PeakHeap uint64
	// Violation is the first (for BFS the shortest) counterexample; nil
	// when none was found. Violations counts them when KeepGoing.
	Violation  *Trace
	Violations int
	Sometimes  []PropResult
	// Terminal counts states where no event is enabled.
	Terminal int64
}

// StatesPerSecond is the search's speed.
func (r *Result) StatesPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.States) / r.Elapsed.Seconds()
}

// BytesPerState is the peak heap divided by the states visited.
func (r *Result) BytesPerState() float64 {
	if r.States == 0 {
		return 0
	}
	return float64(r.PeakHeap) / float64(r.States)
}

type entry struct {
	w *world // nil in replay mode
	p *path
}

type checker struct {
	cfg      Config
	v        verdicts
	mu       sync.Mutex
	res      *Result
	some     map[string]*PropResult
	stopped  atomic.Bool
	trans    atomic.Int64
	terminal atomic.Int64
	// found: the best violation so far, with its order key.
	found    *Trace
	foundKey [2]int
}

// Check runs the model checker.
func Check(cfg Config) (*Result, error) {
	if cfg.Model.Nodes == 0 {
		d := NewConfig(cfg.Protocol)
		d.Net, d.Timers, d.Crashes, d.DFS, d.Workers, d.MaxStates, d.Replay, d.KeepGoing, d.NoHistoryCheck, d.Reflective =
			cfg.Net, cfg.Timers, cfg.Crashes, cfg.DFS, cfg.Workers, cfg.MaxStates, cfg.Replay, cfg.KeepGoing, cfg.NoHistoryCheck, cfg.Reflective
		if cfg.Depth > 0 {
			d.Depth = cfg.Depth
		}
		cfg = d
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	if cfg.Depth <= 0 {
		cfg.Depth = cfg.Model.Depth
	}
	c := &checker{cfg: cfg, res: &Result{Config: cfg}, some: map[string]*PropResult{}}
	for _, n := range sometimesProps {
		c.some[n] = &PropResult{Name: n}
	}
	start := time.Now()
	if err := checkProgressNames(c.cfg.Model.Progress); err != nil {
		return nil, err
	}
	w0, err := newWorld(&c.cfg)
	if err != nil {
		return nil, err
	}
	root := entry{w: w0}
	if w0.violation == "" && len(c.cfg.Model.Prefix) > 0 {
		p, why, err := c.applyPrefix(w0, c.cfg.Model.Prefix)
		if err != nil {
			return nil, err
		}
		root.p = p
		if why != "" && w0.violation == "" {
			w0.violation = why
		}
	}
	defer raiseGC()()
	stopHeap := c.sampleHeap()
	if c.cfg.DFS {
		c.dfs(root)
	} else {
		c.bfs(root)
	}
	stopHeap()
	c.res.Elapsed = time.Since(start)
	c.res.Transitions = c.trans.Load()
	c.res.Terminal = c.terminal.Load()
	c.res.HistoryChecks = c.v.checked
	if c.found == nil {
		c.found = c.progressViolation(root.p) // progress.go
	}
	c.res.Violation = c.found
	for _, n := range sometimesProps {
		c.res.Sometimes = append(c.res.Sometimes, *c.some[n])
	}
	if c.found != nil {
		if err := c.found.fill(); err != nil {
			return c.res, err
		}
	}
	c.res.Complete = c.found == nil && !c.cfg.full(c.res.States)
	return c.res, nil
}

// searchGCPercent is the garbage collector's GOGC during a search (doc.go,
// "Speed"): a search allocates a few short-lived copies and encodings per
// transition, and with the default 100 the collector took about a quarter
// of abd's time.
const searchGCPercent = 400

var (
	gcMu       sync.Mutex
	gcSearches int // searches running (Check may run concurrently)
	gcBefore   int
)

// raiseGC sets GOGC to searchGCPercent while searches run, unless GOGC is
// set in the environment, and returns the function that restores it when
// the last one ends.
func raiseGC() func() {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	gcMu.Lock()
	if gcSearches == 0 {
		gcBefore = debug.SetGCPercent(searchGCPercent)
	}
	gcSearches++
	gcMu.Unlock()
	return func() {
		gcMu.Lock()
		if gcSearches--; gcSearches == 0 {
			debug.SetGCPercent(gcBefore)
		}
		gcMu.Unlock()
	}
}

// sampleHeap records the peak heap in use until the returned stop is called.
func (c *checker) sampleHeap() func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		// runtime/metrics, not ReadMemStats: no stop-the-world.
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(sample)
			c.mu.Lock()
			c.res.PeakHeap = max(c.res.PeakHeap, sample[0].Value.Uint64())
			c.mu.Unlock()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// materialise returns e's world: its own (copy mode; the caller must clone
// before changing it) or one replayed from fresh automata.
func (c *checker) materialise(e entry) *world {
	if e.w != nil {
		return e.w
	}
	w, err := replay(&c.cfg, e.p.events())
	if err != nil {
		panic("mc: replay of a visited path failed: " + err.Error())
	}
	return w
}

// successor applies ev to a copy of e's world (or to a fresh replay).
func (c *checker) successor(e entry, base *world, ev Event) *world {
	c.trans.Add(1)
	var w *world
	if c.cfg.Replay {
		var err error
		w, err = replay(&c.cfg, e.p.events())
		if err != nil {
			panic("mc: replay failed: " + err.Error())
		}
	} else {
		w = base.clone()
	}
	if err := w.apply(ev); err != nil {
		panic("mc: an enabled event failed: " + err.Error())
	}
	return w
}

// judge checks the always properties of a new state and notes the
// sometimes ones; it returns the violated property ("" when none).
func (c *checker) judge(w *world, p *path) string {
	if w.violation != "" {
		return w.violation
	}
	if w.returned {
		write, read := w.sometimes()
		if write || read {
			c.mu.Lock()
			if pr := c.some[SomeWrite]; write && !pr.Reached {
				pr.Reached, pr.Witness = true, p.events()
			}
			if pr := c.some[SomeRead]; read && !pr.Reached {
				pr.Reached, pr.Witness = true, p.events()
			}
			c.mu.Unlock()
		}
		if !c.cfg.NoHistoryCheck {
			if v := c.v.historyVerdict(w); v != "" {
				return v
			}
		}
	}
	return ""
}

// terminalCheck judges the bounded eventually property at a state where
// nothing is enabled. Crashes may leave a register protocol's request
// unanswered by design, so the property is judged only without them.
func (c *checker) terminalCheck(w *world) string {
	c.terminal.Add(1)
	if c.cfg.Crashes == 0 && !w.timersSpent() && !w.done() {
		return "eventually: " + EventuallyDone + ": the system is quiet with requests unanswered"
	}
	return ""
}

// report records a violation found at path p (key orders candidates of one
// level so that the reported one does not depend on scheduling).
func (c *checker) report(p *path, why string, key [2]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.res.Violations++
	if c.found == nil || key[0] < c.foundKey[0] || (key[0] == c.foundKey[0] && key[1] < c.foundKey[1]) {
		c.found = &Trace{cfg: c.cfg, Events: p.events(), Violation: why, Prefix: len(c.cfg.Model.Prefix)}
		c.foundKey = key
	}
	if !c.cfg.KeepGoing {
		c.stopped.Store(true)
	}
}

type cand struct {
	fp       uint64
	parent   int
	ev       int
	w        *world
	p        *path
	terminal bool
}

// bfs searches from root (the initial state, or the state after the
// model's prefix; the levels count events after it).
func (c *checker) bfs(root entry) {
	w0 := root.w
	visited := &fpSet{}
	visited.insert(w0.fingerprint())
	c.res.States = 1
	if c.cfg.Replay {
		root.w = nil
	}
	if w0.violation != "" {
		c.report(root.p, w0.violation, [2]int{})
		return
	}
	frontier := []entry{root}
	for depth := 0; depth < c.cfg.Depth && len(frontier) > 0 && !c.stopped.Load(); depth++ {
		if c.cfg.full(c.res.States) {
			break
		}
		// The level is expanded in chunks of parents, each merged in
		// (parent, event) order before the next: the same order as one
		// merge of the whole level, with at most a chunk's successors
		// held at once (a level may generate many times MaxStates).
		var next []entry
		full := false
		for lo := 0; lo < len(frontier) && !full && !c.stopped.Load(); lo += bfsChunk {
			chunk := frontier[lo:min(lo+bfsChunk, len(frontier))]
			full = c.expandChunk(chunk, lo, depth, visited, &next)
		}
		frontier = next
	}
	if !c.stopped.Load() {
		c.res.Frontier = len(frontier)
	}
}

// bfsChunk is the number of parents expanded between merges.
const bfsChunk = 256

// expandChunk expands the parents in chunk (frontier indexes from lo) on
// all workers, then merges their new successors into visited and next in
// (parent, event) order; it reports whether MaxStates was reached.
func (c *checker) expandChunk(chunk []entry, lo, depth int, visited *fpSet, next *[]entry) bool {
	parts := make([][]cand, c.cfg.Workers)
	var at atomic.Int64
	var wg sync.WaitGroup
	for k := 0; k < c.cfg.Workers; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			for {
				i := int(at.Add(1) - 1)
				if i >= len(chunk) || c.stopped.Load() {
					return
				}
				e := chunk[i]
				base := c.materialise(e)
				evs := base.enabled()
				if len(evs) == 0 {
					if why := c.terminalCheck(base); why != "" {
						c.report(e.p, why, [2]int{lo + i, -1})
					}
					continue
				}
				for j, ev := range evs {
					if c.cfg.Replay {
						ev.Desc = ""
					}
					w := c.successor(e, base, ev)
					fp := w.fingerprint()
					if visited.has(fp) {
						continue
					}
					parts[k] = append(parts[k], cand{fp: fp, parent: lo + i, ev: j, w: w, p: e.p.push(ev)})
				}
			}
		}(k)
	}
	wg.Wait()
	var all []cand
	for _, p := range parts {
		all = append(all, p...)
	}
	sort.Slice(all, func(a, b int) bool {
		if all[a].parent != all[b].parent {
			return all[a].parent < all[b].parent
		}
		return all[a].ev < all[b].ev
	})
	for _, cd := range all {
		if !visited.insert(cd.fp) {
			continue
		}
		c.res.States++
		c.res.Depth = depth + 1
		if why := c.judge(cd.w, cd.p); why != "" {
			c.report(cd.p, why, [2]int{cd.parent, cd.ev})
			if !c.cfg.KeepGoing {
				return true
			}
			continue
		}
		e := entry{w: cd.w, p: cd.p}
		if c.cfg.Replay {
			e.w = nil
		}
		*next = append(*next, e)
		if c.cfg.full(c.res.States) {
			return true
		}
	}
	return false
}

func (c *checker) dfs(root entry) {
	w0 := root.w
	type item struct {
		e     entry
		depth int
	}
	var (
		mu      sync.Mutex
		cond    = sync.NewCond(&mu)
		stack   = []item{{e: root}}
		busy    int
		visited       = &fpSet{}
		states  int64 = 1
		maxD    int
		front   int
	)
	visited.insert(w0.fingerprint())
	if c.cfg.Replay {
		stack[0].e.w = nil
	}
	if w0.violation != "" {
		c.report(root.p, w0.violation, [2]int{})
		return
	}
	var wg sync.WaitGroup
	for k := 0; k < c.cfg.Workers; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				for len(stack) == 0 && busy > 0 && !c.stopped.Load() {
					cond.Wait()
				}
				if len(stack) == 0 || c.stopped.Load() || c.cfg.full(states) {
					cond.Broadcast()
					mu.Unlock()
					return
				}
				it := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				busy++
				mu.Unlock()

				var succ []item
				base := c.materialise(it.e)
				evs := base.enabled()
				if len(evs) == 0 {
					if why := c.terminalCheck(base); why != "" {
						c.report(it.e.p, why, [2]int{it.depth, 0})
					}
				}
				if it.depth >= c.cfg.Depth {
					evs = nil
					mu.Lock()
					front++
					mu.Unlock()
				}
				for _, ev := range evs {
					w := c.successor(it.e, base, ev)
					fp := w.fingerprint()
					mu.Lock()
					seen := !visited.insert(fp)
					if !seen {
						states++
						maxD = max(maxD, it.depth+1)
					}
					mu.Unlock()
					if seen {
						continue
					}
					p := it.e.p.push(ev)
					if why := c.judge(w, p); why != "" {
						c.report(p, why, [2]int{it.depth + 1, 0})
						break
					}
					e := entry{w: w, p: p}
					if c.cfg.Replay {
						e.w = nil
					}
					succ = append(succ, item{e: e, depth: it.depth + 1})
				}
				mu.Lock()
				// Pushed in reverse so that the first enabled event is
				// explored first.
				for k := len(succ) - 1; k >= 0; k-- {
					stack = append(stack, succ[k])
				}
				busy--
				cond.Broadcast()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	c.res.States, c.res.Depth, c.res.Frontier = states, maxD, front
}
