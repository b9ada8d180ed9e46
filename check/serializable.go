package check

// Serializability of transactions (issue 9 item 3; the semantics are
// automaton/txn.go's).
//
// # What it decides
//
// A history holding transactions (history.TxnKind) and atomic groups
// (history.MultiKind) beside plain operations is cut into units:
//
//   - a committed transaction or group (outer Outcome OK) is one unit, all of
//     its operations together, in the order the client issued them;
//   - a plain operation that returned is a unit of one operation;
//   - an aborted transaction or group (Failed), a failed operation, and any
//     unit of unknown outcome that only reads are dropped: an aborted unit is
//     invisible and its reads promise nothing;
//   - a unit of unknown outcome (Unknown, or an error reply to a plain write
//     or to a commit) is "maybe applied", as Linearizable treats unknown
//     writes: it takes effect whole or not at all, at one point after its
//     Call. If it is applied, the results its client did see (the steps of an
//     interactive transaction answered before the commit was lost) must
//     match.
//
// Serializable and StrictSerializable report whether one total order of the
// included units exists such that applying them in that order to the
// service's initial state gives every result each client saw (for a
// transaction, every step's). StrictSerializable also requires the order to
// respect real time: a unit that returned before another was called comes
// first (the model for linearizable protocols). Serializable requires each
// client's program order instead (units of one process, by Call): a client
// sees its own committed writes. It is therefore stronger than textbook
// serializability, which lets any order stand; giving every unit its own
// Process gives the textbook model.
//
// Inside a unit, a step whose answer never came (Result.Type "") or whose
// answer is an error is not compared, but it still takes effect as the
// service applies it (a service error such as INCR of a non-integer leaves
// the state alone). A step the service refuses (Validate) takes no effect;
// a history claiming it succeeded is an error. Options.IgnoreDelCount
// accepts any DEL count, as in Linearizable.
//
// # Search
//
// The units form a partial order (real time, or per-process program order;
// a maybe-applied unit only has predecessors, since it may land arbitrarily
// late). The search is depth first over its linear extensions: from a
// configuration (the set of units applied and the resulting state) it
// applies a unit whose predecessors are all applied, comparing each result
// as it goes and pruning the unit at its first mismatch. Configurations
// are memoised by (set of applied units, 128-bit hash of the state's
// snapshot), so every configuration is explored once. Two exact reductions
// keep the search narrow. A unit whose results all match and which leaves
// the state's snapshot unchanged (a read-only transaction that fits) is
// applied at once without branching: moving it to the front of any valid
// continuation keeps it valid. A maybe-applied unit is placed only where a
// ready unit shares an object with it: it has no successors and commutes
// with units on other objects, so it can always move later, up to the
// first unit that observes it, or out of the order. Candidates are tried in Call order, required units before
// maybe-applied ones, so a history produced by a nearly linearizable system
// is usually accepted along the first path.
//
// # Components
//
// Units touching disjoint objects commute, so with real-time constraints
// the check is local (the argument of Herlihy and Wing's locality theorem,
// with a component of objects as the object): units are grouped by
// connected components over the objects they touch (a KV key, or a whole
// namespace of another service, which may relate its objects), and each
// component is searched alone, in parallel. Program order is not local
// (the IRIW pattern: two readers see two independent writes in opposite
// orders), so for Serializable the units of one process are also joined:
// its components are smaller than the history only when clients keep to
// disjoint key sets.
//
// # Cost and limits
//
// Deciding serializability is NP-complete (Papadimitriou 1979), and the
// search is exponential in the worst case: a component with w units
// pairwise concurrent may visit up to 2^w sets of applied units, each with
// its states. In practice the cost is about (units) × (units concurrent at
// a time) applications for a legal history whose concurrency is bounded, a
// snapshot of the component's state each, as long as a read soon tells
// apart the orders of concurrent writes to one key; a component where such
// ambiguities pile up costs far more (BenchmarkSerializableLargeRandom: a
// 2000-unit history in 10 components of 5 keys takes tens of milliseconds,
// a single 1000-unit component over 50 keys seconds). Options.Timeout and
// Options.MaxStates (per component; DefaultMaxStates when zero) bound it:
// the verdict is then Unknown unless another component already failed.
// Nondeterministic services (service.NondeterministicService) cannot be
// judged: their results depend on an environment the history does not
// record. The state hash is the service's snapshot, so a service whose
// snapshot carries more than its content (the KV version counter) merges
// fewer configurations than it could, which costs time, never a verdict.
//
// On a violation the report names, for a failing component, the longest
// valid order the search found and the units that cannot go next, each
// with its operations, the results the client saw and the first result the
// state contradicts: the witness.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

