package check

// Sequential consistency (Lamport 1979): a history is sequentially consistent
// if there is one total order of its operations that respects every process's
// program order and in which every operation returns what the sequential
// specification says, given the operations before it. Unlike linearizability
// it ignores real time across processes, and it is NOT local: a history whose
// every key is sequentially consistent on its own may have no single order
// for all keys together (the IRIW pattern: two readers see two independent
// writes in opposite orders). The checker therefore searches one order for
// the whole history, never key by key.
//
// # Algorithm
//
// 1. Constraint graph (seq_graph.go; histories of GET, EXISTS, SET without
// NX/XX and DEL, up to scMaxGraph operations). Nodes are the operations that
// take effect in every valid order (every non-floating one, and a floating
// SET whose value some read returns). Edges are orders every valid total
// order must obey: program order; reads-from (a value written by exactly one
// SET precedes every read returning it); coherence, derived to a fixpoint
// over the transitive closure (for a read r of w's value and another landing
// write w' of the key: w' before r forces w' before w, w before w' forces r
// before w'); and absence/presence (a GET -> nil or EXISTS -> 0 after a
// landing SET needs a DEL between them; EXISTS -> 1 after a landing DEL needs
// a SET between them: with one candidate left it is ordered between, with
// none the read is impossible). A cycle, a read of a value nobody wrote or an
// impossible read decides Illegal at once, with the operations named. Every
// edge holds in every valid order, so this never rejects a valid history.
// The closure costs n²/8 bytes: 125 KB for 1,000 operations.
//
// 2. Search. A configuration is the position of every process in its
// program (ops of one process are sequential: sorted by Call), the whole KV
// state (every key of every namespace), and the set of "floating" writes
// (below) released but not yet applied. From a configuration the search
// applies the next operation of some process whose graph predecessors are
// all placed, if the specification allows it, and recurses; a configuration
// already explored is never explored again (memoised by positions, floating
// set and a 128-bit hash of the state). Reductions that keep it small and
// are exact:
//
//   - An operation whose result matches the current state and which leaves the
//     state unchanged (a read, a DEL of an absent key, ...) is applied at once
//     without branching: moving such an operation earlier in any valid order
//     keeps the order valid.
//   - A floating write is released into the pool as soon as its process
//     reaches it (releasing changes nothing; applying from the pool right away
//     is the same as applying it in program order); it is applied only when
//     some process's next operation observes it (see observedNext).
//   - Overwriting a value an unplaced read still expects, when no remaining
//     SET writes it again, is a dead end.
//
// Candidate writes are tried awaited first (a process's next read returns
// the value), then those that destroy no expected value, then in one of
// three orders: by deadline (the earliest Return of any operation the graph
// says must follow: real histories are nearly linearizable, so a write
// usually took effect before its successors returned), by invocation, or by
// deadline counting writes that restore an awaited absence or presence as
// awaited. The order never prunes, only guides.
//
// 3. Restarts. A run that explores its budget of configurations (scFirstBudget,
// doubled after each round of the three orders) stops, and the next run
// starts with the next order. Configurations a run explored completely stay
// in the memo (they are dead whatever the order); those it cut short are
// removed from it. The last run is bounded only by Options.MaxStates and
// Options.Timeout, so the search stays complete.
//
// # Outcomes
//
// As in Linearizable: failed operations, unknown reads and reads answered by
// an error are dropped. A write of unknown outcome (or answered by an error)
// floats: it may take effect anywhere after the operations that precede it in
// its process's program order — also after that process's later operations,
// since a timed-out write can still land — or never. Operations the service
// refuses are dropped unless the history claims they succeeded (an error).
//
// # Bounds: when it must still give up
//
// Deciding sequential consistency is NP-complete (Gibbons and Korach), even
// with every read's writer known, so no bound covers every history: when
// Options.MaxStates (DefaultMaxStates if zero) or Options.Timeout is reached
// first, the verdict is Unknown, and the Detail says which bound stopped it
// and describes the deepest configuration reached (the longest valid prefix
// and each process's next operation). The search is hardest on histories
// whose values repeat (no reads-from edges), that use APPEND/INCR/CAS or SET
// NX/XX (no graph at all), or with many floating DELs and SETs of values
// no read returns, which can land anywhere. Only the KV service has a
// sequential model here (Options.Services naming another service is an
// error).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/synod-dev/synod/history"
)

// DefaultMaxStates bounds the configurations Sequential explores when
// Options.MaxStates is zero.
const DefaultMaxStates = 5_000_000

