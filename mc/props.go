package mc

import (
	"fmt"
	"sync"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/check"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

// Properties, in Stateright's three kinds:
//
//   - always: the protocol's invariants after every step (world.step), the
//     runtime contract (no send to self or to an unknown node), and the
//     protocol's consistency checker on every history the search reaches
//     (historyVerdict): Porcupine's linearizability, or sequential
//     consistency, or (strict) serializability for groups and transactions,
//     as check.ForHistory selects for the protocol's declared model. The
//     client workload adds three (workload.go): a resent copy of a request
//     is answered as the first (NestedAnswer); replicas at one applied
//     count hold equal states, for a nondeterministic service (Converged);
//     a strict answer is its operation's value in a replica's stable order
//     (ESDSOrder, for eventually-serializable protocols, whose histories
//     check.ForHistory does not judge here: workload_esds.go).
//   - sometimes: states that must be reachable, or the search proves
//     nothing (sometimesProps): a write completes (a committed transaction
//     or an applied group with a write counts; a begin, an abort or an
//     operation inside a transaction does not); a read returns a value.
//   - eventually (bounded): on every path that ends (no event enabled)
//     within the depth, every client's script completed. Paths cut by the
//     depth bound are not judged (that would be unbounded liveness).

// Sometimes properties, by name.
const (
	SomeWrite = "a write completes"
	SomeRead  = "a read returns a value"
)

var sometimesProps = []string{SomeWrite, SomeRead}

// EventuallyDone is the bounded eventually property.
const EventuallyDone = "every request is eventually answered (on paths that end within the depth)"

// sometimes reports which sometimes properties the last return satisfies.
func (w *world) sometimes() (write, read bool) {
	if !w.returned || len(w.hist) == 0 {
		return
	}
	h := w.hist[len(w.hist)-1]
	op := w.script(h.client)[h.op]
	if h.res.Type == service.ResultErr || automaton.IsMemberOp(op) {
		// a membership change is no write of the service (it is left out
		// of the history too: workloadHistory)
		return
	}
	if w, r, ok := w.stepResult(h.client, h.op, h.res); ok {
		return w, r
	}
	if w.svc.IsRead(op) {
		return false, h.res.Type == service.ResultBytes || h.res.Type == service.ResultInt
	}
	return true, false
}

// done reports whether every client's script completed.
func (w *world) done() bool {
	for c, cl := range w.clients {
		if cl.pending || cl.next < len(w.script(c)) {
			return false
		}
	}
	return true
}

// history converts the hops into a history: times are positions in the
// real-time order, and requests still pending are of unknown outcome.
func (w *world) history() *history.History {
	h := &history.History{Meta: map[string]string{"protocol": w.cfg.Protocol, "source": "model checker"}}
	if w.cfg.Model.Service != "" {
		h.Meta["service"] = w.cfg.Model.Service
	}
	w.workloadHistory(h)
	return h
}

// verdicts caches history verdicts by history hash: many states share one
// history.
type verdicts struct {
	m       sync.Map
	checked int64
	mu      sync.Mutex
	// opts are the check's options for the model's service; skip is set
	// when package check has no model of that service under the
	// protocol's consistency model (probed once: checkerFor).
	once sync.Once
	opts check.Options
	skip string
}

// historyVerdict judges w's history with the protocol's checker ("" when
// it passes, or when the protocol's model has no history checker here).
func (v *verdicts) historyVerdict(w *world) string {
	model, _ := automaton.ConsistencyOf(w.cfg.Protocol)
	v.once.Do(func() { v.opts, v.skip = checkOptions(w.cfg, model) })
	if v.skip != "" {
		return ""
	}
	key := w.histH
	if r, ok := v.m.Load(key); ok {
		return r.(string)
	}
	h := w.history()
	chk := check.ForHistory(model, h)
	rep, err := chk(h, v.opts)
	verdict := ""
	switch {
	case err != nil:
		verdict = "history: " + err.Error()
	case rep.Result == check.Illegal:
		verdict = fmt.Sprintf("history not %s: %s", modelName(rep), firstLine(rep.Detail))
	}
	v.mu.Lock()
	v.checked++
	v.mu.Unlock()
	v.m.Store(key, verdict)
	return verdict
}

// checkOptions tells package check which service the model's namespace
// runs (the model's Service; its histories' operations are in the
// default namespace, ""), and returns why the history check is skipped
// ("" when it runs): the eventually-serializable model and the
// nondeterministic matchmaker are judged with the replicas' final orders
// (sim/esds.go, sim's matchmaker check), not here; any other service is
// judged only if check has a model of it under the protocol's consistency
// model, which the checker itself says by accepting the options on an
// empty history (Linearizable: kv, counter and every registered
// deterministic service; Sequential: kv only). So orca's replies are not
// judged as KV operations: orca-primary is sequentially consistent, which
// check models for KV alone, and its model is checked by its invariants.
func checkOptions(cfg *Config, model automaton.Consistency) (check.Options, string) {
	svc := cfg.Model.Service
	if svc == "" {
		svc = "kv"
	}
	opts := check.Options{IgnoreDelCount: automaton.HasRegisterSemantics(cfg.Protocol), Services: map[string]string{"": svc}}
	switch {
	case model == automaton.EventuallySerializable:
		return opts, "eventually serializable: judged with the replicas' final orders"
	case svc == "matchmaker":
		return opts, "the matchmaker's check needs the replicas' environments"
	}
	empty := &history.History{Meta: map[string]string{"service": svc}}
	if _, err := check.ForHistory(model, empty)(empty, opts); err != nil {
		return opts, err.Error()
	}
	return opts, ""
}

func modelName(r *check.Report) string {
	if r.Guarantee == "" {
		return check.GuaranteeLinearizable
	}
	return r.Guarantee
}

func firstLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
