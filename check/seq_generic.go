package check

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"time"

	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// The generic sequential-consistency search: any deterministic service,
// the service itself as its sequential specification (as generic.go does
// for linearizability).
//
// Sequential dispatches here when a namespace runs a service other than kv
// (the KV search of sequential.go keeps its constraint graph, interning and
// pruning, which know KV's operations). A configuration is the position of
// every process in its program, the pool of floating writes released and
// not yet applied, and each namespace's state, held as the service's
// Snapshot bytes. From a configuration the search
//
//   - applies at once, without branching, every process's next operation
//     that reads (svc.IsRead), whose guard holds (service.Ready) and whose
//     recorded reply the state gives, and releases every floating write a
//     process reaches into the pool. Both are exact: such a read changes no
//     state, so moving it earlier in any valid order keeps the order valid
//     (it is the next operation of its process); a released float may be
//     applied at any later point or never, which is the same choice made
//     later;
//   - otherwise branches on each process's next operation whose guard holds
//     and whose reply the state gives, and on each pooled float whose guard
//     holds (its reply is unknown), and recurses. A configuration explored
//     to the end is never explored again (a 128-bit hash of it is kept).
//
// A guarded operation (an Orca guard, a blocking pop) is placed only where
// its guard holds: the sequential specification blocks it elsewhere.
//
// Order of the branches: writes after which some process's next read is
// answered first, then in one of three orders (by invocation, by return,
// by process), restarting with the next order after a budget of
// configurations that doubles each round (as sequential.go's restarts).
// Configurations a run cut short are not remembered as dead. The order
// never prunes, so the search is complete: only Options.MaxStates and
// Options.Timeout stop it (verdict Unknown).
//
// Outcomes as in Sequential, except for errors: failed operations, unknown
// reads and reads answered by an error are dropped; a write of unknown
// outcome, or answered by a retryable error (TRYAGAIN, a timeout:
// synoderr), floats; a write answered by any other error is optional: it
// took effect in its place in its process's program, with that very reply
// (a service's own error: an Orca operation on an object not created yet),
// or not at all (a refusal). Bounds: without KV's graph every legal
// order is a branch; a history that is not sequentially consistent must be
// exhausted, which grows with the product of the processes' lengths. A few
// hundred operations of a handful of processes are decided in a second.

// gsOp is one operation of the generic search.
type gsOp struct {
	orig  int
	ns    int // namespace index
	op    service.Op
	okey  string // opKey of its input: the memo key
	res   history.Result
	read  bool
	float bool
	// opt: a completed write answered by a non-retryable error (a service
	// error, or a protocol's refusal): it took effect where its process
	// placed it, with exactly that reply, or not at all.
	opt  bool
	call int64
	ret  int64
	fi   int // float index (-1 if landing)
}

// gsSearch is one generic search.
type gsSearch struct {
	opt    Options
	svcs   []service.Service
	nsName []string
	procs  [][]gsOp
	ids    []int
	total  int
	floats []*gsOp

	pos    []int
	pool   []bool
	state  []string
	placed int

	dead     map[[2]uint64]struct{}
	states   int
	maxState int
	deadline time.Time
	cut      bool

	budget, runStates int
	restart           bool
	order             int

	best      int
	bestPos   []int
	bestState []string

	steps map[gsKey]gsStep
	ready map[gsKey]bool
}

type gsKey struct {
	ns    int
	state string
	op    string
}

type gsStep struct {
	res  history.Result
	next string
	ok   bool
}

// The branch orders of the generic search's restarts.
const (
	gsOrderCall = iota
	gsOrderReturn
	gsOrderProcess
	gsOrders
)

// sequentialGeneric checks h for sequential consistency over every
// namespace together, each by its service's own State.
func sequentialGeneric(h *history.History, opt Options, start time.Time) (*Report, error) {
	for ns, name := range opt.Services {
		svc, err := service.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("check: namespace %q: %w", ns, err)
		}
		if service.IsNondeterministic(svc) {
			return nil, fmt.Errorf("check: namespace %q: service %q is nondeterministic: no sequential specification", ns, name)
		}
	}
	r := &Report{opt: opt, Guarantee: GuaranteeSequential, spec: newSpec(opt), Partitions: 1}
	s, err := r.buildGeneric(h)
	if err != nil {
		return nil, err
	}
	s.maxState = opt.MaxStates
	if s.maxState == 0 {
		s.maxState = DefaultMaxStates
	}
	if opt.Timeout > 0 {
		s.deadline = start.Add(opt.Timeout)
	}
	ok := s.restarts()
	r.Elapsed = time.Since(start)
	r.verdict(ok, s.cut, s.states, s.maxState, s.total, len(s.procs), "(all objects)", func() string { return s.explain(h) })
	return r, nil
}