// Consistency guarantees of Serializable and StrictSerializable (Report.Guarantee).
const (
	GuaranteeSerializable       = "serializable"
	GuaranteeStrictSerializable = "strict-serializable"
)

// Serializable checks that the committed units of h (transactions, atomic
// groups, plain operations) have one serial order respecting each client's
// program order that explains every result. See the section comment above
// for the rules. It returns an error only for a malformed history or bad
// options.
func Serializable(h *history.History, opt Options) (*Report, error) {
	return serializable(h, opt, false)
}

// StrictSerializable is Serializable with real-time order: a unit that
// returned before another was called is ordered first. It is the model of
// transactions under a linearizable protocol.
func StrictSerializable(h *history.History, opt Options) (*Report, error) {
	return serializable(h, opt, true)
}

// srOp is one operation of a unit.
type srOp struct {
	ns    int // index into srCheck.nss
	op    service.Op
	res   history.Result // what the client saw
	check bool           // res is compared
	step  int            // index in the entry's Txn, -1 for a plain operation
}

// srUnit is one unit of the serial order.
type srUnit struct {
	orig      int // index in History.Ops
	proc      int
	kind      string // "" for a plain operation, history.TxnKind or MultiKind
	call, ret int64  // ret is math.MaxInt64 for a maybe-applied unit
	maybe     bool
	ops       []srOp
	objs      []int // objects touched (srCheck.objNames)
}

// srCheck holds the units of a history and what they touch.
type srCheck struct {
	opt      Options
	strict   bool
	nss      []string // namespaces, by index
	nsIdx    map[string]int
	svcs     []service.Service
	svcNames []string
	objIdx   map[string]int
	objNames []string
	units    []srUnit
}

func serializable(h *history.History, opt Options, strict bool) (*Report, error) {
	if h == nil {
		return nil, errors.New("check: nil history")
	}
	model := GuaranteeSerializable
	if strict {
		model = GuaranteeStrictSerializable
	}
	start := time.Now()
	c := &srCheck{opt: opt, strict: strict, nsIdx: map[string]int{}, objIdx: map[string]int{}}
	for ns := range opt.Services {
		if _, err := c.namespace(ns); err != nil {
			return nil, err
		}
	}
	r := &Report{opt: opt, Guarantee: model, spec: newSpec(opt)}
	if err := c.build(h, r); err != nil {
		return nil, err
	}
	comps := c.components()
	r.Partitions = len(comps)
	c.run(comps, r, start)
	return r, nil
}

// namespace returns the index of namespace ns, looking up its service.
func (c *srCheck) namespace(ns string) (int, error) {
	if i, ok := c.nsIdx[ns]; ok {
		return i, nil
	}
	name := "kv"
	if n, ok := c.opt.Services[ns]; ok {
		name = n
	}
	svc, err := service.Lookup(name)
	if err != nil {
		return 0, fmt.Errorf("check: namespace %s: %w", nsName(ns), err)
	}
	if service.IsNondeterministic(svc) {
		return 0, fmt.Errorf("check: namespace %s: service %q is nondeterministic; its results depend on an environment the history does not record", nsName(ns), name)
	}
	i := len(c.nss)
	c.nsIdx[ns] = i
	c.nss = append(c.nss, ns)
	c.svcs = append(c.svcs, svc)
	c.svcNames = append(c.svcNames, name)
	return i, nil
}