// scFirstBudget is the configurations the first run of the search may
// explore before it restarts (each later run may explore twice as many).
const scFirstBudget = 1 << 17

// The orders the search tries writes in (after writes that a process's
// next read waits for, and before writes that destroy a value an unplaced
// read still expects): by deadline (the earliest return of an operation
// that must follow); by invocation; by deadline, with writes that restore
// a key's absence or presence a next read waits for counted as awaited.
const (
	scOrderDue = iota
	scOrderCall
	scOrderAbsence
	scOrders
)

// scOp is one checkable operation of the sequential-consistency search.
type scOp struct {
	proc  int    // index into the process list
	key   string // namespace/key: the object it touches
	in    input
	res   history.Result
	float bool // unknown outcome: may apply anywhere later, or never
	read  bool // get or exists
	orig  int  // index in History.Ops
	call  int64
	ret   int64 // Return, or math.MaxInt64 for a floating write
	id    int   // node of the constraint graph (seq_graph.go)
	due   int64 // the earliest return of an operation that must follow it (or its own ret)
}

type scKV struct {
	key string
	s   kvState
}

// scSearch is the state of one search.
type scSearch struct {
	opt   Options
	procs [][]scOp
	ids   []int // process ids (history.Op.Process) by index
	total int

	pos    []int
	pool   []bool // by float index: released, not yet applied
	floats []*scOp
	fidx   map[*scOp]int
	kv     map[string]kvState
	h1, h2 uint64
	placed int

	// Pruning (register operations only): unplaced sets producing a
	// (key, value), and unplaced reads expecting one.
	prune               bool
	prodLeft, readsLeft map[string]int

	seen     map[string]struct{}
	states   int
	maxState int
	deadline time.Time
	cut      bool // a bound stopped the search

	// Constraint graph (seq_graph.go): successors and unplaced
	// predecessors by operation id.
	graph bool
	gnode []bool
	gsucc [][]int32
	gpred []int32

	// Restarts: the current run's budget and count, whether the budget
	// (not a global bound) cut it, and whether it shuffles candidates.
	budget, runStates int
	restart           bool
	order             int // scOrderDue, ...

	best     int
	bestPos  []int
	bestKV   map[string]kvState
	bestPool []bool
	keyBuf   []byte
}

// Sequential checks h for sequential consistency over all its KV keys
// together. It returns an error only for a malformed history or bad options;
// a history that is not sequentially consistent is a Report with Result
// Illegal.
func Sequential(h *history.History, opt Options) (*Report, error) {
	if h == nil {
		return nil, errors.New("check: nil history")
	}
	for ns, svc := range opt.Services {
		if svc != "kv" {
			return nil, fmt.Errorf("check: namespace %q: no sequential-consistency model for service %q (have kv)", ns, svc)
		}
	}
	start := time.Now()
	r := &Report{opt: opt, Model: ModelSequential, model: newModel(opt), Partitions: 1}
	s, err := r.buildSequential(h)
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
	if v := s.buildGraph(h); v != "" {
		r.Elapsed = time.Since(start)
		r.Result = Illegal
		r.FailedPartition = "(all keys)"
		r.FailedPartitions = []string{r.FailedPartition}
		r.Detail = "no sequential order exists: " + v
		return r, nil
	}
	ok := s.restarts()
	r.Elapsed = time.Since(start)
	r.States = s.states
	switch {
	case ok:
		r.Result = Ok
		r.Detail = fmt.Sprintf("a sequential order of all %d operations of %d processes exists (%d configurations explored)",
			s.total, len(s.procs), s.states)
	case s.cut:
		r.Result = Unknown
		why := fmt.Sprintf("the time limit (%v)", opt.Timeout)
		if s.states >= s.maxState {
			why = fmt.Sprintf("the state limit (%d configurations)", s.maxState)
		}
		r.Detail = fmt.Sprintf("%s passed before the search finished; no order was found so far; %s",
			why, s.explain(h))
	default:
		r.Result = Illegal
		r.FailedPartition = "(all keys)"
		r.FailedPartitions = []string{r.FailedPartition}
		r.Detail = "no sequential order exists: " + s.explain(h)
	}
	return r, nil
}