// buildGeneric classifies the operations (as buildSequential does) into
// per-process program orders.
func (r *Report) buildGeneric(h *history.History) (*gsSearch, error) {
	s := &gsSearch{opt: r.opt, dead: map[[2]uint64]struct{}{}, steps: map[gsKey]gsStep{}, ready: map[gsKey]bool{}}
	nsIdx := map[string]int{}
	byProc := map[int][]gsOp{}
	for i, op := range h.Ops {
		name := "kv"
		if n, ok := r.opt.Services[op.Namespace]; ok {
			name = n
		}
		svc, err := service.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("check: op %d: namespace %q: %w", i, op.Namespace, err)
		}
		if service.IsNondeterministic(svc) {
			return nil, fmt.Errorf("check: namespace %q: service %q is nondeterministic: no sequential specification", op.Namespace, name)
		}
		sop := op.ServiceOp()
		desc := fmt.Sprintf("op %d (%s in namespace %s)", i, sop, nsName(op.Namespace))
		read, drop, float, err := classify(op, svc, desc)
		if err != nil {
			return nil, err
		}
		if drop {
			r.Dropped++
			continue
		}
		opt := false
		if float && op.Outcome == history.OK && !synoderr.Parse(op.Result.Err).Kind.Retry() {
			float, opt = false, true // not TRYAGAIN or a timeout: it did not land later
		}
		ni, ok := nsIdx[op.Namespace]
		if !ok {
			ni = len(s.svcs)
			nsIdx[op.Namespace] = ni
			s.svcs = append(s.svcs, svc)
			s.nsName = append(s.nsName, nsName(op.Namespace))
		}
		g := gsOp{orig: i, ns: ni, op: sop, okey: opKey(input{kind: op.Kind, key: op.Key, args: op.Args}),
			res: op.Result, read: read, float: float, opt: opt, call: op.Call, ret: op.Return, fi: -1}
		if float {
			g.ret = math.MaxInt64
			r.MaybeApplied++
		}
		byProc[op.Process] = append(byProc[op.Process], g)
		r.Ops++
	}
	for p := range byProc {
		s.ids = append(s.ids, p)
	}
	slices.Sort(s.ids)
	for _, p := range s.ids {
		ops := byProc[p]
		slices.SortStableFunc(ops, func(a, b gsOp) int { return cmpInt64(a.call, b.call) })
		for j := 1; j < len(ops); j++ {
			prev := h.Ops[ops[j-1].orig]
			if prev.Outcome == history.OK && ops[j].call < prev.Return {
				return nil, fmt.Errorf("check: process %d is not sequential: op %d is called (%d) before op %d returns (%d)",
					p, ops[j].orig, ops[j].call, ops[j-1].orig, prev.Return)
			}
		}
		s.procs = append(s.procs, ops)
		s.total += len(ops)
	}
	for pi := range s.procs {
		for j := range s.procs[pi] {
			if o := &s.procs[pi][j]; o.float {
				o.fi = len(s.floats)
				s.floats = append(s.floats, o)
			}
		}
	}
	s.pos = make([]int, len(s.procs))
	s.pool = make([]bool, len(s.floats))
	s.state = make([]string, len(s.svcs))
	for i, svc := range s.svcs {
		s.state[i] = string(svc.NewState().Snapshot())
	}
	s.bestPos = slices.Clone(s.pos)
	s.bestState = slices.Clone(s.state)
	return s, nil
}

// apply runs o on state st of its namespace (memoised).
func (s *gsSearch) apply(st string, o *gsOp) gsStep {
	k := gsKey{ns: o.ns, state: st, op: o.okey}
	if v, ok := s.steps[k]; ok {
		return v
	}
	var v gsStep
	state := s.svcs[o.ns].NewState()
	if err := state.Restore([]byte(st)); err == nil {
		v = gsStep{res: history.FromResult(state.Apply(o.op)), next: string(state.Snapshot()), ok: true}
	}
	if len(s.steps) >= genMemoMax {
		clear(s.steps)
	}
	s.steps[k] = v
	return v
}

// isReady reports whether o's guard holds in state st (memoised).
func (s *gsSearch) isReady(st string, o *gsOp) bool {
	k := gsKey{ns: o.ns, state: st, op: o.okey}
	if v, ok := s.ready[k]; ok {
		return v
	}
	state := s.svcs[o.ns].NewState()
	v := state.Restore([]byte(st)) == nil && service.Ready(state, o.op)
	if len(s.ready) >= genMemoMax {
		clear(s.ready)
	}
	s.ready[k] = v
	return v
}