// object returns the index of the object an operation touches: a key of a
// KV namespace, or the whole namespace of another service.
func (c *srCheck) object(ns int, key string) int {
	name := nsName(c.nss[ns])
	if c.svcNames[ns] == "kv" {
		name += "/" + key
	}
	if i, ok := c.objIdx[name]; ok {
		return i
	}
	i := len(c.objNames)
	c.objIdx[name] = i
	c.objNames = append(c.objNames, name)
	return i
}

func knownResultType(t string) bool {
	switch t {
	case "nil", "ok", "bytes", "int", "err":
		return true
	}
	return false
}

// build cuts the history into units (see the section comment).
func (c *srCheck) build(h *history.History, r *Report) error {
	for i, op := range h.Ops {
		if op.Outcome != history.OK && op.Outcome != history.Unknown && op.Outcome != history.Failed {
			return fmt.Errorf("check: op %d: bad outcome %q", i, op.Outcome)
		}
		if op.Outcome == history.OK && op.Return < op.Call {
			return fmt.Errorf("check: op %d returns (%d) before it is called (%d)", i, op.Return, op.Call)
		}
		if op.Outcome == history.OK && !knownResultType(op.Result.Type) {
			return fmt.Errorf("check: op %d: bad result type %q", i, op.Result.Type)
		}
		u := srUnit{orig: i, proc: op.Process, call: op.Call, ret: op.Return}
		var err error
		if op.IsTxn() {
			u.kind = op.Kind
			err = c.buildTxn(i, op, &u)
		} else {
			err = c.buildPlain(i, op, &u)
		}
		if err != nil {
			return err
		}
		if len(u.ops) == 0 {
			r.Dropped++
			continue
		}
		if u.maybe {
			u.ret = math.MaxInt64
			r.MaybeApplied++
		}
		seen := map[int]bool{}
		for _, o := range u.ops {
			// Every key the operation names (RENAME, COPY, SMOVE, ... name
			// two): its objects decide its component and where a
			// maybe-applied unit may be placed.
			keys := []string{o.op.Key}
			if ls, ok := service.LocksOf(c.svcs[o.ns], o.op); ok {
				for _, l := range ls {
					if l.Key != o.op.Key {
						keys = append(keys, l.Key)
					}
				}
			}
			for _, k := range keys {
				if ob := c.object(o.ns, k); !seen[ob] {
					seen[ob] = true
					u.objs = append(u.objs, ob)
				}
			}
		}
		c.units = append(c.units, u)
		r.Ops++
	}
	return nil
}

// buildPlain makes the unit of a plain operation (as Linearizable's build
// classifies it); no operations means the unit is dropped.
func (c *srCheck) buildPlain(i int, op history.Op, u *srUnit) error {
	ns, err := c.namespace(op.Namespace)
	if err != nil {
		return fmt.Errorf("check: op %d: %w", i, err)
	}
	svc := c.svcs[ns]
	sop := op.ServiceOp()
	okReply := op.Outcome == history.OK && op.Result.Type != "err"
	if err := svc.Validate(sop); err != nil {
		if okReply {
			return fmt.Errorf("check: op %d (%s in namespace %s): the service refuses it (%v) but the history records reply %s",
				i, sop, nsName(op.Namespace), err, describeResult(op.Result))
		}
		return nil
	}
	if op.Outcome == history.Failed {
		return nil
	}
	read := svc.IsRead(sop)
	if !okReply {
		if read {
			return nil
		}
		u.maybe = true
	}
	u.ops = []srOp{{ns: ns, op: sop, res: op.Result, check: okReply && c.checked(ns, sop), step: -1}}
	return nil
}

