package check

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

// The Matchmaker's check (the Grid Services thesis III.C.1; service/matchmaker.go).
//
// A Matchmaker history cannot be judged by the KV or Counter models: a
// submit's answer is one random choice among the suitable machines, and two
// correct runs of one history may answer differently. It is judged instead
// for linearizability against the Matchmaker's sequential specification
// with the choice left open (Porcupine's NondeterministicModel, turned into
// a Model by its power-set construction):
//
//   - a submit answered with machine m is legal exactly when m is known,
//     free and fits the job at that point of the order, and the job then
//     holds m; answered nil, when no machine is suitable, and the job is
//     queued (priority order, FIFO within a priority);
//   - a submit of unknown outcome may have taken effect with any suitable
//     machine, or not at all: every one of those states is kept;
//   - every other operation is deterministic and mirrors
//     service.MatchmakerState, listings byte for byte.
//
// The whole namespace is one object (a submit reads every machine), so the
// history is one Porcupine partition. The outcomes follow package check:
// failed operations, unknown reads and reads answered by an error are
// dropped, except the service's own "no such job" answer to a job query,
// which is checked (mmServiceAnswer); a write of unknown outcome, or
// answered by an error, may have taken effect at any time after its call.
//
//
// MatchmakerFor is the Checker form; ForHistory picks it for histories
// whose recorded service is the matchmaker. Options.MaxSteps bounds the
// search by specification steps (DefaultMatchmakerSteps), so that a
// history's verdict does not depend on the machine's speed or load;
// Options.Timeout, when set, bounds it in real time as well. Past either
// the verdict is Unknown.

// DefaultMatchmakerSteps bounds the specification steps of a Matchmaker
// check when Options.MaxSteps is zero: 16.8 million, 6.9 x the 2.4
// million that the costliest history of the conformance suite's
// "nondeterministic service" scenario takes (unreplicated's seed 3, 36
// writes of unknown outcome; every other protocol's seeds 1-6 take at
// most 2,408, unreplicated's others at most 101,411; session 50), and
// about 40 s of one core's CPU at 2.5 us a step.
const DefaultMatchmakerSteps = 1 << 24

// mmPartition names the one partition of a Matchmaker check.
const mmPartition = "matchmaker"

// MatchmakerFor is MatchmakerCheck as a Checker.
func MatchmakerFor(h *history.History, opts Options) (*Report, error) {
	rep, _, err := MatchmakerCheck(h, opts)
	return rep, err
}

// mmIn is the Porcupine input of one Matchmaker operation.
type mmIn struct {
	kind, key     string
	cpu, mem, dsk uint64
	prio          int64
}

// mmOut is its output: the reply, or unknown (maybe applied, any reply).
type mmOut struct {
	unknown bool
	res     history.Result
}

type mmRes struct{ cpu, mem, dsk uint64 }

func (r mmRes) fits(n mmRes) bool { return r.cpu >= n.cpu && r.mem >= n.mem && r.dsk >= n.dsk }

// mmMach is a machine of the model: its resources and its job ("" free).
type mmMach struct {
	id  string
	res mmRes
	job string
}

// mmQueued is a queued job of the model.
type mmQueued struct {
	id   string
	prio int64
	seq  uint64
	need mmRes
}

// mmSpecState is one state of the specification. It is never changed
// once built (Porcupine's steps are pure); key is its canonical form, for
// Equal and Hash.
type mmSpecState struct {
	machines []mmMach   // by id
	queue    []mmQueued // in service order
	seq      uint64
	key      string
	hash     uint64 // FNV-1a of key
}

func (s *mmSpecState) clone() *mmSpecState {
	return &mmSpecState{machines: slices.Clone(s.machines), queue: slices.Clone(s.queue), seq: s.seq}
}

// seal computes the canonical key (and its hash, once) and returns the
// finished state. It appends numbers with strconv rather than fmt: seal
// runs once per specification step, and fmt made 40 % of the check's CPU
// (unreplicated's matchmaker seed 3, session 50).
func (s *mmSpecState) seal() *mmSpecState {
	b := make([]byte, 0, 16*(len(s.machines)+len(s.queue))+8)
	num := func(v uint64) { b = strconv.AppendUint(append(b, ' '), v, 10) }
	for _, m := range s.machines {
		b = append(b, m.id...)
		num(m.res.cpu)
		num(m.res.mem)
		num(m.res.dsk)
		b = append(append(b, ' '), m.job...)
		b = append(b, ';')
	}
	b = append(b, '|')
	for _, q := range s.queue {
		b = append(b, q.id...)
		b = strconv.AppendInt(append(b, ' '), q.prio, 10)
		num(q.seq)
		num(q.need.cpu)
		num(q.need.mem)
		num(q.need.dsk)
		b = append(b, ';')
	}
	b = strconv.AppendUint(append(b, '|'), s.seq, 10)
	s.key = string(b)
	h := fnv.New64a()
	h.Write(b)
	s.hash = h.Sum64()
	return s
}

