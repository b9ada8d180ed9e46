package sim

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

// Interactive transactions (Config.Txns; automaton/txn.go, the Grid Services thesis
// VI.A.4's shape): a client begins, sends TxnSize operations one request at
// a time, each answered before the next, then commits or (with probability
// TxnAbort) aborts. Every step is a request of its own with a fresh
// RequestID; the history records the whole transaction as one TxnKind
// entry whose Txn holds each operation with the answer the client saw.
//
// Outcomes. A committed transaction completes (OK). It fails (Failed: no
// effect) when the client aborts it, when the protocol answers
// ErrTxnAborted or ErrNoSuchTxn, and when any step before the commit times
// out or errs: the client then abandons it without a commit, and only a
// commit makes a transaction's effects visible (automaton/txn.go). A
// commit that times out or errs otherwise leaves the outcome Unknown; it is
// resent only to protocols with IdempotentRetry, like any write.

// clientTxn is a client's transaction under way.
type clientTxn struct {
	id       automaton.RequestID // the begin's, which names the transaction
	first    service.Op          // the first operation, drawn with the begin
	sent     int                 // operations sent so far
	abort    bool                // the client aborts instead of committing
	answered bool                // the current step's answer was recorded
}

// beginTxn starts a transaction whose first operation is op: c.req becomes
// its TxnBegin.
func (s *simulator) beginTxn(c *client, op service.Op) {
	c.txn = &clientTxn{id: c.req.ID, first: op, abort: s.rngTxn.Float64() < s.cfg.TxnAbort}
	c.req = automaton.Request{ID: c.req.ID, Txn: &automaton.TxnStep{Txn: c.req.ID, Action: automaton.TxnBegin}}
	c.isRead = false
	c.pending = s.rec.InvokeTxn(c.idx, Namespace, history.TxnKind)
}

// nextTxnStep sends the transaction's next step: an operation, or the
// commit (abort) after the last one.
func (s *simulator) nextTxnStep(c *client) {
	t := c.txn
	var op service.Op
	action := automaton.TxnCommit
	switch {
	case t.sent < s.cfg.TxnSize:
		action, op = automaton.TxnOp, t.first
		if t.sent > 0 {
			c.ops++
			op = s.genOp(c)
		}
		t.sent++
	case t.abort:
		action = automaton.TxnAbort
	}
	c.seq++
	c.req = automaton.Request{ID: automaton.RequestID{Client: c.id, Seq: c.seq}, Op: op,
		Txn: &automaton.TxnStep{Txn: t.id, Action: action}}
	c.req.Opts = automaton.AssignOptions(s.optSpecs, c.req.ID, c.req.Opts)
	c.isRead = action == automaton.TxnOp && s.svc.IsRead(op)
	t.answered = false
	c.attempt = 0
	c.node = -1
	s.tracef("client %d: txn %v %v %v as %v", c.idx, t.id, action, op, c.req.ID)
	s.sendAttempt(c)
}

// onTxnResp handles the answer to the current step.
func (s *simulator) onTxnResp(c *client, res service.Result) {
	s.tracef("client %d: %v -> %v", c.idx, c.req.ID, res)
	s.digestClient(c, 'C', &res)
	if res.IsErr() {
		s.stats.ErrorReplies++
		s.txnTrouble(c, &res)
		return
	}
	switch c.req.Txn.Action {
	case automaton.TxnBegin:
		s.nextTxnStep(c)
	case automaton.TxnOp:
		c.pending.Step(c.req.Op, res)
		c.txn.answered = true
		s.nextTxnStep(c)
	case automaton.TxnCommit:
		s.stats.TxnCommitted++
		s.endTxn(c, history.OK, res)
	case automaton.TxnAbort:
		s.stats.TxnAborted++
		s.endTxn(c, history.Failed, res)
	}
}

// txnTrouble handles a step that erred (res) or timed out or lost its
// connection (res nil).
func (s *simulator) txnTrouble(c *client, res *service.Result) {
	action := c.req.Txn.Action
	switch {
	case res != nil && res.Err == automaton.ErrTxnAborted:
		s.stats.TxnConflicts++
		s.endTxn(c, history.Failed, *res)
	case res != nil && res.Err == automaton.ErrNoSuchTxn:
		s.stats.TxnFailed++
		s.endTxn(c, history.Failed, *res)
	case action != automaton.TxnCommit:
		// Abandoned before its commit: it can never take effect.
		s.stats.TxnFailed++
		s.endTxn(c, history.Failed, service.Errorf("ERR the client abandoned the transaction after a failed %v", action))
	case res == nil && s.proto.IdempotentRetry() && c.attempt < s.cfg.MaxAttempts:
		s.sendAttempt(c)
	default:
		s.stats.TxnUnknown++
		s.tracef("client %d gives up on the commit of txn %v (unknown outcome)", c.idx, c.txn.id)
		s.digestClient(c, 'U', nil)
		s.endTxn(c, history.Unknown, service.Result{})
	}
}

// endTxn records the transaction's outcome and frees the client.
func (s *simulator) endTxn(c *client, out history.Outcome, res service.Result) {
	if c.req.Txn.Action == automaton.TxnOp && !c.txn.answered {
		c.pending.StepUnknown(c.req.Op)
	}
	switch out {
	case history.OK:
		c.pending.Complete(res)
	case history.Failed:
		c.pending.Fail(res)
	default:
		c.pending.Unknown()
	}
	c.txn = nil
	s.finishOp(c)
}
