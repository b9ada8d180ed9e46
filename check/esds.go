package check

import (
	"fmt"
	"github.com/synod-dev/synod/automaton"
	"sort"
	"strings"

	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

// ESDSReport is the verdict of ESDS.
type ESDSReport struct {
	// Ok is false when Violations is not empty.
	Ok         bool
	Violations []string
	// Replicas is the number of final orders compared; Ordered the length of
	// the agreed order.
	Replicas, Ordered int
	// Strict and NonStrict count the OK operations checked by kind.
	Strict, NonStrict int
	// Inconsistent counts the inconsistent responses: those whose value
	// differs from the operation's value in the eventual total order (seed
	// 000 §5.3, Def. 3). Only non-strict responses may be inconsistent; a
	// strict one that is is a violation, not a count.
	Inconsistent int
	// Degree is the seed's degree of inconsistency (§5.3, Def. 4): the
	// inconsistent responses among ALL responses to user operations,
	// Inconsistent/(Strict+NonStrict), as a fraction (the seed states it
	// as a percentage).
	Degree float64
	// NonStrictInconsistency is Inconsistent/NonStrict: the share of
	// inconsistent responses among non-strict ones only (not a measure the
	// seed defines; it isolates what strict operations dilute in Degree).
	NonStrictInconsistency float64
	// LocalReads counts the non-strict reads answered without a place in
	// the order (ESDSOptions.LocalReads); ReadsChecked the non-strict
	// reads whose value was checked against their prev sets.
	LocalReads, ReadsChecked int
}

// ESDSOptions are the checker's options.
type ESDSOptions struct {
	// LocalReads: the namespace answers non-strict reads from a
	// replica's view without ordering them (protocol/esds parameter
	// reads=local). A completed non-strict read then need not be in the
	// order; an operation naming one in prev must follow every
	// operation the read's own prev sets name (a read changes no state:
	// its place in the order is anywhere after its prev closure).
	LocalReads bool
}

// maxViolations bounds the violations listed in a report.
const maxViolations = 20

// ESDS checks a history against the ESDS thesis's eventually-serializable guarantee:
//
//   - Convergence: every replica's final order (finalOrders: replica -> its
//     total order of op ids after quiescence) is the same order, and holds
//     each id at most once.
//   - That order contains every operation that completed with a non-error
//     reply, and only ids of the history's operations.
//   - Every prev constraint holds: each id in an operation's prev set is
//     ordered before it.
//   - Every strict response equals the operation's value when the service
//     applies the operations in that order.
//
// Non-strict responses may differ from their value in the order; the report
// counts them (Def. 3) and gives both ratios: Degree, the seed's degree of
// inconsistency (Def. 4, over all responses), and NonStrictInconsistency
// (over non-strict responses only). Operations of unknown
// outcome may or may not be in the order; failed ones and error replies are
// not checked. Every operation must carry an id (the option automaton.OptOpID). An error
// return means the input cannot be judged (no orders, duplicate ids).
//
// Non-strict reads are held to the specification's valset (Fekete et
// al., PODC 1996, after which the ESDS thesis builds): the value must be
// the read's value over some set of operations containing its prev
// closure, in an order consistent with the prev constraints. The check
// is decided where that is cheap and exact: a read of one key (its
// service's Locks) whose every write in the history is blind (service.KV
// SET without options, DEL of one key), so that its value is the last
// such write's. The writes it may see last are every write of the key
// that is not a strict prev-predecessor of a write of the key in the
// read's prev closure; when the closure holds none, also none at all.
// Other reads are not value-checked (ReadsChecked counts those that are).
func ESDS(h *history.History, finalOrders map[string][]string, svc service.Service) (*ESDSReport, error) {
	return ESDSWith(h, finalOrders, svc, ESDSOptions{})
}

// ESDSWith is ESDS with options.
func ESDSWith(h *history.History, finalOrders map[string][]string, svc service.Service, opt ESDSOptions) (*ESDSReport, error) {
	if len(finalOrders) == 0 {
		return nil, fmt.Errorf("esds check: no final orders")
	}
	if svc == nil {
		return nil, fmt.Errorf("esds check: no service")
	}
	rep := &ESDSReport{Replicas: len(finalOrders)}
	bad := func(f string, a ...any) {
		if len(rep.Violations) < maxViolations {
			rep.Violations = append(rep.Violations, fmt.Sprintf(f, a...))
		} else if len(rep.Violations) == maxViolations {
			rep.Violations = append(rep.Violations, "(more violations not listed)")
		}
	}
	byID := map[string]*history.Op{}
	for i := range h.Ops {
		o := &h.Ops[i]
		if o.Opt(automaton.OptOpID) == "" {
			return nil, fmt.Errorf("esds check: operation %d (%s %s) has no id", i, o.Kind, o.Key)
		}
		if p, dup := byID[o.Opt(automaton.OptOpID)]; dup {
			// A client may record one operation once; two history entries
			// with one id are two operations the service cannot tell apart.
			return nil, fmt.Errorf("esds check: id %q recorded twice (%s %s and %s %s)", o.Opt(automaton.OptOpID), p.Kind, p.Key, o.Kind, o.Key)
		}
		byID[o.Opt(automaton.OptOpID)] = o
	}

	// Convergence.
	names := make([]string, 0, len(finalOrders))
	for n := range finalOrders {
		names = append(names, n)
	}
	sort.Strings(names)
	ref := finalOrders[names[0]]
	for _, n := range names[1:] {
		if d := firstDiff(ref, finalOrders[n]); d >= 0 {
			bad("replicas %s and %s did not converge: their orders differ at position %d (%s vs %s; lengths %d and %d)",
				names[0], n, d, at(ref, d), at(finalOrders[n], d), len(ref), len(finalOrders[n]))
		}
	}
	rep.Ordered = len(ref)

	// Reads that may be answered without a place in the order
	// (LocalReads): every non-strict read. One may also be in the order
	// (a retry at another replica, or one whose prev was not done there,
	// was ordered), but its answer may have come from a replica's view
	// without it; a read changes no state, so its place only matters to
	// the operations naming it in prev, which must follow its prev closure.
	unordered := func(id string) bool {
		o := byID[id]
		return opt.LocalReads && o != nil && o.Opt(automaton.OptStrict) != "1" && svc.IsRead(o.ServiceOp())
	}
	// prevOf is an operation's prev set as the order must honour it: a
	// local read stands for its own prev set, transitively.
	prevOf := func(o *history.Op) []string {
		var out []string
		seen := map[string]bool{}
		var walk func(ids []string)
		walk = func(ids []string) {
			for _, p := range ids {
				if seen[p] {
					continue
				}
				seen[p] = true
				if unordered(p) {
					walk(byID[p].Opts[automaton.OptPrev])
				} else {
					out = append(out, p)
				}
			}
		}
		walk(o.Opts[automaton.OptPrev])
		return out
	}

	// The order: ids known, once each, prev respected; values.
	pos := make(map[string]int, len(ref))
	val := make(map[string]service.Result, len(ref))
	st := svc.NewState()
	for i, id := range ref {
		o := byID[id]
		if o == nil {
			bad("replica %s's order holds %q, which no client invoked", names[0], id)
			continue
		}
		if _, dup := pos[id]; dup {
			bad("replica %s's order holds %q twice", names[0], id)
			continue
		}
		for _, p := range prevOf(o) {
			if q, ok := pos[p]; !ok {
				if _, later := indexOf(ref, p, i); later {
					bad("%q is ordered at %d, before %q from its prev set", id, i, p)
				} else {
					bad("%q (ordered at %d) names %q in its prev set, which is not in the order", id, i, p)
				}
			} else if q >= i {
				bad("%q is ordered before %q from its prev set", id, p)
			}
		}
		pos[id] = i
		val[id] = st.Apply(o.ServiceOp())
	}

	// Responses.
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		o := byID[id]
		if o.Outcome != history.OK || o.Result.Type == "err" {
			continue
		}
		if _, in := pos[id]; !in && unordered(id) {
			rep.NonStrict++
			rep.LocalReads++
			continue
		} else if !in {
			bad("%q (%s %s) completed with %s but no replica ordered it", id, o.Kind, o.Key, showResult(o.Result))
			continue
		}
		want := history.FromResult(val[id])
		same := o.Result.Equal(want)
		if o.Opt(automaton.OptStrict) == "1" {
			rep.Strict++
			if !same {
				bad("strict %q (%s %s) answered %s, but its value in the final order (position %d) is %s",
					id, o.Kind, o.Key, showResult(o.Result), pos[id], showResult(want))
			}
			continue
		}
		rep.NonStrict++
		if !same {
			rep.Inconsistent++
		}
	}
	checkReadsAgainstPrev(h, byID, svc, rep, bad)
	if all := rep.Strict + rep.NonStrict; all > 0 {
		rep.Degree = float64(rep.Inconsistent) / float64(all)
	}
	if rep.NonStrict > 0 {
		rep.NonStrictInconsistency = float64(rep.Inconsistent) / float64(rep.NonStrict)
	}
	rep.Ok = len(rep.Violations) == 0
	return rep, nil
}