func (s *mmSpecState) machine(id string) int {
	i, ok := slices.BinarySearchFunc(s.machines, id, func(m mmMach, id string) int { return strings.Compare(m.id, id) })
	if !ok {
		return -1
	}
	return i
}

// jobAt returns where job id is: its machine's index, -1 when queued (with
// its queue index), or known false.
func (s *mmSpecState) jobAt(id string) (machine, queued int, known bool) {
	for i, m := range s.machines {
		if m.job == id {
			return i, -1, true
		}
	}
	for i, q := range s.queue {
		if q.id == id {
			return -1, i, true
		}
	}
	return -1, -1, false
}

// serve gives free machine i to the first queued job that fits it.
func (s *mmSpecState) serve(i int) (string, bool) {
	for k, q := range s.queue {
		if s.machines[i].res.fits(q.need) {
			s.queue = slices.Delete(s.queue, k, k+1)
			s.machines[i].job = q.id
			return q.id, true
		}
	}
	return "", false
}

func queuedBefore(a, b mmQueued) int {
	switch {
	case a.prio != b.prio:
		if a.prio > b.prio {
			return -1
		}
		return 1
	case a.seq != b.seq:
		if a.seq < b.seq {
			return -1
		}
		return 1
	}
	return strings.Compare(a.id, b.id)
}

// mmStep returns every (reply, next state) the specification allows for in
// from s. Only submit has more than one.
func mmStep(s *mmSpecState, in mmIn) []mmOutcome {
	one := func(r history.Result, n *mmSpecState) []mmOutcome { return []mmOutcome{{r, n.seal()}} }
	switch in.kind {
	case "advertise":
		n := s.clone()
		i := n.machine(in.key)
		m := mmMach{id: in.key, res: mmRes{in.cpu, in.mem, in.dsk}}
		if i < 0 {
			i, _ = slices.BinarySearchFunc(n.machines, in.key, func(m mmMach, id string) int { return strings.Compare(m.id, id) })
			n.machines = slices.Insert(n.machines, i, m)
		} else {
			n.machines[i] = m // the job it held ends
		}
		if job, ok := n.serve(i); ok {
			return one(history.Result{Type: "bytes", Bytes: job}, n)
		}
		return one(history.Result{Type: "ok"}, n)
	case "submit":
		if _, _, dup := s.jobAt(in.key); dup {
			return one(history.Result{Type: "err", Err: fmt.Sprintf("job %q already submitted", in.key)}, s)
		}
		need := mmRes{in.cpu, in.mem, in.dsk}
		var out []mmOutcome
		for i, m := range s.machines {
			if m.job == "" && m.res.fits(need) {
				n := s.clone()
				n.seq++
				n.machines[i].job = in.key
				out = append(out, mmOutcome{history.Result{Type: "bytes", Bytes: m.id}, n.seal()})
			}
		}
		if len(out) > 0 {
			return out
		}
		n := s.clone()
		q := mmQueued{id: in.key, prio: in.prio, seq: n.seq, need: need}
		n.seq++
		k, _ := slices.BinarySearchFunc(n.queue, q, queuedBefore)
		n.queue = slices.Insert(n.queue, k, q)
		return one(history.Result{Type: "nil"}, n)
	case "withdraw":
		i := s.machine(in.key)
		if i < 0 {
			return one(history.Result{Type: "int", Int: 0}, s)
		}
		n := s.clone()
		n.machines = slices.Delete(n.machines, i, i+1)
		return one(history.Result{Type: "int", Int: 1}, n)
	case "cancel":
		mi, qi, known := s.jobAt(in.key)
		if !known {
			return one(history.Result{Type: "int", Int: 0}, s)
		}
		n := s.clone()
		if qi >= 0 {
			n.queue = slices.Delete(n.queue, qi, qi+1)
		} else {
			n.machines[mi].job = ""
			n.serve(mi)
		}
		return one(history.Result{Type: "int", Int: 1}, n)
	case "job":
		mi, _, known := s.jobAt(in.key)
		switch {
		case !known:
			return one(history.Result{Type: "err", Err: fmt.Sprintf("no such job %q", in.key)}, s)
		case mi < 0:
			return one(history.Result{Type: "nil"}, s)
		}
		return one(history.Result{Type: "bytes", Bytes: s.machines[mi].id}, s)
	case "machines":
		var b strings.Builder
		for _, m := range s.machines {
			fmt.Fprintf(&b, "%s cpu=%d mem=%d disk=%d ", m.id, m.res.cpu, m.res.mem, m.res.dsk)
			if m.job == "" {
				b.WriteString("free\n")
			} else {
				fmt.Fprintf(&b, "job=%s\n", m.job)
			}
		}
		return one(history.Result{Type: "bytes", Bytes: b.String()}, s)
	case "queue":
		var b strings.Builder
		for _, q := range s.queue {
			fmt.Fprintf(&b, "%s prio=%d cpu=%d mem=%d disk=%d\n", q.id, q.prio, q.need.cpu, q.need.mem, q.need.dsk)
		}
		return one(history.Result{Type: "bytes", Bytes: b.String()}, s)
	}
	panic("check: matchmaker model: unknown operation " + in.kind) // validated before
}

