// Package check judges recorded histories (package history) for
// linearizability with Porcupine.
//
// # Objects and partitions
//
// Linearizability is local: a history is linearizable if and only if the
// sub-history of every object is. The checker therefore splits a history into
// partitions, one per object, and checks them independently (in parallel on
// GOMAXPROCS workers). In a KV namespace every key is an object (partition
// "ns/key"); a Counter namespace is a single object (partition "ns"). The
// empty namespace is written "(default)". Options.Services says which service
// each namespace runs; namespaces not listed are KV.
//
// # Models
//
// The KV model holds one key's state (present, value) and mirrors
// service.KVState.Apply operation for operation: get, exists, set [nx|xx], del,
// cas, append, incr, with the same replies and error cases. The Counter model
// mirrors service.CounterState (read, add). Register protocols (ABD) cannot
// return a linearizable count from DEL (they do not know whether the key existed
// at the linearization point); Options.IgnoreDelCount accepts any DEL reply
// while still applying the delete. Any other registered deterministic
// service is checked by the generic model (generic.go): the service itself is
// the specification, its snapshot the state, the namespace one object.
//
// # Outcomes
//
//   - OK operations are checked against their reply, over [Call, Return]
//     (a closed interval, as in Porcupine).
//   - Unknown operations are "maybe applied": their Return is +infinity and any
//     reply is accepted, but their effect on the state is still modelled.
//     Because an operation returning at +infinity may be linearized after every
//     other one, this is exactly "took effect at some time after Call, or never".
//     Unknown reads have no effect and no reply, so they are dropped.
//   - Failed operations are dropped: they are known not to have taken effect.
//   - An OK operation whose reply is an error is dropped if it is a read; if it
//     is a write it is treated as Unknown, since an error reply (a timeout, a
//     lost leadership) does not prove the write did nothing. This also covers
//     deterministic errors such as INCR on a non-integer: the model can still
//     place them, so no real violation is lost, but they are not checked.
//   - An operation the service would refuse (unknown kind, wrong arity) cannot
//     have taken effect and is dropped unless the history claims it succeeded,
//     which is reported as an error in the history.
//
// Reads are checked whatever their recorded ReadMode: a "regular" or "local"
// read is held to linearizability like any other. Callers that want to check
// only linearizable reads filter the history first.
//
// # Reports
//
// Linearizable returns a Report with the verdict, counts, the failing
// partitions and a textual explanation. WriteHTML writes Porcupine's
// interactive visualization: of the first failing partition when the history
// is not linearizable (its largest partial linearizations and the operations
// that cannot follow them), of the first undecided partition on a timeout, and
// of every partition when the history is linearizable.
package check

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

// Verdicts in Report.Result.
const (
	Ok      = "ok"
	Illegal = "illegal"
	Unknown = "unknown" // the time limit passed before every partition was decided
)

// Options tunes a check.
type Options struct {
	// Timeout bounds the whole check; 0 means no limit. When it passes, the
	// verdict is Unknown unless a violation was already found.
	Timeout time.Duration
	// IgnoreDelCount accepts any DEL reply (register protocols such as ABD
	// cannot give a linearizable count); the delete itself is still modelled.
	IgnoreDelCount bool
	// Services maps a namespace to its service name: "kv", "counter", or
	// any registered deterministic service (checked by the generic model,
	// generic.go). Namespaces not listed are "kv".
	Services map[string]string
	// MaxStates bounds the configurations Sequential explores (0 means
	// DefaultMaxStates); Linearizable ignores it.
	MaxStates int
	// MaxSteps bounds the specification steps the Matchmaker check takes
	// (0 means DefaultMatchmakerSteps): a budget that, unlike Timeout,
	// decides the same whatever the machine's speed or load.
	MaxSteps int
}

// Consistency guarantees a Report judges against (Report.Guarantee).
const (
	GuaranteeLinearizable = "linearizable"
	GuaranteeSequential   = "sequential"
)

// Report is the outcome of a check.
type Report struct {
	Result string // Ok, Illegal or Unknown
	// Guarantee is the consistency guarantee judged: GuaranteeLinearizable
	// (from Linearizable; also when empty) or GuaranteeSequential (from
	// Sequential).
	Guarantee string
	// States counts the configurations Sequential explored.
	States int // (and the specification steps the Matchmaker check took)

	Ops          int // operations checked (including MaybeApplied)
	MaybeApplied int // writes modelled as maybe applied (Unknown, or error replies)
	Dropped      int // failed operations, unknown reads, reads answered by an error
	Partitions   int // objects checked

	// FailedPartition is the first (by name) partition found not linearizable;
	// FailedPartitions lists all of them. Empty unless Result is Illegal.
	FailedPartition  string
	FailedPartitions []string
	// Undecided lists the partitions whose check the time limit cut short or
	// prevented (Result Unknown, or Illegal found before the limit).
	Undecided []string

	// Detail explains the verdict in a few lines.
	Detail  string
	Elapsed time.Duration

	opt   Options
	spec  porcupine.Model // the Porcupine specification of the service
	parts []partition
	// infos holds Porcupine's linearization info for partitions that were not
	// found linearizable (failing or cut short), by partition index.
	infos map[int]porcupine.LinearizationInfo
}