// fits reports whether o may be placed now (its guard holds and, unless it
// floats, the state gives its recorded reply), and the state after it.
func (s *gsSearch) fits(o *gsOp) (string, bool) {
	st := s.state[o.ns]
	if !s.isReady(st, o) {
		return "", false
	}
	v := s.apply(st, o)
	if !v.ok || (!o.float && !v.res.Equal(o.res)) {
		return "", false
	}
	return v.next, true
}

// gsUndo is one entry of the undo log.
type gsUndo struct {
	proc  int // process advanced (-1: none)
	float int // float applied from the pool (-1: none)
	ns    int
	state string
}

// settle applies the greedy steps (reads that fit, floats reached) and
// logs them.
func (s *gsSearch) settle(log []gsUndo) []gsUndo {
	for changed := true; changed; {
		changed = false
		for p, ops := range s.procs {
			for s.pos[p] < len(ops) {
				o := &ops[s.pos[p]]
				if o.float {
					s.pool[o.fi] = true
					s.pos[p]++
					s.placed++
					log = append(log, gsUndo{proc: p, float: -1, ns: -1})
					changed = true
					continue
				}
				next, fits := s.fits(o)
				var place bool
				switch {
				case o.opt:
					// It cannot take effect here with its reply (so it
					// did not), or it changes nothing: placed.
					place = !fits || next == s.state[o.ns]
				case o.read:
					place = fits && next == s.state[o.ns]
				}
				if !place {
					break
				}
				s.pos[p]++
				s.placed++
				log = append(log, gsUndo{proc: p, float: -1, ns: -1})
				changed = true
			}
		}
	}
	return log
}

func (s *gsSearch) undo(log []gsUndo) {
	for i := len(log) - 1; i >= 0; i-- {
		u := log[i]
		if u.ns >= 0 {
			s.state[u.ns] = u.state
		}
		if u.proc >= 0 {
			s.pos[u.proc]--
			s.placed--
			if o := &s.procs[u.proc][s.pos[u.proc]]; o.float && u.float < 0 {
				s.pool[o.fi] = false
			}
		}
		if u.float >= 0 {
			s.pool[u.float] = true
		}
	}
}

func (s *gsSearch) hash() [2]uint64 {
	h := fnv.New128a()
	var b [binary.MaxVarintLen64]byte
	for _, p := range s.pos {
		h.Write(b[:binary.PutUvarint(b[:], uint64(p))])
	}
	for _, f := range s.pool {
		if f {
			h.Write([]byte{1})
		} else {
			h.Write([]byte{0})
		}
	}
	for _, st := range s.state {
		h.Write(b[:binary.PutUvarint(b[:], uint64(len(st)))])
		h.Write([]byte(st))
	}
	var sum [16]byte
	h.Sum(sum[:0])
	return [2]uint64{binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:])}
}

// gsCand is one branch: a process's next operation or a pooled float.
type gsCand struct {
	proc, float int
	o           *gsOp
	next        string
	awaited     bool
	destroys    bool
}

// gsLookahead is how far into each process's program the order looks for
// reads a write would stop answering.
const gsLookahead = 8

// restarts runs the search with a doubling budget, cycling through the
// branch orders, until it decides or a global bound stops it.
func (s *gsSearch) restarts() bool {
	s.budget = scFirstBudget
	for round := 0; ; round++ {
		s.order = round % gsOrders
		s.runStates, s.restart = 0, false
		if s.dfs() {
			return true
		}
		if !s.restart || s.cut {
			return false
		}
		if s.order == gsOrders-1 {
			s.budget *= 2
		}
	}
}

// dfs searches from the current configuration. It returns true when a
// full order exists; false with s.restart or s.cut set when it stopped
// early.
func (s *gsSearch) dfs() bool {
	log := s.settle(nil)
	defer s.undo(log)
	if s.placed > s.best {
		s.best = s.placed
		copy(s.bestPos, s.pos)
		copy(s.bestState, s.state)
	}
	if s.placed == s.total {
		return true
	}
	key := s.hash()
	if _, ok := s.dead[key]; ok {
		return false
	}
	s.states++
	s.runStates++
	if s.states >= s.maxState || (!s.deadline.IsZero() && s.states%256 == 0 && time.Now().After(s.deadline)) {
		s.cut = true
		return false
	}
	if s.runStates >= s.budget {
		s.restart = true
		return false
	}
	cands := s.candidates()
	stopped := false
	for _, c := range cands {
		u := gsUndo{proc: c.proc, float: c.float, ns: c.o.ns, state: s.state[c.o.ns]}
		s.state[c.o.ns] = c.next
		if c.proc >= 0 {
			s.pos[c.proc]++
			s.placed++
		} else {
			s.pool[c.float] = false
		}
		ok := s.dfs()
		s.undo([]gsUndo{u})
		if ok {
			return true
		}
		if s.cut || s.restart {
			stopped = true
			break
		}
	}
	if !stopped {
		s.dead[key] = struct{}{}
	}
	return false
}