type mmOutcome struct {
	res  history.Result
	next *mmSpecState
}

// mmBudget counts the specification steps a check may still take
// (Options.MaxSteps). Past it every step fails, so Porcupine unwinds its
// search at once and reports Illegal, which MatchmakerCheck turns into
// Unknown: a verdict that depends on the history alone, not on how fast or
// loaded the machine is.
type mmBudget struct {
	left atomic.Int64
	out  atomic.Bool
}

// take spends one step; false once the budget is spent.
func (b *mmBudget) take() bool {
	if b == nil {
		return true
	}
	if b.left.Add(-1) < 0 {
		b.out.Store(true)
		return false
	}
	return true
}

// matchmakerSpec is the nondeterministic specification as a Porcupine
// model; budget (nil: none) bounds its steps.
func matchmakerSpec(budget *mmBudget) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []interface{} { return []interface{}{(&mmSpecState{}).seal()} },
		Step: func(state, input, output interface{}) []interface{} {
			if !budget.take() {
				return nil
			}
			s, in, out := state.(*mmSpecState), input.(mmIn), output.(mmOut)
			var next []interface{}
			for _, o := range mmStep(s, in) {
				if out.unknown || o.res.Equal(out.res) {
					next = append(next, o.next)
				}
			}
			return next
		},
		Equal: func(a, b interface{}) bool { return a.(*mmSpecState).key == b.(*mmSpecState).key },
		Hash:  func(st interface{}) uint64 { return st.(*mmSpecState).hash },
		DescribeOperation: func(input, output interface{}) string {
			in, out := input.(mmIn), output.(mmOut)
			return describeMM(in, out)
		},
		DescribeState: func(st interface{}) string { return st.(*mmSpecState).key },
	}
	return nm.ToModel()
}

func describeMM(in mmIn, out mmOut) string {
	s := in.kind
	if in.key != "" {
		s += " " + in.key
	}
	switch in.kind {
	case "advertise":
		s += fmt.Sprintf(" cpu=%d mem=%d disk=%d", in.cpu, in.mem, in.dsk)
	case "submit":
		s += fmt.Sprintf(" cpu=%d mem=%d disk=%d prio=%d", in.cpu, in.mem, in.dsk, in.prio)
	}
	if out.unknown {
		return s + " -> ? (maybe applied)"
	}
	r := out.res
	switch r.Type {
	case "bytes":
		return s + " -> " + strconv.Quote(r.Bytes)
	case "int":
		return s + " -> " + strconv.FormatInt(r.Int, 10)
	case "err":
		return s + " -> (error) " + r.Err
	}
	return s + " -> " + r.Type
}

// mmOperations turns a history into Porcupine operations, following package
// check's treatment of outcomes (see the doc above); it returns the
// operations and the counts of maybe-applied and dropped ones.
func mmOperations(h *history.History) ([]porcupine.Operation, int, int, error) {
	var ops []porcupine.Operation
	maybe, dropped := 0, 0
	mm := service.Matchmaker{}
	acked := map[string]bool{} // jobs whose submit was acknowledged
	for _, op := range h.Ops {
		if op.Kind == "submit" && op.Outcome == history.OK && op.Result.Type != "err" {
			acked[op.Key] = true
		}
	}
	for i, op := range h.Ops {
		if op.IsTxn() {
			return nil, 0, 0, fmt.Errorf("op %d: the matchmaker check does not judge atomic groups or transactions", i)
		}
		sop := op.ServiceOp()
		read := mm.IsRead(sop)
		if err := mm.Validate(sop); err != nil {
			if op.Outcome == history.OK && op.Result.Type != "err" {
				return nil, 0, 0, fmt.Errorf("op %d (%v): the service refuses it (%v) but the history records a reply", i, sop, err)
			}
			dropped++
			continue
		}
		in := mmIn{kind: sop.Kind, key: sop.Key}
		if sop.Kind == "advertise" || sop.Kind == "submit" {
			// Validate parsed them.
			in.cpu, _ = strconv.ParseUint(op.Args[0], 10, 64)
			in.mem, _ = strconv.ParseUint(op.Args[1], 10, 64)
			in.dsk, _ = strconv.ParseUint(op.Args[2], 10, 64)
			if len(op.Args) == 4 {
				in.prio, _ = strconv.ParseInt(op.Args[3], 10, 64)
			}
		}
		unknown := false
		switch {
		case op.Outcome == history.Failed:
			dropped++
			continue
		case op.Outcome == history.Unknown || op.Result.Type == "err" && !read:
			if read {
				dropped++
				continue
			}
			unknown = true
		case op.Result.Type == "err" && read && !(mmServiceAnswer(in, op.Result.Err) && acked[in.key]):
			dropped++
			continue
		}
		ret := op.Return
		if unknown {
			ret = math.MaxInt64
			maybe++
		}
		ops = append(ops, porcupine.Operation{ClientId: op.Process, Input: in, Call: op.Call,
			Output: mmOut{unknown: unknown, res: op.Result}, Return: ret})
	}
	return ops, maybe, dropped, nil
}