// buildSequential classifies operations (as build does) into per-process
// program orders.
func (r *Report) buildSequential(h *history.History) (*scSearch, error) {
	s := &scSearch{opt: r.opt, kv: map[string]kvState{}, seen: map[string]struct{}{}, fidx: map[*scOp]int{}}
	byProc := map[int][]scOp{}
	for i, op := range h.Ops {
		_, svc, err := serviceOf(r.opt, op.Namespace)
		if err != nil {
			return nil, fmt.Errorf("check: op %d: %w", i, err)
		}
		sop := op.ServiceOp()
		desc := fmt.Sprintf("op %d (%s in namespace %s)", i, sop, nsName(op.Namespace))
		switch op.Result.Type {
		case "nil", "ok", "bytes", "int", "err":
		default:
			if op.Outcome == history.OK {
				return nil, fmt.Errorf("check: %s: bad result type %q", desc, op.Result.Type)
			}
		}
		if op.Outcome == history.OK && op.Return < op.Call {
			return nil, fmt.Errorf("check: %s returns (%d) before it is called (%d)", desc, op.Return, op.Call)
		}
		okReply := op.Outcome == history.OK && op.Result.Type != "err"
		if err := svc.Validate(sop); err != nil {
			if okReply {
				return nil, fmt.Errorf("check: %s: the service refuses it (%v) but the history records reply %s",
					desc, err, describeResult(op.Result))
			}
			r.Dropped++
			continue
		}
		read := svc.IsRead(sop)
		float := false
		switch op.Outcome {
		case history.Failed:
			r.Dropped++
			continue
		case history.Unknown:
			if read {
				r.Dropped++
				continue
			}
			float = true
		case history.OK:
			if !okReply {
				if read {
					r.Dropped++
					continue
				}
				float = true
			}
		default:
			return nil, fmt.Errorf("check: %s: bad outcome %q", desc, op.Outcome)
		}
		c := scOp{key: nsName(op.Namespace) + "/" + op.Key, res: op.Result, float: float, read: read, orig: i, call: op.Call,
			in: input{service: "kv", kind: op.Kind, key: op.Key, args: op.Args}}
		c.ret = op.Return
		if float {
			c.ret = math.MaxInt64
			r.MaybeApplied++
		}
		c.due = c.ret
		byProc[op.Process] = append(byProc[op.Process], c)
		r.Ops++
	}
	for p := range byProc {
		s.ids = append(s.ids, p)
	}
	sort.Ints(s.ids)
	for pi, p := range s.ids {
		ops := byProc[p]
		sort.SliceStable(ops, func(a, b int) bool { return ops[a].call < ops[b].call })
		for j := range ops {
			ops[j].proc = pi
			if j > 0 {
				prev := h.Ops[ops[j-1].orig]
				if prev.Outcome == history.OK && ops[j].call < prev.Return {
					return nil, fmt.Errorf("check: process %d is not sequential: op %d is called (%d) before op %d returns (%d)",
						p, ops[j].orig, ops[j].call, ops[j-1].orig, prev.Return)
				}
			}
		}
		s.procs = append(s.procs, ops)
		s.total += len(ops)
	}
	for pi := range s.procs {
		for j := range s.procs[pi] {
			if o := &s.procs[pi][j]; o.float {
				s.fidx[o] = len(s.floats)
				s.floats = append(s.floats, o)
			}
		}
	}
	s.pos = make([]int, len(s.procs))
	s.pool = make([]bool, len(s.floats))
	s.abstractUnread()
	s.prune = true
	for _, ops := range s.procs {
		for _, o := range ops {
			switch o.in.kind {
			case "get", "exists", "set", "del":
			default:
				s.prune = false // other operations can produce values too
			}
		}
	}
	if s.prune {
		s.prodLeft, s.readsLeft = map[string]int{}, map[string]int{}
		for _, ops := range s.procs {
			for i := range ops {
				o := &ops[i]
				if o.in.kind == "set" {
					s.prodLeft[pair(o.key, o.in.args[0])]++
				}
				s.readPlaced(o, +1)
			}
		}
	}
	return s, nil
}

// unreadValue stands for every written value that no read returns.
const unreadValue = "\x00unread"

// abstractUnread replaces the value of every set whose value no get returns
// by one placeholder. This is exact: such a value is only ever observed as
// "present" (by exists, or a DEL count), so all of them are interchangeable,
// and the search then merges states that differ only in unread values.
func (s *scSearch) abstractUnread() {
	read := map[string]bool{}
	for _, ops := range s.procs {
		for _, o := range ops {
			if o.in.kind == "get" && o.res.Type == "bytes" {
				read[pair(o.key, o.res.Bytes)] = true
			}
		}
	}
	for pi := range s.procs {
		for j := range s.procs[pi] {
			o := &s.procs[pi][j]
			if o.in.kind == "set" && !read[pair(o.key, o.in.args[0])] {
				args := append([]string{unreadValue}, o.in.args[1:]...)
				o.in.args = args
			}
		}
	}
}