// Detail renders the report for people.
func (r *ESDSReport) Detail() string {
	var b strings.Builder
	fmt.Fprintf(&b, "esds: %d replicas, %d ordered, %d strict, %d non-strict; %d inconsistent (Def. 3): degree of inconsistency %.1f%% of all responses (Def. 4), %.1f%% of non-strict ones",
		r.Replicas, r.Ordered, r.Strict, r.NonStrict, r.Inconsistent, 100*r.Degree, 100*r.NonStrictInconsistency)
	for _, v := range r.Violations {
		b.WriteString("\n  violation: " + v)
	}
	return b.String()
}

func showResult(r history.Result) string {
	switch r.Type {
	case "bytes":
		if len(r.Bytes) > 48 {
			return fmt.Sprintf("%q...(%d bytes)", r.Bytes[:24], len(r.Bytes))
		}
		return fmt.Sprintf("%q", r.Bytes)
	case "int":
		return fmt.Sprint(r.Int)
	case "err":
		return "error " + r.Err
	}
	return r.Type
}

func firstDiff(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		if len(a) < len(b) {
			return len(a)
		}
		return len(b)
	}
	return -1
}

func at(l []string, i int) string {
	if i < len(l) {
		return fmt.Sprintf("%q", l[i])
	}
	return "(end)"
}

