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
// already explored is never explored again. Reductions that keep it small
// and are exact:
//
//   - An operation whose result matches the current state and which leaves the
//     state unchanged (a read) is applied at once without branching: moving
//     such an operation earlier in any valid order keeps the order valid.
//   - A floating write is released into the pool as soon as its process
//     reaches it (releasing changes nothing; applying from the pool right away
//     is the same as applying it in program order); it is applied only when
//     some process's next operation observes it (see observedNext).
//
// Representation. Keys are interned to indices and values to ids (one id
// per key and value; 0 is "absent"), so the state is a []int32 and a step
// of GET, EXISTS, plain SET or DEL compares integers (each operation's
// reply is pre-judged for a present and an absent key); CAS, APPEND, INCR
// and SET NX/XX go through the string model (applyKV) and intern what it
// returns. The memo holds a 128-bit Zobrist hash of the configuration (one
// pseudo-random word per (process, position), pooled float and (key,
// value), XORed, so a step updates it in O(1)); two configurations taken as
// one would need a 128-bit collision. Candidate lists and the undo log are
// reused by depth: a step allocates nothing. (First pass: string keys,
// maps and per-step allocation; about 5 times fewer configurations per
// second.)
//
// 3. Pruning at a write (seq_prune.go; register operations only). After
// each write the search stops when the configuration provably cannot
// extend to a full order:
//
//   - it overwrote a value that an unplaced read expects and no remaining
//     SET writes again;
//   - it left the key present while an unplaced read of absence (GET -> nil,
//     EXISTS -> 0, counted DEL -> 0) has no filler left: no unapplied DEL
//     that may delete (not a counted DEL -> 0) and that neither follows the
//     read in its program nor in the graph (a floating DEL outside the graph:
//     its program predecessor does not follow the read); or left it absent
//     while a read of presence (EXISTS -> 1, counted DEL -> 1) has no such
//     SET left. Counters per read, updated by each filler applied, tell in
//     O(1);
//   - it wrote a value v with one writer w while a breaker of v is unplaced:
//     an operation on v's key that is a landing write other than w, or a
//     read that does not return v, and that the graph orders before some
//     read of v. Between w and a read of v the key holds v throughout (only
//     w writes it), so the breaker would have to come before w, which is
//     placed. This is what ties a nil read to the value written after it
//     (issue 19: a nil read not preceded by a set in the graph was found to
//     be misplaced only after the whole subtree behind it was exhausted).
//
// Candidate writes are tried awaited first (a process's next read returns
// the value), then those that destroy no expected value, then in one of
// three orders: by deadline (the earliest Return of any operation the graph
// says must follow: real histories are nearly linearizable, so a write
// usually took effect before its successors returned), by invocation, or by
// deadline counting writes that restore an awaited absence or presence as
// awaited. The order never prunes, only guides.
//
// 4. Restarts. A run that explores its budget of configurations
// (scFirstBudget, 4096, doubled after each round of the three orders) stops,
// and the next run starts with the next order: when one order walks into a
// large dead subtree another usually does not (a small first budget
// switches early; 4096 to 131072 decide the saved histories in the same
// time within noise). Configurations a run explored completely stay in the
// memo (they are dead whatever the order); those it cut short are removed
// from it. Budgets grow without end, so the search stays complete: only
// Options.MaxStates and Options.Timeout stop it.
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
// NX/XX (no graph and no pruning at a write), with more than scMaxGraph
// operations (no graph), or with many floating DELs and SETs of values no
// read returns, which can land anywhere. The memo costs about 20 bytes per
// configuration (about 100 MB at DefaultMaxStates). A history with a
// namespace of another service is judged by the generic search
// (seq_generic.go), which runs the services themselves as their
// specification.
//
// Measured (issue 19 item 6; synod-lab sim --nodes 3 --clients 8 --ops 1000
// --faults all, seeds 1-600 of each protocol declaring automaton.Sequential:
// blocking, orca-bcast, orca-primary): every one of the 1,800 histories is
// decided, and a whole 100-seed run peaks under 100 MB resident. On seeds
// 1-100 the checks average 6 ms (blocking), 14 ms (orca-bcast) and 10 ms
// (orca-primary) of CPU; the hardest, orca-bcast seed 62, takes 249,095
// configurations (0.3 s). The broken variants' violations are proved by
// the graph alone in milliseconds.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/synod-dev/synod/history"
)

// DefaultMaxStates bounds the configurations Sequential explores when
// Options.MaxStates is zero.
const DefaultMaxStates = 5_000_000