// buildTxn makes the unit of a transaction or atomic group.
func (c *srCheck) buildTxn(i int, op history.Op, u *srUnit) error {
	if op.Outcome == history.Failed {
		return nil // aborted: invisible
	}
	u.maybe = op.Outcome == history.Unknown || op.Result.Type == "err"
	readOnly := true
	for j, s := range op.Txn {
		nsName0 := s.Namespace
		if nsName0 == "" {
			nsName0 = op.Namespace
		}
		ns, err := c.namespace(nsName0)
		if err != nil {
			return fmt.Errorf("check: op %d step %d: %w", i, j, err)
		}
		svc := c.svcs[ns]
		sop := s.ServiceOp()
		answered := s.Result.Type != "" && s.Result.Type != "err"
		if s.Result.Type != "" && !knownResultType(s.Result.Type) {
			return fmt.Errorf("check: op %d step %d: bad result type %q", i, j, s.Result.Type)
		}
		if err := svc.Validate(sop); err != nil {
			if answered {
				return fmt.Errorf("check: op %d step %d (%s in namespace %s): the service refuses it (%v) but the history records reply %s",
					i, j, sop, nsName(nsName0), err, describeResult(s.Result))
			}
			continue // refused: no effect
		}
		if !svc.IsRead(sop) {
			readOnly = false
		}
		u.ops = append(u.ops, srOp{ns: ns, op: sop, res: s.Result, check: answered && c.checked(ns, sop), step: j})
	}
	if u.maybe && readOnly {
		u.ops = nil // an unknown read-only unit constrains nothing
	}
	return nil
}

// checked reports whether an answered operation's result is compared.
func (c *srCheck) checked(ns int, op service.Op) bool {
	return !(c.opt.IgnoreDelCount && c.svcNames[ns] == "kv" && op.Kind == "del")
}

// srComponent is a set of units closed under shared objects (and, for
// Serializable, shared processes).
type srComponent struct {
	name  string
	units []*srUnit
}