func indexOf(l []string, s string, from int) (int, bool) {
	for i := from; i < len(l); i++ {
		if l[i] == s {
			return i, true
		}
	}
	return -1, false
}

// checkReadsAgainstPrev holds each non-strict read of one key whose writes
// are all blind to the specification's valset (see ESDS): its value must be
// that of a write it may see last given its prev closure.
func checkReadsAgainstPrev(h *history.History, byID map[string]*history.Op, svc service.Service, rep *ESDSReport, bad func(string, ...any)) {
	lk, ok := svc.(service.Lockable)
	if !ok {
		return
	}
	keyOf := func(o *history.Op) (string, bool) {
		ls := lk.Locks(o.ServiceOp())
		if len(ls) != 1 {
			return "", false
		}
		return ls[0].Key, true
	}
	// Writes per key, and the keys some write of which is not blind.
	writes := map[string][]*history.Op{}
	notBlind := map[string]bool{}
	for i := range h.Ops {
		o := &h.Ops[i]
		if o.Outcome == history.Failed || svc.IsRead(o.ServiceOp()) {
			continue
		}
		sop := o.ServiceOp()
		for _, l := range lk.Locks(sop) {
			if !l.Write {
				continue
			}
			writes[l.Key] = append(writes[l.Key], o)
			blind := (sop.Kind == "set" && len(sop.Args) == 1) || (sop.Kind == "del" && len(lk.Locks(sop)) == 1)
			if !blind {
				notBlind[l.Key] = true
			}
		}
	}
	// closure returns the prev closure of o (every operation o's prev sets
	// lead to, transitively), o excluded.
	closure := func(o *history.Op) map[string]bool {
		out := map[string]bool{}
		stack := append([]string(nil), o.Opts[automaton.OptPrev]...)
		for len(stack) > 0 {
			p := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if out[p] {
				continue
			}
			out[p] = true
			if q := byID[p]; q != nil {
				stack = append(stack, q.Opts[automaton.OptPrev]...)
			}
		}
		return out
	}
	valueAfter := func(w *history.Op, read service.Op) history.Result {
		st := svc.NewState()
		if w != nil {
			st.Apply(w.ServiceOp())
		}
		return history.FromResult(st.Apply(read))
	}
	for i := range h.Ops {
		r := &h.Ops[i]
		if r.Outcome != history.OK || r.Result.Type == "err" || r.Opt(automaton.OptStrict) == "1" || !svc.IsRead(r.ServiceOp()) {
			continue
		}
		k, ok := keyOf(r)
		if !ok || notBlind[k] {
			continue
		}
		rep.ReadsChecked++
		cl := closure(r)
		// The writes of k in the closure, and the closures of each.
		var inP []*history.Op
		for _, w := range writes[k] {
			if cl[w.Opt(automaton.OptOpID)] {
				inP = append(inP, w)
			}
		}
		below := map[string]bool{} // strict prev-predecessors of a write of k in the closure
		for _, m := range inP {
			for id := range closure(m) {
				below[id] = true
			}
		}
		legal := false
		if len(inP) == 0 && r.Result.Equal(valueAfter(nil, r.ServiceOp())) {
			legal = true
		}
		for _, w := range writes[k] {
			if legal {
				break
			}
			if !below[w.Opt(automaton.OptOpID)] && r.Result.Equal(valueAfter(w, r.ServiceOp())) {
				legal = true
			}
		}
		if !legal {
			ids := make([]string, 0, len(inP))
			for _, w := range inP {
				ids = append(ids, w.Opt(automaton.OptOpID))
			}
			sort.Strings(ids)
			bad("non-strict read %q (%s %s) answered %s, which no set of operations holding its prev closure gives (writes of the key there: %s)",
				r.Opt(automaton.OptOpID), r.Kind, r.Key, showResult(r.Result), strings.Join(ids, " "))
		}
	}
}
