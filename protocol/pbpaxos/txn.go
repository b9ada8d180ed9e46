package pbpaxos

import (
	"sort"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// T-Paxos (the Grid Services thesis VI.A.4): the leader executes and answers each request
// of a transaction at once and coordinates only the commit, which is one
// proposal of the basic protocol carrying the transaction's writes and the
// leader's state after them. A leader switch aborts the transactions in
// flight (VI.A.5): they live only at the leader that began them, and a
// commit for one this leader does not hold answers ErrTxnAborted.
//
// Concurrency control is the service's (service/lock.go): the service
// names the objects each operation touches (Lockable: per account for the
// bank, per key for KV) and the leader keeps a strict two-phase lock
// table, no-wait: a transaction's operation that conflicts with another
// transaction's lock aborts the requesting transaction. A single write (or
// a group) that conflicts aborts the transactions holding the locks it
// needs (it never waits or fails). Locks are released at the commit's
// proposal: the commit's writes are then in the leader's state, every
// later proposal is chained after it, and a transaction that read them
// commits only after it.
//
// A transaction executes in a workspace: the leader's tentative state with
// the transaction's own writes redone on it (each with its Env), rebuilt
// when the tentative state changed since. Its locks guarantee that the
// objects it touched did not change in between, so the redo gives the
// answers the client saw; the commit redoes the writes on the tentative
// state itself.

// txn is a transaction open at the leader.
type txn struct {
	id         automaton.RequestID
	committing bool // its commit is queued: it holds its locks, takes no more steps
	ops        []service.Op
	envs       []service.Env
	ws         *machine
	wsGen      uint64
	// steps: the answers given to its operations, so that a step
	// forwarded twice (a lost answer, a retransmission) is answered
	// again, not executed again.
	steps map[automaton.RequestID]service.Result
}

// noTxn owns the locks a single write checks (it never holds any).
var noTxn = automaton.RequestID{}

// leadTxn serves one step of a transaction at the ready leader.
func (a *PBPaxos) leadTxn(p *pend) {
	req := p.req
	id := req.Txn.Txn
	switch req.Txn.Action {
	case automaton.TxnBegin:
		if a.txns[id] == nil {
			a.beginTxn(id)
		}
		a.answerConfirmed(p, service.OK())
	case automaton.TxnOp:
		t := a.txns[id]
		if t != nil {
			if res, ok := t.steps[req.ID]; ok {
				a.answerConfirmed(p, res)
				return
			}
		}
		if t == nil || t.committing {
			a.answerConfirmed(p, service.Errorf("%s", automaton.ErrNoSuchTxn))
			return
		}
		if _, ok := a.locks.Acquire(id, a.locksOf(req.Op)); !ok {
			a.endTxn(id) // no-wait: the requester aborts
			a.answerConfirmed(p, service.Errorf("%s", automaton.ErrTxnAborted))
			return
		}
		ws := a.workspace(t)
		env := a.logEnv(req)
		res := service.ApplyEnv(ws.st, req.Op, env)
		if !a.cfg.Service.IsRead(req.Op) {
			t.ops = append(t.ops, req.Op)
			t.envs = append(t.envs, env)
		}
		t.steps[req.ID] = res
		a.answerConfirmed(p, res)
	case automaton.TxnCommit:
		if a.dedup(p) {
			return
		}
		t := a.txns[id]
		if t == nil || t.committing {
			a.answerConfirmed(p, service.Errorf("%s", automaton.ErrTxnAborted))
			return
		}
		t.committing = true
		c := cmd{Kind: cmdTxn, ID: req.ID, Ops: t.ops, Envs: t.envs}
		p.txnCmd = &c
		p.state = pQueued
		a.queue = append(a.queue, req.ID)
		a.propose()
	case automaton.TxnAbort:
		a.endTxn(id)
		a.answerConfirmed(p, service.OK())
	}
}

// answerConfirmed answers a transaction step the leader served without
// the log, once a majority confirms this node still leads (the X-Paxos
// confirms, reads.go): with clients that fan out, a deposed leader that
// still believes it leads would otherwise answer steps of a transaction
// the real leader runs with other answers, or abort one it commits. The
// confirms travel while the step executes, as for a read.
func (a *PBPaxos) answerConfirmed(p *pend, res service.Result) {
	p.state = pRead
	a.freshConfirms(p.req.ID)
	if !p.req.Fanout && !p.asked {
		p.asked = true
		a.broadcast(&message{Kind: kindRead, Req: wireRequest(a.cfg.Service, p.req), Origin: a.cfg.Self})
	}
	p.res, p.results, p.executed = res, nil, true
	a.checkRead(p)
}

// commitReady is called when a queued commit's turn to execute comes: it
// reports whether the transaction survived (a single write queued before
// it may have aborted it) and releases its locks (the commit point).
func (a *PBPaxos) commitReady(p *pend) bool {
	id := p.req.Txn.Txn
	t := a.txns[id]
	if t == nil || !t.committing {
		a.answer(p.req.ID, service.Errorf("%s", automaton.ErrTxnAborted), nil)
		return false
	}
	a.endTxn(id)
	return true
}

func (a *PBPaxos) beginTxn(id automaton.RequestID) {
	for len(a.txns) >= maxOpenTxns && len(a.txnOrder) > 0 {
		a.endTxn(a.txnOrder[0])
	}
	a.txns[id] = &txn{id: id, steps: map[automaton.RequestID]service.Result{}}
	a.txnOrder = append(a.txnOrder, id)
}

// endTxn forgets a transaction and releases its locks (commit, abort,
// no-wait conflict, a single write's wound, eviction).
func (a *PBPaxos) endTxn(id automaton.RequestID) {
	a.locks.Release(id)
	delete(a.txns, id)
	for len(a.txnOrder) > 0 && a.txns[a.txnOrder[0]] == nil {
		a.txnOrder = a.txnOrder[1:]
	}
	if len(a.txnOrder) > 2*maxOpenTxns {
		kept := a.txnOrder[:0:0]
		for _, x := range a.txnOrder {
			if a.txns[x] != nil {
				kept = append(kept, x)
			}
		}
		a.txnOrder = kept
	}
}

// locksOf: the service's locks for op, or one lock on everything for a
// service that names none.
func (a *PBPaxos) locksOf(op service.Op) []service.Lock {
	if ls, ok := service.LocksOf(a.cfg.Service, op); ok {
		return ls
	}
	return []service.Lock{{Key: "\x00all", Write: true}}
}

// wound aborts the transactions holding locks a write command needs.
func (a *PBPaxos) wound(c cmd) {
	if len(a.txns) == 0 {
		return
	}
	var ls []service.Lock
	switch c.Kind {
	case cmdOp:
		ls = a.locksOf(c.Op)
	case cmdGroup:
		for _, op := range c.Ops {
			ls = append(ls, a.locksOf(op)...)
		}
	default:
		return
	}
	hs := a.locks.Conflicts(noTxn, ls)
	automaton.SortRequestIDs(hs)
	for _, h := range hs {
		a.endTxn(h)
	}
}

// workspace returns t's workspace: the tentative state plus t's writes.
func (a *PBPaxos) workspace(t *txn) *machine {
	if t.ws != nil && t.wsGen == a.tentGen {
		return t.ws
	}
	ws := a.tentative().clone()
	for i, op := range t.ops {
		service.ApplyEnv(ws.st, op, t.envs[i])
	}
	t.ws, t.wsGen = ws, a.tentGen
	return ws
}

// openTxns lists the open transactions' ids, sorted (for Dump).
func (a *PBPaxos) openTxns() []automaton.RequestID {
	out := make([]automaton.RequestID, 0, len(a.txns))
	for id := range a.txns {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Client != out[j].Client {
			return out[i].Client < out[j].Client
		}
		return out[i].Seq < out[j].Seq
	})
	return out
}