// scFirstBudget is the configurations the first run of the search may
// explore before it restarts (each later run may explore twice as many).
const scFirstBudget = 1 << 12

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

// The operation kinds of the integer fast path; scOther (CAS, APPEND,
// INCR) goes through the string model (applyKV).
const (
	scGet = iota
	scExists
	scSet // plain or NX/XX (plain tells)
	scDel
	scOther
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

	// Interned form (see "Representation"): the key's index, the kind,
	// the value a SET writes or a GET expects (a value id; 0 is absence,
	// -1 a GET reply no state matches), whether the reply matches with the
	// key absent (ok0) or present (ok1), the float index (-1 if landing)
	// and, for a float, the id of its effect (floats with one effect are
	// interchangeable).
	k        int32
	kind     uint8
	plain    bool
	v        int32
	ok0, ok1 bool
	fi       int32
	eff      int32
	idx      int   // index in its process's program
	rk       uint8 // scNeedAbsent or scNeedPresent for a read of absence or presence
}

// scVal names one value of one key in the intern table.
type scVal struct {
	k int32
	v string
}

// scSearch is the state of one search.
type scSearch struct {
	opt   Options
	procs [][]scOp
	ids   []int // process ids (history.Op.Process) by index
	total int

	// Intern tables: keys by index, values (a key and its contents) by id;
	// id 0 is "absent".
	keys  []string
	vals  []scVal
	vidx  map[scVal]int32
	nEffs int

	pos    []int
	pool   []bool // by float index: released, not yet applied
	floats []*scOp
	kv     []int32 // by key index: the value id, 0 when absent
	h      [2]uint64
	placed int

	// Pruning (register operations only, seq_prune.go): by value id,
	// unplaced sets producing it and unplaced reads expecting it; by read
	// of absence or presence (op id), its unplaced fillers; by key and
	// kind, the unplaced reads with no filler left; by filler, its reads.
	prune               bool
	prodLeft, readsLeft []int32
	all                 []*scOp
	need                []int32
	starved             []int32
	helps               [][]int32
	breakers            [][]int32 // by value id
	reach               []bitset  // the graph's transitive closure, until counters runs

	seen     map[[2]uint64]struct{}
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
	// (not a global bound) cut it, and the candidate order.
	budget, runStates int
	restart           bool
	order             int // scOrderDue, ...

	best     int
	bestPos  []int
	bestKV   []int32
	bestPool []bool

	// Scratch: the undo log of closures, candidate lists by depth, and
	// stamps marking what the processes' next reads wait for.
	ulog                   []*scOp
	cstack                 [][]cand
	epoch                  int32
	awaitAt, absAt, presAt []int32
	effAt                  []int32
}

// Sequential checks h for sequential consistency over all its KV keys
// together. It returns an error only for a malformed history or bad options;
// a history that is not sequentially consistent is a Report with Result
// Illegal.
func Sequential(h *history.History, opt Options) (*Report, error) {
	if h == nil {
		return nil, errors.New("check: nil history")
	}
	start := time.Now()
	for _, svc := range opt.Services {
		if svc != "kv" {
			// Any other deterministic service: the generic search
			// (seq_generic.go), every namespace by its own State.
			return sequentialGeneric(h, opt, start)
		}
	}
	r := &Report{opt: opt, Guarantee: GuaranteeSequential, spec: newSpec(opt), Partitions: 1}
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
	s.counters()
	ok := s.restarts()
	r.Elapsed = time.Since(start)
	r.verdict(ok, s.cut, s.states, s.maxState, s.total, len(s.procs), "(all keys)", func() string { return s.explain(h) })
	return r, nil
}

// verdict sets a sequential search's result: Ok when it found an order,
// Unknown when a bound (the time or the state limit) cut it, Illegal when
// it exhausted every order; failed names the partition of a violation.
func (r *Report) verdict(ok, cut bool, states, maxState, total, procs int, failed string, explain func() string) {
	r.States = states
	switch {
	case ok:
		r.Result = Ok
		r.Detail = fmt.Sprintf("a sequential order of all %d operations of %d processes exists (%d configurations explored)",
			total, procs, states)
	case cut:
		r.Result = Unknown
		why := fmt.Sprintf("the time limit (%v)", r.opt.Timeout)
		if states >= maxState {
			why = fmt.Sprintf("the state limit (%d configurations)", maxState)
		}
		r.Detail = fmt.Sprintf("%s passed before the search finished; no order was found so far; %s", why, explain())
	default:
		r.Result = Illegal
		r.FailedPartition = failed
		r.FailedPartitions = []string{failed}
		r.Detail = "no sequential order exists: " + explain()
	}
}