// partition is one object's operations.
type partition struct {
	name string
	ops  []cop
}

// cop is one checkable operation.
type cop struct {
	in       input
	out      output
	call     int64
	ret      int64
	process  int
	metadata string
}

// serviceOf returns the service of a namespace.
func serviceOf(opt Options, ns string) (string, service.Service, error) {
	name := "kv"
	if n, ok := opt.Services[ns]; ok {
		name = n
	}
	if _, ok := genericService(name); name != "kv" && name != "counter" && !ok {
		return "", nil, fmt.Errorf("namespace %q: no Porcupine specification for service %q (have kv, counter and any registered deterministic service: generic.go)", ns, name)
	}
	svc, err := service.Lookup(name)
	return name, svc, err
}

func nsName(ns string) string {
	if ns == "" {
		return "(default)"
	}
	return ns
}

// Linearizable checks h. It returns an error only for a malformed history or
// bad options; a history that is not linearizable is a Report with Result
// Illegal.
func Linearizable(h *history.History, opt Options) (*Report, error) {
	if h == nil {
		return nil, errors.New("check: nil history")
	}
	for ns := range opt.Services {
		if _, _, err := serviceOf(opt, ns); err != nil {
			return nil, fmt.Errorf("check: %w", err)
		}
	}
	r := &Report{opt: opt, spec: specFor(opt), infos: map[int]porcupine.LinearizationInfo{}}
	if err := r.build(h); err != nil {
		return nil, err
	}
	r.run()
	return r, nil
}

// build classifies the history's operations and groups them into partitions.
func (r *Report) build(h *history.History) error {
	byName := map[string]*partition{}
	for i, op := range h.Ops {
		svcName, svc, err := serviceOf(r.opt, op.Namespace)
		if err != nil {
			return fmt.Errorf("check: op %d: %w", i, err)
		}
		sop := op.ServiceOp()
		desc := fmt.Sprintf("op %d (%s in namespace %s, checked as %s)", i, sop, nsName(op.Namespace), svcName)
		switch op.Result.Type {
		case "nil", "ok", "bytes", "int", "err":
		default:
			if op.Outcome == history.OK {
				return fmt.Errorf("check: %s: bad result type %q", desc, op.Result.Type)
			}
		}
		read, drop, unknown, err := classify(op, svc, desc)
		if err != nil {
			return err
		}
		if drop {
			r.Dropped++
			continue
		}

		name := nsName(op.Namespace)
		in := input{service: svcName, kind: op.Kind, key: op.Key, args: op.Args}
		if svcName == "kv" {
			name += "/" + op.Key
		}
		p := byName[name]
		if p == nil {
			p = &partition{name: name}
			byName[name] = p
		}
		c := cop{in: in, out: output{unknown: unknown, res: op.Result}, call: op.Call, ret: op.Return, process: op.Process}
		meta := fmt.Sprintf("%s · process %d", name, op.Process)
		if op.ReadMode != "" && read {
			meta += " · read mode " + op.ReadMode
		}
		if unknown {
			c.ret = math.MaxInt64
			c.out.res = history.Result{}
			if op.Outcome == history.OK {
				meta += fmt.Sprintf(" · error reply %q, modelled as maybe applied", op.Result.Err)
			} else {
				meta += " · outcome unknown, modelled as maybe applied"
			}
			r.MaybeApplied++
		}
		c.metadata = meta
		p.ops = append(p.ops, c)
		r.Ops++
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		p := byName[n]
		for j := range p.ops {
			p.ops[j].in.part = i
		}
		r.parts = append(r.parts, *p)
	}
	r.Partitions = len(r.parts)
	return nil
}

// operations converts checkable operations for porcupine, numbering clients
// densely (the visualization draws one row per client id up to the largest).
func operations(ops []cop) []porcupine.Operation {
	procs := map[int]int{}
	var ids []int
	for _, c := range ops {
		if _, ok := procs[c.process]; !ok {
			procs[c.process] = 0
			ids = append(ids, c.process)
		}
	}
	sort.Ints(ids)
	for i, p := range ids {
		procs[p] = i
	}
	out := make([]porcupine.Operation, len(ops))
	for i, c := range ops {
		out[i] = porcupine.Operation{ClientId: procs[c.process], Input: c.in, Call: c.call,
			Output: c.out, Return: c.ret, Metadata: c.metadata}
	}
	return out
}