// keyHash hashes one key's state; the state hash is the XOR over keys, so it
// is updated in O(1) per write. Absent keys hash to 0 (an absent key and a
// deleted one are the same state).
func keyHash(seed byte, key string, st kvState) uint64 {
	if !st.present {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte{seed})
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(st.value))
	return h.Sum64()
}

func (s *scSearch) set(key string, st kvState) {
	old := s.kv[key]
	s.h1 ^= keyHash(1, key, old) ^ keyHash(1, key, st)
	s.h2 ^= keyHash(2, key, old) ^ keyHash(2, key, st)
	if st.present {
		s.kv[key] = st
	} else {
		delete(s.kv, key)
	}
}

// try applies o to the current state. It reports whether the result is
// allowed, and whether the state changed (with the old state for undo).
func (s *scSearch) try(o *scOp) (ok, changed bool, old kvState) {
	old = s.kv[o.key]
	want, next := applyKV(old, o.in)
	if !o.float && !(o.in.kind == "del" && s.opt.IgnoreDelCount) && !want.Equal(o.res) {
		return false, false, old
	}
	return true, next != old, old
}

// undoEntry reverses one step of the search.
type undoEntry struct {
	proc  int // process advanced, or -1
	float int // float index pooled (proc >= 0) or applied from the pool (proc < 0), or -1
	key   string
	old   kvState
	set   bool // the state of key was changed
	read  *scOp
}

func (s *scSearch) undo(log []undoEntry) {
	for i := len(log) - 1; i >= 0; i-- {
		u := log[i]
		if u.read != nil {
			s.readPlaced(u.read, +1)
			s.mark(u.read, +1)
		}
		if u.set {
			s.set(u.key, u.old)
		}
		switch {
		case u.proc >= 0:
			s.pos[u.proc]--
			s.placed--
			if u.float >= 0 {
				s.pool[u.float] = false
			}
		case u.float >= 0:
			s.pool[u.float] = true
		}
	}
}

// closure applies, without branching, every read that can go next (a read
// never changes the state, wherever it is placed), and releases floating
// writes into the pool.
func (s *scSearch) closure(log []undoEntry) []undoEntry {
	for progress := true; progress; {
		progress = false
		for p, ops := range s.procs {
			for s.pos[p] < len(ops) {
				o := &ops[s.pos[p]]
				if o.float {
					f := s.fidx[o]
					s.pool[f] = true
					s.pos[p]++
					s.placed++
					log = append(log, undoEntry{proc: p, float: f})
					progress = true
					continue
				}
				if !o.read || !s.ready(o) {
					break
				}
				if ok, _, _ := s.try(o); !ok {
					break
				}
				s.pos[p]++
				s.placed++
				s.readPlaced(o, -1)
				s.mark(o, -1)
				log = append(log, undoEntry{proc: p, float: -1, read: o})
				progress = true
			}
		}
	}
	return log
}

func (s *scSearch) memoKey() string {
	b := s.keyBuf[:0]
	for _, p := range s.pos {
		b = binary.AppendUvarint(b, uint64(p))
	}
	for i, in := range s.pool {
		if in {
			b = binary.AppendUvarint(b, uint64(i))
		}
	}
	b = append(b, 0xff)
	b = binary.LittleEndian.AppendUint64(b, s.h1)
	b = binary.LittleEndian.AppendUint64(b, s.h2)
	s.keyBuf = b
	return string(b)
}

func (s *scSearch) record() {
	if s.placed <= s.best && s.bestPos != nil {
		return
	}
	s.best = s.placed
	s.bestPos = append(s.bestPos[:0], s.pos...)
	s.bestPool = append(s.bestPool[:0], s.pool...)
	s.bestKV = make(map[string]kvState, len(s.kv))
	for k, v := range s.kv {
		s.bestKV[k] = v
	}
}

// pair names a (key, value) for the pruning counters.
func pair(key, value string) string { return key + "\x00" + value }

// readPlaced adjusts the count of unplaced reads expecting o's value.
func (s *scSearch) readPlaced(o *scOp, d int) {
	if s.prune && o.in.kind == "get" && o.res.Type == "bytes" {
		s.readsLeft[pair(o.key, o.res.Bytes)] += d
	}
}