// components groups the units by connected components over their objects.
func (c *srCheck) components() []srComponent {
	parent := make([]int, len(c.objNames))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(x int) int {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	union := func(a, b int) { parent[find(a)] = find(b) }
	procObj := map[int]int{} // Serializable: a process's first object
	for i := range c.units {
		u := &c.units[i]
		for _, o := range u.objs[1:] {
			union(u.objs[0], o)
		}
		if !c.strict {
			if o, ok := procObj[u.proc]; ok {
				union(o, u.objs[0])
			} else {
				procObj[u.proc] = u.objs[0]
			}
		}
	}
	byRoot := map[int]*srComponent{}
	var roots []int
	for i := range c.units {
		u := &c.units[i]
		rt := find(u.objs[0])
		comp := byRoot[rt]
		if comp == nil {
			comp = &srComponent{}
			byRoot[rt] = comp
			roots = append(roots, rt)
		}
		comp.units = append(comp.units, u)
	}
	objsOf := map[int][]string{}
	for o, n := range c.objNames {
		rt := find(o)
		objsOf[rt] = append(objsOf[rt], n)
	}
	out := make([]srComponent, 0, len(roots))
	for _, rt := range roots {
		names := objsOf[rt]
		sort.Strings(names)
		comp := byRoot[rt]
		comp.name = names[0]
		if len(names) > 1 {
			comp.name += fmt.Sprintf(" (+%d objects)", len(names)-1)
		}
		out = append(out, *comp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// srVerdict is the outcome of one component's search.
type srVerdict struct {
	ok, cut bool
	states  int
	detail  string // the witness, for a failing or undecided component
}

// run searches every component on a pool of workers and fills r.
func (c *srCheck) run(comps []srComponent, r *Report, start time.Time) {
	var deadline time.Time
	if c.opt.Timeout > 0 {
		deadline = start.Add(c.opt.Timeout)
	}
	maxStates := c.opt.MaxStates
	if maxStates == 0 {
		maxStates = DefaultMaxStates
	}
	verdicts := make([]srVerdict, len(comps))
	forEach(len(comps), func(i int) {
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			verdicts[i] = srVerdict{cut: true, detail: "not started"}
			return
		}
		s := c.newSearch(comps[i].units, deadline, maxStates)
		verdicts[i] = s.decide()
	})
	r.Elapsed = time.Since(start)
	var firstFail, firstCut = -1, -1
	for i, v := range verdicts {
		r.States += v.states
		switch {
		case v.ok:
		case v.cut:
			r.Undecided = append(r.Undecided, comps[i].name)
			if firstCut < 0 {
				firstCut = i
			}
		default:
			r.FailedPartitions = append(r.FailedPartitions, comps[i].name)
			if firstFail < 0 {
				firstFail = i
			}
		}
	}
	order := "serial order respecting each process's program order"
	if c.strict {
		order = "serial order respecting real time"
	}
	switch {
	case firstFail >= 0:
		r.Result = Illegal
		r.FailedPartition = comps[firstFail].name
		var b strings.Builder
		fmt.Fprintf(&b, "component %s (%d units) has no %s", comps[firstFail].name, len(comps[firstFail].units), order)
		if n := len(r.FailedPartitions); n > 1 {
			fmt.Fprintf(&b, " (%d other components fail too: %s)", n-1, strings.Join(r.FailedPartitions[1:], ", "))
		}
		b.WriteString(": " + verdicts[firstFail].detail)
		if len(r.Undecided) > 0 {
			fmt.Fprintf(&b, " The limits cut short %d other components.", len(r.Undecided))
		}
		r.Detail = b.String()
	case firstCut >= 0:
		r.Result = Unknown
		why := fmt.Sprintf("the time limit (%v)", c.opt.Timeout)
		if verdicts[firstCut].states >= maxStates {
			why = fmt.Sprintf("the state limit (%d configurations)", maxStates)
		}
		r.Detail = fmt.Sprintf("%s passed before %d of %d components were decided (first: %s); no violation was found in the others",
			why, len(r.Undecided), len(comps), comps[firstCut].name)
	default:
		r.Result = Ok
		r.Detail = fmt.Sprintf("every one of the %d components has a %s (%d configurations explored)", len(comps), order, r.States)
	}
}

// srSearch is the search over one component.
type srSearch struct {
	c      *srCheck
	units  []*srUnit // in Call order
	nss    []int     // namespaces the component touches
	loc    []int     // namespace index -> index into nss, -1 if untouched
	nreq   int
	req    []int // required units, by Call
	byRet  []int // required units, by Return
	maybes []int // maybe-applied units, by Call
	// Program order (Serializable): required units of each process by Call;
	// need[i] is the number of them a maybe-applied unit i follows.
	procReq [][]int
	procOf  []int
	need    []int

	applied   []uint64
	placedReq int
	lo, d     int   // strict: first unapplied in req, in byRet
	procPos   []int // program order: required units applied per process
	path      []int

	seen      map[string]struct{}
	states    int
	maxStates int
	deadline  time.Time
	cut       bool
	keyBuf    []byte

	bestPath   []int
	bestStates []service.State
}

func (c *srCheck) newSearch(us []*srUnit, deadline time.Time, maxStates int) *srSearch {
	units := append([]*srUnit(nil), us...)
	sort.SliceStable(units, func(i, j int) bool { return units[i].call < units[j].call })
	s := &srSearch{c: c, units: units, loc: make([]int, len(c.nss)), seen: map[string]struct{}{},
		maxStates: maxStates, deadline: deadline, applied: make([]uint64, (len(units)+63)/64)}
	for i := range s.loc {
		s.loc[i] = -1
	}
	procs := map[int]int{}
	reqSoFar := map[int]int{}
	for i, u := range units {
		for _, o := range u.ops {
			if s.loc[o.ns] < 0 {
				s.loc[o.ns] = len(s.nss)
				s.nss = append(s.nss, o.ns)
			}
		}
		p, ok := procs[u.proc]
		if !ok {
			p = len(s.procReq)
			procs[u.proc] = p
			s.procReq = append(s.procReq, nil)
		}
		s.procOf = append(s.procOf, p)
		s.need = append(s.need, reqSoFar[p])
		if u.maybe {
			s.maybes = append(s.maybes, i)
		} else {
			s.req = append(s.req, i)
			s.procReq[p] = append(s.procReq[p], i)
			reqSoFar[p]++
		}
	}
	s.nreq = len(s.req)
	s.byRet = append([]int(nil), s.req...)
	sort.SliceStable(s.byRet, func(a, b int) bool { return units[s.byRet[a]].ret < units[s.byRet[b]].ret })
	s.procPos = make([]int, len(s.procReq))
	return s
}

func (s *srSearch) isApplied(i int) bool { return s.applied[i/64]&(1<<(i%64)) != 0 }

// srUndo restores the search after mark.
type srUndo struct{ unit, lo, d int }

// mark records unit i as applied.
func (s *srSearch) mark(i int) srUndo {
	un := srUndo{unit: i, lo: s.lo, d: s.d}
	s.applied[i/64] |= 1 << (i % 64)
	s.path = append(s.path, i)
	if !s.units[i].maybe {
		s.placedReq++
		s.procPos[s.procOf[i]]++
		for s.lo < len(s.req) && s.isApplied(s.req[s.lo]) {
			s.lo++
		}
		for s.d < len(s.byRet) && s.isApplied(s.byRet[s.d]) {
			s.d++
		}
	}
	return un
}

func (s *srSearch) unmark(un srUndo) {
	i := un.unit
	s.applied[i/64] &^= 1 << (i % 64)
	s.path = s.path[:len(s.path)-1]
	if !s.units[i].maybe {
		s.placedReq--
		s.procPos[s.procOf[i]]--
	}
	s.lo, s.d = un.lo, un.d
}

// candidates lists the unapplied units whose predecessors are all applied:
// required units by Call, then maybe-applied ones by Call.
func (s *srSearch) candidates(buf []int) []int {
	buf = buf[:0]
	if s.c.strict {
		// A unit may go next iff no unapplied required unit returned
		// before it was called.
		bound := int64(math.MaxInt64)
		if s.d < len(s.byRet) {
			bound = s.units[s.byRet[s.d]].ret
		}
		for j := s.lo; j < len(s.req) && s.units[s.req[j]].call <= bound; j++ {
			if i := s.req[j]; !s.isApplied(i) {
				buf = append(buf, i)
			}
		}
		for _, i := range s.maybes {
			if !s.isApplied(i) && s.units[i].call <= bound {
				buf = append(buf, i)
			}
		}
		return buf
	}
	for p, list := range s.procReq {
		if k := s.procPos[p]; k < len(list) {
			buf = append(buf, list[k])
		}
	}
	sort.Ints(buf) // Call order
	for _, i := range s.maybes {
		if !s.isApplied(i) && s.procPos[s.procOf[i]] >= s.need[i] {
			buf = append(buf, i)
		}
	}
	return buf
}

// srTry is the outcome of applying a unit to a configuration's state.
type srTry struct {
	ok    bool
	st    []service.State // the states after it (shared where untouched)
	snaps [][]byte
	same  bool // the state did not change
	bad   int  // the first mismatching operation, when !ok
	got   history.Result
}

func cloneState(svc service.Service, st service.State) service.State {
	n, err := service.CloneState(svc, st)
	if err != nil {
		panic("check: " + err.Error())
	}
	return n
}

// try applies unit i to st (whose snapshots are snaps) without changing
// them, stopping at the first result that contradicts the client's.
func (s *srSearch) try(st []service.State, snaps [][]byte, i int) srTry {
	u := s.units[i]
	t := srTry{ok: true, st: append([]service.State(nil), st...), bad: -1}
	touched := make([]bool, len(st))
	for k, o := range u.ops {
		l := s.loc[o.ns]
		if !touched[l] {
			touched[l] = true
			t.st[l] = cloneState(s.c.svcs[o.ns], st[l])
		}
		got := history.FromResult(t.st[l].Apply(o.op))
		if o.check && !got.Equal(o.res) {
			t.ok, t.bad, t.got = false, k, got
			return t
		}
	}
	t.snaps = append([][]byte(nil), snaps...)
	t.same = true
	for l, tc := range touched {
		if tc {
			t.snaps[l] = t.st[l].Snapshot()
			if !bytes.Equal(t.snaps[l], snaps[l]) {
				t.same = false
			}
		}
	}
	return t
}

// decide runs the search from the initial state.
func (s *srSearch) decide() srVerdict {
	st := make([]service.State, len(s.nss))
	snaps := make([][]byte, len(s.nss))
	for l, ns := range s.nss {
		st[l] = s.c.svcs[ns].NewState()
		snaps[l] = st[l].Snapshot()
	}
	ok := s.dfs(st, snaps)
	v := srVerdict{ok: ok, cut: !ok && s.cut, states: s.states}
	if !ok {
		v.detail = s.explain()
	}
	return v
}

func (s *srSearch) memoKey(snaps [][]byte) string {
	h := fnv.New128a()
	var n [binary.MaxVarintLen64]byte
	for _, b := range snaps {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
		h.Write(b)
	}
	k := s.keyBuf[:0]
	for _, w := range s.applied {
		k = binary.LittleEndian.AppendUint64(k, w)
	}
	k = h.Sum(k)
	s.keyBuf = k
	return string(k)
}

// dfs reports whether the configuration (the applied units, state st)
// extends to an order placing every required unit.
func (s *srSearch) dfs(st []service.State, snaps [][]byte) bool {
	var undo []srUndo
	defer func() {
		for j := len(undo) - 1; j >= 0; j-- {
			s.unmark(undo[j])
		}
	}()
	// Units that fit and change nothing go first, without branching. The
	// state does not change, so each try below stays valid for the node.
	tries := map[int]srTry{}
	var cands []int
	for progress := true; progress; {
		progress = false
		cands = s.candidates(cands)
		for _, i := range cands {
			t, done := tries[i]
			if !done {
				t = s.try(st, snaps, i)
				tries[i] = t
			}
			if t.ok && t.same {
				undo = append(undo, s.mark(i))
				progress = true
			}
		}
	}
	if len(s.path) > len(s.bestPath) || s.bestPath == nil {
		s.bestPath = append(s.bestPath[:0], s.path...)
		s.bestStates = append(s.bestStates[:0], st...)
	}
	if s.placedReq == s.nreq {
		return true
	}
	if s.cut {
		return false
	}
	k := s.memoKey(snaps)
	if _, dup := s.seen[k]; dup {
		return false
	}
	s.seen[k] = struct{}{}
	s.states++
	if s.states >= s.maxStates || (!s.deadline.IsZero() && s.states%256 == 0 && time.Now().After(s.deadline)) {
		s.cut = true
		return false
	}
	cands = append([]int(nil), cands...)
	var touching map[int]int // object -> ready units touching it
	for _, i := range cands {
		t := tries[i]
		if !t.ok || s.isApplied(i) {
			continue
		}
		if s.units[i].maybe {
			// A maybe-applied unit is only worth placing right before a
			// unit that shares an object with it (see observed).
			if touching == nil {
				touching = s.touching(cands)
			}
			if !s.observed(i, touching) {
				continue
			}
		}
		un := s.mark(i)
		found := s.dfs(t.st, t.snaps)
		s.unmark(un)
		if found {
			return true
		}
		if s.cut {
			return false
		}
	}
	return false
}

// touching counts, for each object, the unapplied ready units touching it.
func (s *srSearch) touching(cands []int) map[int]int {
	m := map[int]int{}
	for _, i := range cands {
		if !s.isApplied(i) {
			for _, o := range s.units[i].objs {
				m[o]++
			}
		}
	}
	return m
}

// observed reports whether a ready unit other than maybe-applied unit i
// touches one of i's objects. If none does, placing i now cannot be needed: in any valid order placing i here, i can move later past
// every unit up to the first one that shares an object with it (units on
// disjoint objects commute, and i has no successors), and that unit is
// not ready yet, so it follows some other ready unit; if nothing ever
// shares an object with i after this point, i can be left out.
func (s *srSearch) observed(i int, touching map[int]int) bool {
	for _, o := range s.units[i].objs {
		if touching[o] > 1 {
			return true
		}
	}
	return false
}

// explain describes the deepest configuration the search reached: the
// order that led there and the required units that cannot go next.
func (s *srSearch) explain() string {
	var undo []srUndo
	for _, i := range s.bestPath {
		undo = append(undo, s.mark(i))
	}
	defer func() {
		for j := len(undo) - 1; j >= 0; j-- {
			s.unmark(undo[j])
		}
	}()
	snaps := make([][]byte, len(s.bestStates))
	for l, st := range s.bestStates {
		snaps[l] = st.Snapshot()
	}
	const show = 6
	var b strings.Builder
	fmt.Fprintf(&b, "%d configurations explored; the longest valid order places %d of %d units (%d of %d required)",
		s.states, len(s.bestPath), len(s.units), s.placedReq, s.nreq)
	if len(s.bestPath) > 0 {
		b.WriteString(", ending: ")
		from := max(0, len(s.bestPath)-show)
		if from > 0 {
			b.WriteString("… ")
		}
		for j, i := range s.bestPath[from:] {
			if j > 0 {
				b.WriteString("; ")
			}
			b.WriteString(s.c.describeUnit(s.units[i], -1, history.Result{}))
		}
	}
	var stuck []string
	for _, i := range s.candidates(nil) {
		u := s.units[i]
		if u.maybe {
			continue
		}
		t := s.try(s.bestStates, snaps, i)
		if t.ok {
			stuck = append(stuck, s.c.describeUnit(u, -1, history.Result{})+": fits here, but no order of the rest follows it")
		} else {
			stuck = append(stuck, s.c.describeUnit(u, t.bad, t.got))
		}
	}
	if len(stuck) == 0 {
		b.WriteString(". Nothing can go next: the units left wait for units the order cannot place.")
		return b.String()
	}
	b.WriteString(". There, no unit can go next: ")
	if len(stuck) > show {
		stuck = append(stuck[:show], fmt.Sprintf("and %d more", len(stuck)-show))
	}
	b.WriteString(strings.Join(stuck, "; "))
	b.WriteString(".")
	return b.String()
}

// describeUnit renders a unit with its process, interval and operations;
// operation bad (if >= 0) is marked with the result the state gives.
func (c *srCheck) describeUnit(u *srUnit, bad int, got history.Result) string {
	var b strings.Builder
	ret := "?"
	if u.ret != math.MaxInt64 {
		ret = fmt.Sprint(u.ret)
	}
	what := "op"
	if u.kind != "" {
		what = u.kind
	}
	fmt.Fprintf(&b, "[p%d %d..%s] %s %d", u.proc, u.call, ret, what, u.orig)
	if u.maybe {
		b.WriteString(" (maybe applied)")
	}
	b.WriteString(" {")
	for k, o := range u.ops {
		if k > 0 {
			b.WriteString("; ")
		}
		b.WriteString(c.describeOp(o))
		if k == bad {
			fmt.Fprintf(&b, " but the state gives %s", describeResult(got))
		}
	}
	b.WriteString("}")
	return b.String()
}

func (c *srCheck) describeOp(o srOp) string {
	var b strings.Builder
	if len(c.nss) > 1 {
		b.WriteString(nsName(c.nss[o.ns]) + ": ")
	}
	b.WriteString(strings.ToUpper(o.op.Kind))
	if o.op.Key != "" {
		b.WriteString(" " + quote(o.op.Key))
	}
	for _, a := range o.op.Args {
		b.WriteString(" " + quote(string(a)))
	}
	b.WriteString(" -> ")
	switch {
	case o.check:
		b.WriteString(describeResult(o.res))
	case o.res.Type == "":
		b.WriteString("? (unanswered)")
	default:
		b.WriteString(describeResult(o.res) + " (unchecked)")
	}
	return b.String()
}

// serializableString is Report.String for Serializable and
// StrictSerializable reports.
func (r *Report) serializableString() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d units (%d maybe applied, %d dropped) in %d components, checked for %s in %v: ",
		r.Ops, r.MaybeApplied, r.Dropped, r.Partitions, r.Guarantee, r.Elapsed.Round(time.Millisecond))
	switch r.Result {
	case Ok:
		b.WriteString(r.Guarantee + ".")
	case Illegal:
		fmt.Fprintf(&b, "NOT %s: %s", r.Guarantee, r.Detail)
	case Unknown:
		fmt.Fprintf(&b, "undecided: %s.", r.Detail)
	}
	return b.String()
}