// mmServiceAnswer reports whether err is the service's own answer to a
// read, which the specification decides like any other reply: "no such
// job" to a job query (the job never existed, or a cancel, an advertise or
// a withdraw ended it). Such a read of a job whose submit was acknowledged
// is checked, not dropped: it is how a lost acknowledged submit shows
// (pbd46, session 46). Any other error reply to a read (a protocol's)
// proves nothing and the read is dropped, and so is "no such job" of a job
// whose submit has no answer: the submit may never have taken effect, so
// the reply is always legal there, and checking it cost Porcupine minutes
// (the submit, pending to the end of the history, is placed before the
// read first and undone with every other pending write: unreplicated's
// matchmaker seed 3, 0.2 s dropped, 89 s checked, at load ~25).
func mmServiceAnswer(in mmIn, err string) bool {
	return in.kind == "job" && err == fmt.Sprintf("no such job %q", in.key)
}

// MatchmakerCheck judges a history of the Matchmaker (service/matchmaker.go)
// for linearizability against its sequential specification with the
// machine a submit chooses left open (see the file's doc). viz writes
// Porcupine's view. opts.MaxSteps bounds the specification steps
// (Report.States counts them); opts.Timeout, when set, bounds the real
// time too. Past either the verdict is Unknown.
func MatchmakerCheck(h *history.History, opts Options) (rep *Report, viz func(path string) error, err error) {
	start := time.Now()
	ops, maybe, dropped, err := mmOperations(h)
	if err != nil {
		return nil, nil, err
	}
	budget := &mmBudget{}
	maxSteps := opts.MaxSteps
	if maxSteps <= 0 {
		maxSteps = DefaultMatchmakerSteps
	}
	budget.left.Store(int64(maxSteps))
	res, info := porcupine.CheckOperationsVerbose(matchmakerSpec(budget), ops, opts.Timeout)
	steps := int(min(int64(maxSteps)-budget.left.Load(), int64(maxSteps)))
	rep = &Report{Guarantee: "linearizable (nondeterministic matchmaker specification)", Ops: len(ops),
		MaybeApplied: maybe, Dropped: dropped, Partitions: 1, States: steps, Elapsed: time.Since(start)}
	switch {
	case res == porcupine.Ok:
		rep.Result = Ok
	case res == porcupine.Illegal && !budget.out.Load():
		rep.Result = Illegal
		rep.FailedPartition = mmPartition
		rep.FailedPartitions = []string{mmPartition}
		rep.Detail = explainMM(ops, info)
	case budget.out.Load():
		rep.Result = Unknown
		rep.Undecided = []string{mmPartition}
		rep.Detail = fmt.Sprintf("the check of %d matchmaker operations did not finish within %d specification steps", len(ops), maxSteps)
	default:
		rep.Result = Unknown
		rep.Undecided = []string{mmPartition}
		rep.Detail = fmt.Sprintf("the check of %d matchmaker operations did not finish within %v", len(ops), opts.Timeout)
	}
	spec := matchmakerSpec(nil)
	viz = func(path string) error {
		if len(ops) == 0 {
			return errors.New("check: no matchmaker operations to draw")
		}
		return porcupine.VisualizePath(spec, info, path)
	}
	return rep, viz, nil
}

// explainMM names the longest valid order Porcupine found and its last
// operations.
func explainMM(ops []porcupine.Operation, info porcupine.LinearizationInfo) string {
	var longest []int
	for _, parts := range info.PartialLinearizations() {
		for _, l := range parts {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The %d matchmaker operations have no linearization; the longest valid order places %d of them", len(ops), len(longest))
	if n := len(longest); n > 0 {
		b.WriteString(", ending: ")
		for k, i := range longest[max(0, n-4):] {
			if k > 0 {
				b.WriteString("; ")
			}
			b.WriteString(describeMM(ops[i].Input.(mmIn), ops[i].Output.(mmOut)))
		}
	}
	return b.String()
}