// run checks every partition on a pool of workers.
func (r *Report) run() {
	start := time.Now()
	var deadline time.Time
	if r.opt.Timeout > 0 {
		deadline = start.Add(r.opt.Timeout)
	}
	results := make([]porcupine.CheckResult, len(r.parts))
	infos := make([]porcupine.LinearizationInfo, len(r.parts))
	forEach(len(r.parts), func(i int) {
		var limit time.Duration
		if !deadline.IsZero() {
			limit = time.Until(deadline)
			if limit <= 0 {
				results[i] = porcupine.Unknown // not started
				return
			}
		}
		results[i], infos[i] = porcupine.CheckOperationsVerbose(r.spec, operations(r.parts[i].ops), limit)
	})
	r.Elapsed = time.Since(start)

	for i, res := range results {
		switch res {
		case porcupine.Illegal:
			r.FailedPartitions = append(r.FailedPartitions, r.parts[i].name)
			r.infos[i] = infos[i]
		case porcupine.Unknown:
			r.Undecided = append(r.Undecided, r.parts[i].name)
			if infos[i].PartialLinearizations() != nil {
				r.infos[i] = infos[i]
			}
		}
	}
	switch {
	case len(r.FailedPartitions) > 0:
		r.Result = Illegal
		r.FailedPartition = r.FailedPartitions[0]
		r.Detail = r.explainFailure(r.index(r.FailedPartition))
	case len(r.Undecided) > 0:
		r.Result = Unknown
		r.Detail = fmt.Sprintf("the time limit (%v) passed before %d of %d partitions were decided (first: %s); no violation was found in the others",
			r.opt.Timeout, len(r.Undecided), len(r.parts), r.Undecided[0])
	default:
		r.Result = Ok
		r.Detail = fmt.Sprintf("all %d partitions are linearizable", len(r.parts))
	}
}

func (r *Report) index(name string) int {
	for i, p := range r.parts {
		if p.name == name {
			return i
		}
	}
	return -1
}