// candidates lists the branches of the current configuration in the
// current order, awaited ones first.
func (s *gsSearch) candidates() []gsCand {
	var out []gsCand
	for p, ops := range s.procs {
		if s.pos[p] >= len(ops) {
			continue
		}
		o := &ops[s.pos[p]]
		if next, ok := s.fits(o); ok {
			out = append(out, gsCand{proc: p, float: -1, o: o, next: next})
			if o.opt { // or it did not take effect
				out = append(out, gsCand{proc: p, float: -1, o: o, next: s.state[o.ns]})
			}
		}
	}
	for fi, o := range s.floats {
		if !s.pool[fi] {
			continue
		}
		if next, ok := s.fits(o); ok && next != s.state[o.ns] {
			out = append(out, gsCand{proc: -1, float: fi, o: o, next: next})
		}
	}
	// Awaited: after it, some other process's next operation, stuck now,
	// gets its recorded reply.
	for i := range out {
		c := &out[i]
		saved := s.state[c.o.ns]
		s.state[c.o.ns] = c.next
		for p, ops := range s.procs {
			if s.pos[p] < len(ops) && p != c.proc {
				if o := &ops[s.pos[p]]; !o.float && o.ns == c.o.ns {
					if _, ok := s.fits(o); ok {
						c.awaited = true
						break
					}
				}
			}
		}
		s.state[c.o.ns] = saved
	}
	// Destroys: after it, an operation some other process will soon reach
	// (within gsLookahead of its next one), which the state answers as
	// recorded now, is no longer answered so (a stale read, or an increment
	// whose reply names this state, still expects it).
	for i := range out {
		c := &out[i]
		if c.awaited {
			continue
		}
		saved := s.state[c.o.ns]
		for p, ops := range s.procs {
			if p == c.proc {
				continue
			}
			for j := s.pos[p]; j < len(ops) && j < s.pos[p]+gsLookahead && !c.destroys; j++ {
				o := &ops[j]
				if o.float || o.ns != c.o.ns {
					continue
				}
				if _, now := s.fits(o); !now {
					continue
				}
				s.state[c.o.ns] = c.next
				if _, after := s.fits(o); !after {
					c.destroys = true
				}
				s.state[c.o.ns] = saved
			}
			if c.destroys {
				break
			}
		}
	}
	slices.SortStableFunc(out, func(a, b gsCand) int {
		if a.awaited != b.awaited {
			if a.awaited {
				return -1
			}
			return 1
		}
		if af, bf := a.proc < 0, b.proc < 0; af != bf { // a float lands when awaited, else last
			if bf {
				return -1
			}
			return 1
		}
		if a.destroys != b.destroys {
			if b.destroys {
				return -1
			}
			return 1
		}
		switch s.order {
		case gsOrderCall:
			return cmpInt64(a.o.call, b.o.call)
		case gsOrderReturn:
			return cmpInt64(a.o.ret, b.o.ret)
		}
		return 0
	})
	return out
}

// explain describes the deepest configuration reached.
func (s *gsSearch) explain(h *history.History) string {
	var stuck []string
	for p, ops := range s.procs {
		if s.bestPos[p] >= len(ops) {
			continue
		}
		o := ops[s.bestPos[p]]
		op := h.Ops[o.orig]
		st := s.svcs[o.ns].NewState()
		got := "(state does not restore)"
		if st.Restore([]byte(s.bestState[o.ns])) == nil {
			switch {
			case !service.Ready(st, o.op):
				got = "its guard does not hold"
			default:
				got = "the state answers " + describeResult(history.FromResult(st.Apply(o.op)))
			}
		}
		stuck = append(stuck, fmt.Sprintf("process %d's next op %d [%d..%d] %s in %s recorded %s: %s",
			s.ids[p], o.orig, op.Call, op.Return, o.op, s.nsName[o.ns], describeResult(o.res), got))
	}
	return explainStuck(s.states, s.best, s.total, stuck)
}