// buildSequential classifies operations (as build does) into per-process
// program orders.
func (r *Report) buildSequential(h *history.History) (*scSearch, error) {
	s := &scSearch{opt: r.opt, seen: map[[2]uint64]struct{}{}, vidx: map[scVal]int32{}}
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
		read, drop, float, err := classify(op, svc, desc)
		if err != nil {
			return nil, err
		}
		if drop {
			r.Dropped++
			continue
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
	slices.Sort(s.ids)
	for pi, p := range s.ids {
		ops := byProc[p]
		slices.SortStableFunc(ops, func(a, b scOp) int { return cmpInt64(a.call, b.call) })
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
	s.abstractUnread()
	s.intern()
	s.pos = make([]int, len(s.procs))
	s.pool = make([]bool, len(s.floats))
	for p := range s.procs {
		s.hash(zPos, p, 0)
	}
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
	return s, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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

// intern fills the integer form of every operation (see "Representation"
// in the package comment) and lists the floating writes.
func (s *scSearch) intern() {
	s.vals = []scVal{{k: -1}} // id 0: absent
	keys := map[string]int32{}
	effs := map[string]int32{}
	for pi := range s.procs {
		for j := range s.procs[pi] {
			o := &s.procs[pi][j]
			k, ok := keys[o.key]
			if !ok {
				k = int32(len(s.keys))
				keys[o.key] = k
				s.keys = append(s.keys, o.key)
			}
			o.k, o.fi, o.idx, o.id = k, -1, j, len(s.all)
			s.all = append(s.all, o)
			var want0, want1 history.Result
			switch o.in.kind {
			case "get":
				o.kind = scGet
				switch o.res.Type {
				case "nil":
					o.v = 0
				case "bytes":
					o.v = s.value(k, o.res.Bytes)
				default:
					o.v = -1
				}
			case "exists":
				o.kind, want0, want1 = scExists, resInt(0), resInt(1)
			case "set":
				o.kind, o.plain = scSet, len(o.in.args) == 1
				o.v = s.value(k, o.in.args[0])
				want0, want1 = resOK, resOK
			case "del":
				o.kind, want0, want1 = scDel, resInt(0), resInt(1)
			default:
				o.kind = scOther
			}
			o.ok0, o.ok1 = want0.Equal(o.res), want1.Equal(o.res)
			if o.kind == scDel && s.opt.IgnoreDelCount {
				o.ok0, o.ok1 = true, true
			}
			if o.float {
				o.fi = int32(len(s.floats))
				s.floats = append(s.floats, o)
				e := o.in.kind + "\x00" + o.key + "\x00" + strings.Join(o.in.args, "\x00")
				id, ok := effs[e]
				if !ok {
					id = int32(len(effs))
					effs[e] = id
				}
				o.eff = id
			}
		}
	}
	s.nEffs = len(effs)
	s.kv = make([]int32, len(s.keys))
	s.bestKV = make([]int32, len(s.keys))
	s.absAt, s.presAt = make([]int32, len(s.keys)), make([]int32, len(s.keys))
	s.effAt = make([]int32, s.nEffs)
}

// value interns v as a value of key k.
func (s *scSearch) value(k int32, v string) int32 {
	if id, ok := s.vidx[scVal{k, v}]; ok {
		return id
	}
	id := int32(len(s.vals))
	s.vals = append(s.vals, scVal{k, v})
	s.vidx[scVal{k, v}] = id
	return id
}

// The configuration hash is a Zobrist hash: the XOR of one random-looking
// 128-bit word per (process, position), per pooled float and per (key,
// value) present, so a step updates it in O(1).
const (
	zPos = iota + 1
	zPool
	zKV
)

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// hash toggles the word of (what, a, b) in the configuration hash.
func (s *scSearch) hash(what uint64, a int, b int32) {
	x := what<<60 ^ uint64(a)<<32 ^ uint64(uint32(b))
	s.h[0] ^= splitmix(x)
	s.h[1] ^= splitmix(x ^ 0x5bd1e9955bd1e995)
}

func (s *scSearch) setKV(k, v int32) {
	if old := s.kv[k]; old != 0 {
		s.hash(zKV, int(k), old)
	}
	if v != 0 {
		s.hash(zKV, int(k), v)
	}
	s.kv[k] = v
}

func (s *scSearch) advance(p, d int) {
	s.hash(zPos, p, int32(s.pos[p]))
	s.pos[p] += d
	s.placed += d
	s.hash(zPos, p, int32(s.pos[p]))
}

func (s *scSearch) setPool(f int32, in bool) {
	s.pool[f] = in
	s.hash(zPool, int(f), 0)
}

// state renders a value id as the string model's state.
func (s *scSearch) state(v int32) kvState {
	if v == 0 {
		return kvState{}
	}
	return kvState{true, s.vals[v].v}
}

// step computes o's effect on the current state: whether its reply is the
// one the specification gives (always, for a floating write) and the key's
// next value.
func (s *scSearch) step(o *scOp) (ok bool, next int32) {
	cur := s.kv[o.k]
	switch {
	case o.kind == scGet:
		return cur == o.v, cur
	case o.kind == scExists:
		return cur == 0 && o.ok0 || cur != 0 && o.ok1, cur
	case o.kind == scSet && o.plain:
		return o.float || o.ok0, o.v
	case o.kind == scDel:
		return o.float || cur == 0 && o.ok0 || cur != 0 && o.ok1, 0
	}
	want, n := applyKV(s.state(cur), o.in)
	if n.present {
		next = s.value(o.k, n.value)
	}
	return o.float || want.Equal(o.res), next
}

// undoTo reverses the closure steps logged after mark.
func (s *scSearch) undoTo(mark int) {
	for i := len(s.ulog) - 1; i >= mark; i-- {
		o := s.ulog[i]
		if o.float {
			s.setPool(o.fi, false)
		} else {
			s.readPlaced(o, +1)
			s.mark(o, +1)
		}
		s.advance(o.proc, -1)
	}
	s.ulog = s.ulog[:mark]
}

// closure applies, without branching, every read that can go next (a read
// never changes the state, wherever it is placed), and releases floating
// writes into the pool.
func (s *scSearch) closure() {
	for progress := true; progress; {
		progress = false
		for p, ops := range s.procs {
			for s.pos[p] < len(ops) {
				o := &ops[s.pos[p]]
				if o.float {
					s.setPool(o.fi, true)
				} else if !o.read || !s.ready(o) {
					break
				} else if ok, _ := s.step(o); !ok {
					break
				} else {
					s.readPlaced(o, -1)
					s.mark(o, -1)
				}
				s.advance(p, +1)
				s.ulog = append(s.ulog, o)
				progress = true
			}
		}
	}
}

func (s *scSearch) record() {
	if s.placed <= s.best && s.bestPos != nil {
		return
	}
	s.best = s.placed
	s.bestPos = append(s.bestPos[:0], s.pos...)
	s.bestPool = append(s.bestPool[:0], s.pool...)
	copy(s.bestKV, s.kv)
}

// pair names a (key, value) (constraint graph).
func pair(key, value string) string { return key + "\x00" + value }

// cand is one branch: the next write of process p, or pooled float o.
type cand struct {
	p       int // -1 for a pooled float
	o       *scOp
	awaited bool
	harmful bool // overwrites a value some unplaced read still expects
}

// candidates lists the branches of the current configuration (in the
// buffer of depth d), the most promising first: writes that produce a
// value some blocked read waits for, then writes that destroy no value an
// unplaced read still expects, then by deadline or invocation time (real
// histories are nearly linearizable, so real time is a good guide; it
// only orders the search, never prunes it).
func (s *scSearch) candidates(d int) []cand {
	// What the processes' next reads wait for: a value, or (in the order
	// that looks at absence) the key's absence or presence.
	s.epoch++
	if s.awaitAt == nil || len(s.awaitAt) < len(s.vals) {
		s.awaitAt = append(s.awaitAt, make([]int32, len(s.vals)-len(s.awaitAt))...)
	}
	ep := s.epoch
	for p, ops := range s.procs {
		if s.pos[p] < len(ops) {
			if o := &ops[s.pos[p]]; o.read {
				switch {
				case o.kind == scGet && o.v > 0:
					s.awaitAt[o.v] = ep
				case s.order != scOrderAbsence:
				case o.kind == scGet && o.v == 0 || o.kind == scExists && o.ok0:
					s.absAt[o.k] = ep
				case o.kind == scExists && o.ok1:
					s.presAt[o.k] = ep
				}
			}
		}
	}
	produces := func(o *scOp) bool {
		switch o.kind {
		case scSet:
			return s.awaitAt[o.v] == ep || s.presAt[o.k] == ep && s.kv[o.k] == 0
		case scDel:
			return s.absAt[o.k] == ep && s.kv[o.k] != 0
		}
		return false
	}
	harmful := func(o *scOp) bool {
		cur := s.kv[o.k]
		return cur != 0 && s.prune && s.readsLeft[cur] > 0
	}
	for len(s.cstack) <= d {
		s.cstack = append(s.cstack, nil)
	}
	cs := s.cstack[d][:0]
	for p, ops := range s.procs {
		if s.pos[p] < len(ops) {
			if o := &ops[s.pos[p]]; !o.read {
				cs = append(cs, cand{p: p, o: o, awaited: produces(o), harmful: harmful(o)})
			}
		}
	}
	for f, in := range s.pool {
		if in {
			o := s.floats[f]
			// Pooled writes with the same effect are interchangeable: try one.
			if s.effAt[o.eff] == ep || (s.prune && !s.observedNext(o)) {
				continue
			}
			s.effAt[o.eff] = ep
			cs = append(cs, cand{p: -1, o: o, awaited: produces(o), harmful: harmful(o)})
		}
	}
	byCall := s.order == scOrderCall
	slices.SortStableFunc(cs, func(a, b cand) int {
		if a.awaited != b.awaited {
			if a.awaited {
				return -1
			}
			return 1
		}
		if a.harmful != b.harmful {
			if b.harmful {
				return -1
			}
			return 1
		}
		if byCall {
			return cmpInt64(a.o.call, b.o.call)
		}
		return cmpInt64(a.o.due, b.o.due)
	})
	s.cstack[d] = cs
	return cs
}

// observedNext reports whether applying the floating write o right now
// would let some process's next operation, one whose result depends on o's
// key (a read, a counted DEL, SET NX/XX), succeed. Only such floats are
// worth applying (register operations): in any valid order a floating write
// can be moved later up to the first operation that observes it, and one
// that is overwritten before anything observes it can be dropped.
func (s *scSearch) observedNext(o *scOp) bool {
	_, next := s.step(o)
	for p, ops := range s.procs {
		if s.pos[p] >= len(ops) {
			continue
		}
		n := &ops[s.pos[p]]
		if n.k != o.k {
			continue
		}
		observer := n.read || (n.kind == scDel && !s.opt.IgnoreDelCount) || (n.kind == scSet && !n.plain)
		if !observer {
			continue
		}
		cur := s.kv[o.k]
		s.kv[o.k] = next
		ok, _ := s.step(n)
		s.kv[o.k] = cur
		if ok {
			return true
		}
	}
	return false
}

// dfs reports whether the current configuration extends to a full order.
func (s *scSearch) dfs(depth int) bool {
	mark := len(s.ulog)
	s.closure()
	defer s.undoTo(mark)
	s.record()
	if s.placed == s.total {
		return true
	}
	if s.cut {
		return false
	}
	k := s.h
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
	for _, c := range s.candidates(depth) {
		o := c.o
		if !s.ready(o) {
			continue
		}
		ok, next := s.step(o)
		if !ok {
			continue // the next operation of process c.p: its reply must match
		}
		if c.p < 0 && next == s.kv[o.k] {
			continue // a float with no effect now: applying it cannot help
		}
		s.readPlaced(o, -1) // a counted DEL reads too
		old, alive := s.applyWrite(o, next)
		s.mark(o, -1)
		if c.p >= 0 {
			s.advance(c.p, +1)
		} else {
			s.setPool(o.fi, false)
		}
		found := alive && s.dfs(depth+1)
		if c.p >= 0 {
			s.advance(c.p, -1)
		} else {
			s.setPool(o.fi, true)
		}
		s.mark(o, +1)
		s.unapplyWrite(o, old)
		s.readPlaced(o, +1)
		if found {
			return true
		}
		if s.cut {
			delete(s.seen, k) // explored only in part: not known dead
			return false
		}
	}
	return false
}

// explain describes the deepest configuration the search reached.
func (s *scSearch) explain(h *history.History) string {
	var stuck []string
	for p, ops := range s.procs {
		if s.bestPos[p] >= len(ops) {
			continue
		}
		o := ops[s.bestPos[p]]
		op := h.Ops[o.orig]
		st := s.state(s.bestKV[o.k])
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
	return explainStuck(s.states, s.best, s.total, stuck)
}

// explainStuck words a sequential search's deepest configuration: its
// size and each process's next operation there (the first six).
func explainStuck(states, best, total int, stuck []string) string {
	const show = 6
	if len(stuck) > show {
		stuck = append(stuck[:show], fmt.Sprintf("and %d more processes", len(stuck)-show))
	}
	return fmt.Sprintf("%d configurations explored; the longest valid prefix places %d of %d operations; there, %s.",
		states, best, total, strings.Join(stuck, "; "))
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
		if s.dfs(0) {
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