// explainFailure describes a failing partition from Porcupine's partial
// linearizations: the longest order found, and the operations that cannot
// extend it.
func (r *Report) explainFailure(i int) string {
	p := r.parts[i]
	var longest []int // indexes into p.ops (porcupine numbers operations in input order)
	info := r.infos[i]
	for _, parts := range info.PartialLinearizations() {
		for _, l := range parts {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Partition %s (%d operations) has no linearization", p.name, len(p.ops))
	if n := len(r.FailedPartitions); n > 1 {
		// One failing key is explained; the others are only counted (a
		// run on a used store can fail every key, and hundreds of names
		// help nobody).
		fmt.Fprintf(&b, " (%d other partitions fail too)", n-1)
	}
	if v, ok := unwrittenRead(p.ops); ok {
		fmt.Fprintf(&b, ". A GET returned %q, which no operation of the history wrote: the key held a value before the run began, and the history assumes it absent (record on fresh keys: synod bench --history picks a fresh key prefix unless --key-prefix is given, or use --preload)", v)
	}
	fmt.Fprintf(&b, ". The longest valid order places %d of them", len(longest))
	const show = 6
	if len(longest) > 0 {
		b.WriteString(", ending: ")
		from := max(0, len(longest)-show)
		if from > 0 {
			b.WriteString("… ")
		}
		for j, id := range longest[from:] {
			if j > 0 {
				b.WriteString("; ")
			}
			b.WriteString(r.describe(p.ops[id]))
		}
	}
	placed := make([]bool, len(p.ops))
	for _, id := range longest {
		placed[id] = true
	}
	var rest []string
	for id, c := range p.ops {
		if !placed[id] {
			rest = append(rest, r.describe(c))
		}
	}
	if len(rest) > 0 {
		b.WriteString(". Not placed: ")
		if len(rest) > show {
			b.WriteString(strings.Join(rest[:show], "; "))
			fmt.Fprintf(&b, "; and %d more", len(rest)-show)
		} else {
			b.WriteString(strings.Join(rest, "; "))
		}
	}
	b.WriteString(".")
	if len(r.Undecided) > 0 {
		fmt.Fprintf(&b, " The time limit cut short %d other partitions.", len(r.Undecided))
	}
	return b.String()
}

// unwrittenRead finds a successful KV GET whose value no set or append of
// ops could have produced: the key held data before the history began.
func unwrittenRead(ops []cop) (string, bool) {
	written := map[string]bool{}
	appends := false
	for _, c := range ops {
		switch c.in.kind {
		case "set":
			if len(c.in.args) > 0 {
				written[c.in.args[0]] = true
			}
		case "append", "incr":
			appends = true
		}
	}
	if appends {
		return "", false // values are built from several operations
	}
	for _, c := range ops {
		if c.in.service == "kv" && c.in.kind == "get" && !c.out.unknown && c.out.res.Type == "bytes" && !written[c.out.res.Bytes] {
			return c.out.res.Bytes, true
		}
	}
	return "", false
}

// describe renders an operation with its process and interval.
func (r *Report) describe(c cop) string {
	ret := "?"
	if c.ret != math.MaxInt64 {
		ret = fmt.Sprint(c.ret)
	}
	return fmt.Sprintf("[p%d %d..%s] %s", c.process, c.call, ret, describeOp(c.in, c.out, r.opt))
}

// String is a one-paragraph summary.
func (r *Report) String() string {
	switch r.Guarantee {
	case GuaranteeSequential:
		return r.sequentialString()
	case GuaranteeSerializable, GuaranteeStrictSerializable:
		return r.serializableString()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d operations (%d maybe applied, %d dropped) in %d partitions, checked in %v: ",
		r.Ops, r.MaybeApplied, r.Dropped, r.Partitions, r.Elapsed.Round(time.Millisecond))
	switch r.Result {
	case Ok:
		b.WriteString("linearizable.")
	case Illegal:
		fmt.Fprintf(&b, "NOT linearizable; failing partition %s. %s", r.FailedPartition, r.Detail)
	case Unknown:
		fmt.Fprintf(&b, "undecided: %s.", r.Detail)
	}
	return b.String()
}

// WriteHTML writes Porcupine's visualization to path: the first failing
// partition if the history is not linearizable, the first undecided partition
// that was started on a timeout, and every partition if it is linearizable
// (this re-runs the check across all partitions, within Options.Timeout, to
// build one combined view).
func (r *Report) WriteHTML(path string) error {
	if r.Guarantee != GuaranteeLinearizable && r.Guarantee != "" {
		return fmt.Errorf("check: no HTML view for %s reports (Porcupine draws linearizability only)", r.Guarantee)
	}
	switch r.Result {
	case Illegal, Unknown:
		name := r.FailedPartition
		if r.Result == Unknown {
			name = ""
			for _, n := range r.Undecided {
				if _, ok := r.infos[r.index(n)]; ok {
					name = n
					break
				}
			}
			if name == "" {
				return errors.New("check: no partition was started before the time limit; nothing to visualize")
			}
		}
		return r.visualize(r.infos[r.index(name)], path)
	}
	var all []cop
	for _, p := range r.parts {
		all = append(all, p.ops...)
	}
	_, info := porcupine.CheckOperationsVerbose(r.spec, operations(all), r.opt.Timeout)
	return r.visualize(info, path)
}

func (r *Report) visualize(info porcupine.LinearizationInfo, path string) error {
	if err := porcupine.VisualizePath(r.spec, info, path); err != nil {
		return fmt.Errorf("check: writing %s: %w", path, err)
	}
	return nil
}

// forEach calls f(0) .. f(n-1) on a pool of GOMAXPROCS workers (partitions
// and key groups are checked independently) and returns when all are done.
func forEach(n int, f func(i int)) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := 0
	for w := 0; w < min(runtime.GOMAXPROCS(0), n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
}

// classify judges how a recorded operation enters a check (shared by
// Linearizable, Sequential and the generic sequential search): dropped
// (refused at the edge, failed, an unknown read, a read answered by an
// error), or kept, floating when it may or may not have taken effect (a
// write of unknown outcome, or answered by an error). It refuses a
// malformed operation: a reply before the call, or a success claimed for
// an operation the service refuses.
func classify(op history.Op, svc service.Service, desc string) (read, drop, float bool, err error) {
	if op.Outcome == history.OK && op.Return < op.Call {
		return false, false, false, fmt.Errorf("check: %s returns (%d) before it is called (%d)", desc, op.Return, op.Call)
	}
	sop := op.ServiceOp()
	okReply := op.Outcome == history.OK && op.Result.Type != "err"
	if verr := svc.Validate(sop); verr != nil {
		if okReply {
			return false, false, false, fmt.Errorf("check: %s: the service refuses it (%v) but the history records reply %s",
				desc, verr, describeResult(op.Result))
		}
		return false, true, false, nil // refused at the edge: no effect
	}
	read = svc.IsRead(sop)
	switch op.Outcome {
	case history.Failed:
		return read, true, false, nil
	case history.Unknown:
		return read, read, !read, nil
	case history.OK:
		if !okReply {
			return read, read, !read, nil
		}
		return read, false, false, nil
	}
	return false, false, false, fmt.Errorf("check: %s: bad outcome %q", desc, op.Outcome)
}
