package mc

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

// ESDS's strict operations (the ESDS thesis; protocol/esds). A strict operation's
// answer must be its value in the eventual total order (check.ESDS, which
// the simulator runs on the replicas' final orders after quiescence). The
// model checker cannot wait for quiescence, so it judges a strict answer
// against the stable order: the prefix of the eventual order each replica
// applied to its stable state, which never changes (protocol/esds
// StableOrder; recorded because the checker calls RecordOrder before a
// replica starts, as the simulator does). After a replica's step, every
// answered strict operation in its stable order must have answered the
// value the service gives it there. Operations are named by their op id
// (the request option automaton.OptOpID, which the model's Requests sets).

// orderRecorder and stableOrderer are protocol/esds's hooks (*ESDS).
type (
	orderRecorder interface{ RecordOrder() }
	stableOrderer interface{ StableOrder() []string }
)

// recordOrder asks a replica to keep its stable order (before its Start).
func recordOrder(a automaton.Automaton) {
	if r, ok := a.(orderRecorder); ok {
		r.RecordOrder()
	}
}

// checkStrict judges the strict answers against node i's stable order.
func (w *world) checkStrict(i int) {
	so, ok := w.nodes[i].a.(stableOrderer)
	if !ok {
		return
	}
	order := so.StableOrder()
	if len(order) == 0 {
		return
	}
	// The operations invoked, by id, and the strict ones answered.
	type answered struct {
		res service.Result
		ok  bool
	}
	ops := map[string]service.Op{}
	strict := map[string]answered{}
	for _, x := range w.hist {
		if w.resendOf(x.client, x.op) >= 0 {
			continue
		}
		req := w.request(x.client, x.op)
		id := req.Opts.String(automaton.OptOpID)
		if id == "" {
			continue
		}
		if !x.ret {
			ops[id] = req.Op
			continue
		}
		if req.Opts.Bool(automaton.OptStrict) && x.res.Type != service.ResultErr {
			strict[id] = answered{x.res, true}
		}
	}
	if len(strict) == 0 {
		return
	}
	st := w.svc.NewState()
	for pos, id := range order {
		op, known := ops[id]
		if !known {
			return // an operation no client of this path invoked: not judged
		}
		v := st.Apply(op)
		a := strict[id]
		if a.ok && !history.FromResult(a.res).Equal(history.FromResult(v)) {
			w.fail(fmt.Sprintf("%s: strict %s (%s) was answered %v, but its value at position %d of %s's stable order is %v",
				ESDSOrder, id, op, a.res, pos, w.ids[i], v))
			return
		}
	}
}