// applyWrite applies o and reports whether the configuration can still
// extend to a full order: with register operations and a value that no
// remaining write can produce again, overwriting it while a read still
// expects it is a dead end.
func (s *scSearch) applyWrite(o *scOp) (old kvState, alive bool) {
	old = s.kv[o.key]
	_, next := applyKV(old, o.in)
	if s.prune && o.in.kind == "set" {
		s.prodLeft[pair(o.key, o.in.args[0])]--
	}
	s.set(o.key, next)
	if s.prune && old.present && next != old {
		pk := pair(o.key, old.value)
		if s.readsLeft[pk] > 0 && s.prodLeft[pk] == 0 {
			return old, false
		}
	}
	return old, true
}

func (s *scSearch) unapplyWrite(o *scOp, old kvState) {
	s.set(o.key, old)
	if s.prune && o.in.kind == "set" {
		s.prodLeft[pair(o.key, o.in.args[0])]++
	}
}

// cand is one branch: the next write of process p, or pooled float f.
type cand struct {
	p, f    int
	o       *scOp
	awaited bool
	harmful bool // overwrites a value some unplaced read still expects
}

// candidates lists the branches of the current configuration, the most
// promising first: writes that produce a value some blocked read waits for,
// then writes that destroy no value an unplaced read still expects, then by
// invocation time (real histories are nearly linearizable, so real
// time is a good guide; it only orders the search, never prunes it).
func (s *scSearch) candidates() []cand {
	// What the processes' next reads wait for: a value, or (in the order
	// that looks at absence) the key's absence or presence.
	awaited, absent, present := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for p, ops := range s.procs {
		if s.pos[p] < len(ops) {
			if o := &ops[s.pos[p]]; o.read {
				switch {
				case o.res.Type == "bytes":
					awaited[pair(o.key, o.res.Bytes)] = true
				case s.order != scOrderAbsence:
				case o.res.Type == "nil" || o.res.Type == "int" && o.res.Int == 0:
					absent[o.key] = true
				case o.res.Type == "int":
					present[o.key] = true
				}
			}
		}
	}
	var cs []cand
	produces := func(o *scOp) bool {
		_, isSet := s.kv[o.key]
		switch o.in.kind {
		case "set":
			return awaited[pair(o.key, o.in.args[0])] || present[o.key] && !isSet
		case "del":
			return absent[o.key] && isSet
		}
		return false
	}
	harmful := func(o *scOp) bool {
		cur, ok := s.kv[o.key]
		return ok && s.prune && s.readsLeft[pair(o.key, cur.value)] > 0
	}
	for p, ops := range s.procs {
		if s.pos[p] < len(ops) {
			if o := &ops[s.pos[p]]; !o.read {
				cs = append(cs, cand{p: p, f: -1, o: o, awaited: produces(o), harmful: harmful(o)})
			}
		}
	}
	tried := map[string]bool{}
	for f, in := range s.pool {
		if in {
			o := s.floats[f]
			// Pooled writes with the same effect are interchangeable: try one.
			eff := o.in.kind + "\x00" + o.key + "\x00" + strings.Join(o.in.args, "\x00")
			if tried[eff] || (s.prune && !s.observedNext(o)) {
				continue
			}
			tried[eff] = true
			cs = append(cs, cand{p: -1, f: f, o: o, awaited: produces(o), harmful: harmful(o)})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].awaited != cs[j].awaited {
			return cs[i].awaited
		}
		if cs[i].harmful != cs[j].harmful {
			return !cs[i].harmful
		}
		if s.order == scOrderCall {
			return cs[i].o.call < cs[j].o.call
		}
		return cs[i].o.due < cs[j].o.due
	})
	return cs
}

// observedNext reports whether applying the floating write o right now
// would let some process's next operation, one whose result depends on o's
// key (a read, a counted DEL, SET NX/XX), succeed. Only such floats are
// worth applying (register operations): in any valid order a floating write
// can be moved later up to the first operation that observes it, and one
// that is overwritten before anything observes it can be dropped.
func (s *scSearch) observedNext(o *scOp) bool {
	old := s.kv[o.key]
	_, next := applyKV(old, o.in)
	for p, ops := range s.procs {
		if s.pos[p] >= len(ops) {
			continue
		}
		n := &ops[s.pos[p]]
		if n.key != o.key {
			continue
		}
		observer := n.read || (n.in.kind == "del" && !s.opt.IgnoreDelCount) || (n.in.kind == "set" && len(n.in.args) == 2)
		if !observer {
			continue
		}
		want, _ := applyKV(next, n.in)
		if want.Equal(n.res) {
			return true
		}
	}
	return false
}

