package unreplicated

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Interactive transactions (the Grid Services thesis VI.A.4, T-Paxos's shape: each
// operation is answered before the commit), served optimistically and
// first-committer-wins. The package doc records the decisions.

// maxOpenTxns bounds the transactions the server holds open; beginning one
// more aborts the oldest (its later steps get ErrNoSuchTxn).
const maxOpenTxns = 1024

// txn is an open transaction at the server.
type txn struct {
	version uint64        // u.applied at the begin
	ws      service.State // the workspace: the state at the begin plus the transaction's writes
	ops     []service.Op  // the transaction's writes, in order
	envs    []service.Env // the Env of each write
}

// serveTxn serves one step of an interactive transaction at the server and
// answers it through answer.
func (u *Unreplicated) serveTxn(req automaton.Request, answer func(automaton.Response) automaton.Output) {
	id := req.Txn.Txn
	if req.Txn.Action == automaton.TxnBegin {
		u.onTxnBegin(id)
		u.Emit(answer(automaton.Response{ID: req.ID, Result: service.OK()}))
		return
	}
	t := u.txns[id]
	if t == nil {
		u.Emit(answer(automaton.Response{ID: req.ID, Result: service.Errorf("%s", automaton.ErrNoSuchTxn)}))
		return
	}
	switch req.Txn.Action {
	case automaton.TxnOp:
		u.Emit(answer(automaton.Response{ID: req.ID, Result: u.onTxnOp(t, req.Op, req.Env)}))
	case automaton.TxnCommit:
		u.onTxnCommit(id, t, req.ID, answer)
	case automaton.TxnAbort:
		u.endTxn(id)
		u.Emit(answer(automaton.Response{ID: req.ID, Result: service.OK()}))
	}
}

// onTxnBegin opens transaction id: it records the writes committed so far
// (the version a commit compares with) and a workspace copy of the state.
// A begin of a transaction already open (a retry) keeps it.
func (u *Unreplicated) onTxnBegin(id automaton.RequestID) {
	if u.txns[id] != nil {
		return
	}
	for len(u.txns) >= maxOpenTxns {
		u.endTxn(u.txnOrder[0]) // the oldest open one: aborted
	}
	if len(u.txnOrder) > 2*maxOpenTxns {
		u.compactTxnOrder()
	}
	t := &txn{version: u.applied}
	if !u.proto.dirtyTxn {
		t.ws = u.workspace()
	}
	u.txns[id] = t
	u.txnOrder = append(u.txnOrder, id)
}

// workspace returns an independent copy of the state: Clone when the
// state has it (KV's is copy-on-write), a snapshot restored into a fresh
// state otherwise.
func (u *Unreplicated) workspace() service.State {
	if c, ok := u.st.(interface{ Clone() service.State }); ok {
		return c.Clone()
	}
	ws := u.cfg.Service.NewState()
	if err := ws.Restore(u.st.Snapshot()); err != nil {
		panic(fmt.Sprintf("unreplicated: restoring a workspace from the state's snapshot: %v", err))
	}
	return ws
}

// onTxnOp runs op in the transaction's workspace with the request's Env
// and returns its result at once; a write is remembered for the commit.
func (u *Unreplicated) onTxnOp(t *txn, op service.Op, env service.Env) service.Result {
	res := service.ApplyEnv(t.ws, op, env)
	if !u.cfg.Service.IsRead(op) {
		t.ops = append(t.ops, op)
		t.envs = append(t.envs, env)
	}
	return res
}

// onTxnCommit commits transaction id if no write committed since its
// begin, and aborts it otherwise (first committer wins). The workspace then
// holds exactly the state of applying the transaction's writes, in order,
// to the current state, so it becomes the state; the writes are persisted
// as one record, so recovery replays all of them or none.
func (u *Unreplicated) onTxnCommit(id automaton.RequestID, t *txn, reqID automaton.RequestID, answer func(automaton.Response) automaton.Output) {
	u.endTxn(id)
	ans := answer(automaton.Response{ID: reqID, Result: service.OK()})
	switch {
	case u.proto.dirtyTxn:
		u.Emit(ans) // broken: the writes are in the state already
	case t.version != u.applied:
		u.Emit(answer(automaton.Response{ID: reqID, Result: service.Errorf("%s", automaton.ErrTxnAborted)}))
	case len(t.ops) == 0:
		u.Emit(ans) // read-only: nothing to apply or persist
	default:
		u.st = t.ws
		u.commitWrite(writeRecord{Ops: t.ops, Envs: t.envs}, ans)
	}
}

// endTxn forgets transaction id (committed, aborted or evicted).
func (u *Unreplicated) endTxn(id automaton.RequestID) {
	delete(u.txns, id)
	for len(u.txnOrder) > 0 && u.txns[u.txnOrder[0]] == nil {
		u.txnOrder = u.txnOrder[1:]
	}
}

// compactTxnOrder drops ended transactions from txnOrder.
func (u *Unreplicated) compactTxnOrder() {
	kept := u.txnOrder[:0:0]
	for _, id := range u.txnOrder {
		if u.txns[id] != nil {
			kept = append(kept, id)
		}
	}
	u.txnOrder = kept
}

// replay applies a write record at recovery: a transaction's writes each
// with its own Env, a group or a single operation with the record's Env.
func (u *Unreplicated) replay(r writeRecord) {
	if t := r.Nested; t != nil {
		// The recorded outcome, not a re-executed one (nested.go).
		u.noteNested(t.ID, automaton.Response{ID: t.ID, Result: t.Result, Results: t.Results})
	}
	if len(r.Envs) > 0 {
		for i, op := range r.Ops {
			service.ApplyEnv(u.st, op, r.Envs[i])
		}
		return
	}
	u.applyOps(r.Op, r.Ops, r.Env)
}
