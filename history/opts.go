package history

import "github.com/synod-dev/synod/service"

// SetOpts records the protocol-declared request options the operation
// carried (automaton.Options.Ext). Call it before completing p.
func (p *Pending) SetOpts(opts map[string][]string) {
	if len(opts) == 0 {
		p.op.Opts = nil
		return
	}
	m := make(map[string][]string, len(opts))
	for k, v := range opts {
		m[k] = append([]string{}, v...)
	}
	p.op.Opts = m
}

// InvokeTxn starts a transaction (TxnKind) or atomic group (MultiKind).
// Record its operations with Step, then complete it: Complete for a commit,
// Fail for an abort, Unknown when the commit's outcome is unknown.
func (r *Recorder) InvokeTxn(process int, ns, kind string) *Pending {
	return &Pending{r: r, op: Op{Process: process, Namespace: ns, Kind: kind, Call: r.now()}}
}

// Step records one operation of a transaction or group with the result the
// client saw.
func (p *Pending) Step(op service.Op, res service.Result) {
	p.step(op, OK, FromResult(res))
}

// StepUnknown records one operation of a transaction or group whose answer
// the client never saw (its Outcome is Unknown and its Result empty).
func (p *Pending) StepUnknown(op service.Op) {
	p.step(op, Unknown, Result{})
}

func (p *Pending) step(op service.Op, out Outcome, res Result) {
	o := Op{Process: p.op.Process, Namespace: p.op.Namespace, Kind: op.Kind, Key: op.Key, Outcome: out, Result: res}
	for _, a := range op.Args {
		o.Args = append(o.Args, string(a))
	}
	p.op.Txn = append(p.op.Txn, o)
}