// dfs reports whether the current configuration extends to a full order.
func (s *scSearch) dfs() bool {
	log := s.closure(nil)
	defer s.undo(log)
	s.record()
	if s.placed == s.total {
		return true
	}
	if s.cut {
		return false
	}
	k := s.memoKey()
	if _, dup := s.seen[k]; dup {
		return false
	}
	s.seen[k] = struct{}{}
	s.states++
	s.runStates++
	if s.states >= s.maxState || (!s.deadline.IsZero() && s.states%256 == 0 && time.Now().After(s.deadline)) {
		s.cut = true
		delete(s.seen, k)
		return false
	}
	if s.budget > 0 && s.runStates >= s.budget {
		s.cut, s.restart = true, true
		delete(s.seen, k)
		return false
	}
	defer func() {
		if s.cut {
			delete(s.seen, k) // explored only in part: not known dead
		}
	}()
	for _, c := range s.candidates() {
		o := c.o
		if !s.ready(o) {
			continue
		}
		if c.p >= 0 {
			// The next operation of process c.p: its reply must match.
			if ok, _, _ := s.try(o); !ok {
				continue
			}
		} else if _, next := applyKV(s.kv[o.key], o.in); next == s.kv[o.key] {
			continue // a float with no effect now: applying it cannot help
		}
		old, alive := s.applyWrite(o)
		s.mark(o, -1)
		if c.p >= 0 {
			s.pos[c.p]++
			s.placed++
		} else {
			s.pool[c.f] = false
		}
		found := alive && s.dfs()
		if c.p >= 0 {
			s.pos[c.p]--
			s.placed--
		} else {
			s.pool[c.f] = true
		}
		s.mark(o, +1)
		s.unapplyWrite(o, old)
		if found {
			return true
		}
		if s.cut {
			return false
		}
	}
	return false
}

// explain describes the deepest configuration the search reached.
func (s *scSearch) explain(h *history.History) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d configurations explored; the longest valid prefix places %d of %d operations; there, ",
		s.states, s.best, s.total)
	var stuck []string
	for p, ops := range s.procs {
		if s.bestPos[p] >= len(ops) {
			continue
		}
		o := ops[s.bestPos[p]]
		op := h.Ops[o.orig]
		st := s.bestKV[o.key]
		cur := "(absent)"
		if st.present {
			cur = quote(st.value)
		}
		if st.present && st.value == unreadValue {
			cur = "(a value no read returns)"
		}
		in := o.in
		in.args = op.Args
		stuck = append(stuck, fmt.Sprintf("process %d's next op %d [%d..%d] %s finds %s = %s",
			s.ids[p], o.orig, op.Call, op.Return, describeOp(in, output{res: o.res}, s.opt), quote(o.in.key), cur))
	}
	const show = 6
	if len(stuck) > show {
		stuck = append(stuck[:show], fmt.Sprintf("and %d more processes", len(stuck)-show))
	}
	b.WriteString(strings.Join(stuck, "; "))
	b.WriteString(".")
	return b.String()
}

func (r *Report) sequentialString() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d operations (%d maybe applied, %d dropped), checked for sequential consistency in %v: ",
		r.Ops, r.MaybeApplied, r.Dropped, r.Elapsed.Round(time.Millisecond))
	switch r.Result {
	case Ok:
		b.WriteString("sequentially consistent.")
	case Illegal:
		fmt.Fprintf(&b, "NOT sequentially consistent: %s", r.Detail)
	case Unknown:
		fmt.Fprintf(&b, "undecided: %s.", r.Detail)
	}
	return b.String()
}

// restarts runs the search with growing budgets (see "Restarts" above): the
// runs take the candidate orders in turn, and the budget doubles after
// each round of orders. Configurations a run explored completely stay known dead.
func (s *scSearch) restarts() bool {
	budget := scFirstBudget
	for run := 0; ; run++ {
		s.cut, s.restart, s.runStates, s.budget, s.order = false, false, 0, budget, run%scOrders
		if s.dfs() {
			return true
		}
		if !s.restart {
			return false // decided, or a global bound stopped it
		}
		if s.order == scOrders-1 {
			budget *= 2
		}
	}
}
