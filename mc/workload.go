package mc

import (
	"encoding/hex"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

// Workload steps (issue 20 item 3): a client's script (ModelConfig.Scripts)
// holds service operations and, beside them, these steps, written as
// operations whose kind is the step's name, so that a printed trace shows
// them ("client 1 sends txn-begin to n1", "client 1 sends resend 1 to n1")
// and a saved trace keeps them in its scripts (trace.go's opString and
// parseOp carry them unchanged):
//
//   - "txn-begin", then operations, then "txn-commit" or "txn-abort": an
//     interactive transaction (automaton/txn.go). Each step is a request of
//     its own, sent once the previous one is answered; the operations
//     between begin and commit are TxnOp steps of the transaction the begin
//     named. The history records it as one TxnKind entry (as the
//     simulator's sim/txn.go does): committed (OK), aborted or refused
//     (Failed), or pending (Unknown), so the protocol's declared checker
//     (strict serializability for a linearizable one: check.ForHistory)
//     judges it.
//   - "group" with one argument per operation, its words joined by "+"
//     ("group set+x+1 set+y+1"): an atomic group (Request.Ops), answered
//     with one result per operation. The history records it as one
//     MultiKind entry whose steps hold those results (as sim does), so the
//     serializability checker judges it; the hop keeps the results as an
//     array (hopResult).
//   - "nested" followed by an operation ("nested get x"): the operation
//     sent as a nested request (Request.Nested, automaton/call.go: what a
//     calling namespace's replica sends), to be answered alike at every
//     copy and executed once.
//   - "resend k": a copy of the client's k-th request (1-based), with the
//     same RequestID and content, sent later (as the replicas of a calling
//     namespace each send one nested call: sim --nested). The copy must be
//     answered as the first was (nestedAnswerCheck, the simulator's
//     nested-answer check); it is not a new operation of the history.
//
// Strict operations (ESDS) need no step: the model's Requests function sets
// the option, and the ESDS check (esdsCheck) judges the strict answers.
const (
	StepTxnBegin  = "txn-begin"
	StepTxnCommit = "txn-commit"
	StepTxnAbort  = "txn-abort"
	StepResend    = "resend"
	StepGroup     = "group"
	StepNested    = "nested"
)

// NestedAnswer, Converged and ESDSOrder are the always properties the
// workload adds (their violations name them).
const (
	NestedAnswer = "a later copy of a request is answered as the first"
	Converged    = "replicas that executed the same prefix hold equal states"
	ESDSOrder    = "strict answers match the eventual order (check.ESDS)"
)

// Resend returns the script step that sends a copy of request k (1-based).
func Resend(k int) service.Op { return service.Op{Kind: StepResend, Key: strconv.Itoa(k)} }

// Group returns the script step that sends ops as one atomic group (their
// words must hold no space or "+").
func Group(ops ...service.Op) service.Op {
	g := service.Op{Kind: StepGroup}
	for _, op := range ops {
		g.Args = append(g.Args, []byte(strings.ReplaceAll(opString(op), " ", "+")))
	}
	return g
}

// Nested returns the script step that sends op as a nested request.
func Nested(op service.Op) service.Op {
	return service.Op{Kind: StepNested, Key: op.Kind, Args: append([][]byte{[]byte(op.Key)}, op.Args...)}
}

// nestedOp returns the operation of a nested step.
func nestedOp(n service.Op) service.Op {
	op := service.Op{Kind: n.Key}
	if len(n.Args) > 0 {
		op.Key, op.Args = string(n.Args[0]), n.Args[1:]
	}
	return op
}

// groupOps returns the operations of a group step (read back from a
// trace file, the first one is in the Key: trace.go's parseOp).
func groupOps(g service.Op) []service.Op {
	words := g.Args
	if g.Key != "" {
		words = append([][]byte{[]byte(g.Key)}, g.Args...)
	}
	ops := make([]service.Op, 0, len(words))
	for _, a := range words {
		ops = append(ops, parseOp(strings.ReplaceAll(string(a), "+", " ")))
	}
	return ops
}

// hopResult is the result a hop keeps of a response: its Result, or for an
// applied group its Results as an array.
func hopResult(r automaton.Response) service.Result {
	if len(r.Results) > 0 && !r.Result.IsErr() {
		return service.Array(r.Results...)
	}
	return r.Result
}

// TxnBegin, TxnCommit and TxnAbort return the transaction steps.
func TxnBegin() service.Op  { return service.Op{Kind: StepTxnBegin} }
func TxnCommit() service.Op { return service.Op{Kind: StepTxnCommit} }
func TxnAbort() service.Op  { return service.Op{Kind: StepTxnAbort} }

// isStep reports whether op is a workload step rather than a service
// operation.
func isStep(op service.Op) bool {
	switch op.Kind {
	case StepTxnBegin, StepTxnCommit, StepTxnAbort, StepResend, StepGroup, StepNested:
		return true
	}
	return false
}

// resendOf returns the index (from 0) of the request step i of client c
// copies, or -1 when step i is not a resend.
func (w *world) resendOf(client, i int) int {
	op := w.script(client)[i]
	if op.Kind != StepResend {
		return -1
	}
	k, err := strconv.Atoi(op.Key)
	if err != nil || k < 1 || k > i {
		return -1
	}
	if j := w.resendOf(client, k-1); j >= 0 {
		return j
	}
	return k - 1
}

// txnOf returns the index of the txn-begin that opens the transaction step
// i of client c belongs to (i itself for a begin), or -1.
func (w *world) txnOf(client, i int) int {
	s := w.script(client)
	for j := i; j >= 0; j-- {
		switch s[j].Kind {
		case StepTxnBegin:
			return j
		case StepTxnCommit, StepTxnAbort:
			if j != i {
				return -1
			}
		}
	}
	return -1
}

// workloadRequest turns base, client c's request i as built from its
// operation, into a transaction's step when i is one (a resend is the
// request it copies: world.request).
func (w *world) workloadRequest(c, i int, base automaton.Request) automaton.Request {
	switch op := w.script(c)[i]; op.Kind {
	case StepGroup:
		base.Op, base.Ops = service.Op{}, groupOps(op)
		return base
	case StepNested:
		base.Op, base.Nested = nestedOp(op), true
		return base
	}
	b := w.txnOf(c, i)
	if b < 0 {
		return base
	}
	txn := automaton.RequestID{Client: uint64(c + 1), Seq: uint64(b + 1)}
	switch w.script(c)[i].Kind {
	case StepTxnBegin:
		return automaton.Request{ID: base.ID, Txn: &automaton.TxnStep{Txn: txn, Action: automaton.TxnBegin}}
	case StepTxnCommit:
		return automaton.Request{ID: base.ID, Txn: &automaton.TxnStep{Txn: txn, Action: automaton.TxnCommit}}
	case StepTxnAbort:
		return automaton.Request{ID: base.ID, Txn: &automaton.TxnStep{Txn: txn, Action: automaton.TxnAbort}}
	}
	base.Txn = &automaton.TxnStep{Txn: txn, Action: automaton.TxnOp}
	return base
}

// expectedSeq is the RequestID.Seq that answers client c's step i (a
// resend is answered under the id of the request it copies).
func (w *world) expectedSeq(c, i int) uint64 {
	if k := w.resendOf(c, i); k >= 0 {
		return uint64(k + 1)
	}
	return uint64(i + 1)
}

// nestedAnswerCheck: the answer res to client c's step i, when that step
// is a resend, must equal the answer its first copy got (the simulator's
// nested-answer check: every copy of one request id answered alike).
func (w *world) nestedAnswerCheck(c, i int, res service.Result) {
	k := w.resendOf(c, i)
	if k < 0 {
		return
	}
	for _, x := range w.hist {
		if x.ret && x.client == c && x.op == k {
			if !reflect.DeepEqual(x.res, res) {
				w.fail(fmt.Sprintf("%s: client %d's copy of request %d (%s) was answered %v, the first copy %v",
					NestedAnswer, c+1, k+1, w.script(c)[k], res, x.res))
			}
			return
		}
	}
}

// stepResult says what the return of a workload step counts for among the
// sometimes properties: a committed transaction is a completed write; an
// applied group a completed write (or read, when it only reads); begins,
// aborts, copies and the operations inside a transaction count for
// nothing (ok true: judged here; false: an ordinary operation).
func (w *world) stepResult(c, i int, res service.Result) (write, read, ok bool) {
	op := w.script(c)[i]
	if op.Kind == StepNested {
		if res.IsErr() {
			return false, false, true
		}
		if w.svc.IsRead(nestedOp(op)) {
			return false, res.Type == service.ResultBytes || res.Type == service.ResultInt, true
		}
		return true, false, true
	}
	if !isStep(op) && w.txnOf(c, i) < 0 {
		return false, false, false
	}
	if op.Kind == StepGroup && !res.IsErr() {
		for _, g := range groupOps(op) {
			write = write || !w.svc.IsRead(g)
		}
		return write, !write, true
	}
	return op.Kind == StepTxnCommit && !res.IsErr(), false, true
}

// workloadHistory converts the hops into a history (props.go's history):
// operations as they are, each interactive transaction as one TxnKind
// entry, resends left out (the nested-answer check judges them).
func (w *world) workloadHistory(h *history.History) {
	at := map[[2]int]int{}   // (client, op) -> index in h.Ops
	step := map[[2]int]int{} // (client, op) -> index in its transaction's Txn
	open := map[int]int{}    // client -> index of its open transaction in h.Ops
	for t, x := range w.hist {
		op := w.script(x.client)[x.op]
		key := [2]int{x.client, x.op}
		if w.resendOf(x.client, x.op) >= 0 {
			continue
		}
		if automaton.IsMemberOp(op) {
			// A membership change (automaton.MemberAdd in a script, the
			// administrator's request sim/membership.go sends) is no
			// operation of the service the checker models: it is left
			// out, as sim leaves its admin client's requests out.
			continue
		}
		b := w.txnOf(x.client, x.op)
		if b < 0 {
			if !x.ret {
				at[key] = len(h.Ops)
				h.Ops = append(h.Ops, w.historyOp(x.client, x.op, int64(t)))
				continue
			}
			o := &h.Ops[at[key]]
			o.Return, o.Outcome, o.Result = int64(t), history.OK, history.FromResult(x.res)
			if o.Kind == history.MultiKind {
				endGroup(o, x.res)
			}
			continue
		}
		ti, isOpen := open[x.client]
		switch {
		case op.Kind == StepTxnBegin && !x.ret:
			open[x.client] = len(h.Ops)
			h.Ops = append(h.Ops, history.Op{Process: x.client + 1, Kind: history.TxnKind, Call: int64(t), Outcome: history.Unknown})
		case !isOpen:
			// a step of a transaction already ended (refused or failed)
		case op.Kind == StepTxnBegin || !isStep(op) && x.ret:
			if x.res.IsErr() {
				w.endTxn(h, x.client, open, int64(t), history.Failed, x.res)
				continue
			}
			if op.Kind == StepTxnBegin {
				continue
			}
			s := &h.Ops[ti].Txn[step[key]]
			s.Outcome, s.Result = history.OK, history.FromResult(x.res)
		case !isStep(op):
			o := w.historyOp(x.client, x.op, 0)
			o.Call = 0
			step[key] = len(h.Ops[ti].Txn)
			h.Ops[ti].Txn = append(h.Ops[ti].Txn, o)
		case !x.ret:
			// a commit or abort sent: the outcome waits for its answer
		case op.Kind == StepTxnCommit && !x.res.IsErr():
			w.endTxn(h, x.client, open, int64(t), history.OK, x.res)
		default: // an abort, or a commit refused
			w.endTxn(h, x.client, open, int64(t), history.Failed, x.res)
		}
	}
}

func (w *world) endTxn(h *history.History, c int, open map[int]int, t int64, out history.Outcome, res service.Result) {
	o := &h.Ops[open[c]]
	o.Return, o.Outcome, o.Result = t, out, history.FromResult(res)
	delete(open, c)
}

// endGroup completes a group's entry o with its answer: each step's result
// when it was applied (res is hopResult's array), or a refusal (Failed:
// nothing applied).
func endGroup(o *history.Op, res service.Result) {
	if res.IsErr() || len(res.Elems) != len(o.Txn) {
		o.Outcome = history.Failed
		return
	}
	o.Result = history.FromResult(service.OK())
	for k := range o.Txn {
		o.Txn[k].Outcome, o.Txn[k].Result = history.OK, history.FromResult(res.Elems[k])
	}
}

// historyOp is client c's i-th operation as a pending history entry (a
// group's with its operations as steps of unknown outcome).
func (w *world) historyOp(c, i int, call int64) history.Op {
	req := w.request(c, i)
	if len(req.Ops) > 0 {
		g := history.Op{Process: c + 1, Kind: history.MultiKind, Call: call, Outcome: history.Unknown}
		for _, op := range req.Ops {
			s := history.Op{Process: c + 1, Kind: op.Kind, Key: op.Key, Outcome: history.Unknown}
			for _, a := range op.Args {
				s.Args = append(s.Args, string(a))
			}
			g.Txn = append(g.Txn, s)
		}
		return g
	}
	op := history.Op{Process: c + 1, Kind: req.Op.Kind, Key: req.Op.Key, Call: call, Outcome: history.Unknown}
	for _, a := range req.Op.Args {
		op.Args = append(op.Args, string(a))
	}
	if w.svc.IsRead(req.Op) {
		op.ReadMode = req.Opts.Read.String()
	}
	if len(req.Opts.Ext) > 0 {
		op.Opts = req.Opts.Ext
	}
	return op
}

// workloadCheck judges the workload's always properties after node i
// stepped: convergence when the service is nondeterministic (where
// replicas most easily part; other services' replicas are held to each
// other by the protocols' invariants and the history check, and hashing
// every replica's state on every step would slow every model), and ESDS's
// strict answers (esds.go).
func (w *world) workloadCheck(i int) {
	if w.violation != "" || w.nodes[i].a == nil {
		return
	}
	if service.IsNondeterministic(w.svc) {
		w.checkConvergence(i)
	}
	w.checkStrict(i)
}

// checkConvergence: after node i stepped, every up replica reporting the
// same applied count as i holds a state of equal service.StateHash (the
// simulator's convergence check, sim/converge.go, judged per state: a
// state's replicas only, no memory of replicas that crashed).
func (w *world) checkConvergence(i int) {
	r, ok := w.nodes[i].a.(automaton.StateReporter)
	if !ok || w.violation != "" {
		return
	}
	applied, st := r.ServiceState()
	if st == nil || applied == 0 {
		return
	}
	var mine [32]byte
	hashed := false
	for j := range w.nodes {
		o, ok := w.nodes[j].a.(automaton.StateReporter)
		if j == i || !ok {
			continue
		}
		n, ost := o.ServiceState()
		if ost == nil || n != applied {
			continue
		}
		if !hashed {
			mine, hashed = service.StateHash(st), true
		}
		if h := service.StateHash(ost); h != mine {
			w.fail(fmt.Sprintf("%s: %s and %s executed %d and hold states %s and %s", Converged,
				w.ids[i], w.ids[j], applied, hex.EncodeToString(mine[:4]), hex.EncodeToString(h[:4])))
			return
		}
	}
}
