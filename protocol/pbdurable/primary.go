package pbdurable

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/durability/sqlstore"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// takeOver is switch_to_primary (the Grid Services thesis III.A problem 3, IV.C.2
// recover): the next view names this node; the members ranked before it
// are taken for failed, the others stay members and get the state once
// the recovery decided the prepared buffers (commit.go);
// every state object is restored before the new primary serves:
// replicated objects change role (their state is here), database objects
// reload by the mapping's queries, reconstructible ones come back empty.
func (a *PBD) takeOver() {
	a.beginCollect()
	a.view = a.view.Next(uint32(a.me + 1))
	a.restarted = false
	a.saveView()
	a.primary, a.ready, a.misses = true, false, 0
	a.members = map[automaton.NodeID]*member{}
	n := len(a.cfg.Nodes)
	for r := 1; r < n; r++ {
		id := a.cfg.Nodes[(a.me+r)%n]
		if (a.me+r)%n == int(a.view.Node-1) {
			break
		}
		a.members[id] = &member{needsState: true}
	}
	// The prepared buffers stay held: the recovery decides them (commit.go).
	set := a.svc.set()
	var p sqlstore.Payload
	for _, px := range set.Proxies() {
		if px.Mechanism() == durability.Database {
			p.Stmts = append(p.Stmts, px.Init().SQL...)
		}
	}
	if a.twoMechanisms() {
		p.Stmts = append(p.Stmts, commitTable, durability.Stmt{Object: commitObject, SQL: commitEnsure})
	}
	if a.hasDatabase() {
		// Fencing: from this commit on, the deposed primary's transactions
		// are refused; the queries below see every one it committed.
		p.Stmts = append(p.Stmts, viewTable, durability.Stmt{Object: viewObject, SQL: viewEnsure}, fence(a.view))
	}
	p.Queries = a.recoveryQueries()
	a.startRecovery(&p)
	a.Emit(automaton.SetTimer{ID: timerHeartbeat, After: a.sending})
	a.OnTimer(timerHeartbeat)
}

// startRecovery issues the recover (or init) effect; the primary serves
// once it is done.
func (a *PBD) startRecovery(p *sqlstore.Payload) {
	a.recoverPayload = p
	a.recoveryDone = false
	a.nextEffect++
	a.recoverFx = a.nextEffect
	a.Emit(automaton.Effect{ID: a.recoverFx, Kind: sqlstore.EffectKind, Payload: p})
}

func (a *PBD) memberIDs() []automaton.NodeID {
	var ids []automaton.NodeID
	for _, n := range a.cfg.Nodes {
		if a.members[n] != nil {
			ids = append(ids, n)
		}
	}
	return ids
}

// sendStates sends the replicated objects to the members that need them,
// when they hold no update whose transaction is undecided (package doc:
// new requests wait meanwhile, so the queue drains).
func (a *PBD) sendStates() {
	if !a.stateClear() {
		return
	}
	for _, id := range a.memberIDs() {
		if a.members[id].needsState {
			a.sendState(id)
		}
	}
}

// stateClear reports whether the replicated objects may go to a new
// member: recovered, and no update whose transaction is undecided.
func (a *PBD) stateClear() bool {
	if !a.ready {
		return false // the recovery has not decided the prepared buffers yet
	}
	for _, p := range a.queue {
		if p.ship > 0 && !p.dbDone {
			return false
		}
	}
	return true
}

// transferring reports whether a member waits for the state: requests
// wait until it has it.
func (a *PBD) transferring() bool {
	for _, m := range a.members {
		if m.needsState {
			return true
		}
	}
	return false
}

// resume runs the requests that waited for the recovery or a state
// transfer.
func (a *PBD) resume() {
	if !a.ready || a.transferring() {
		return
	}
	w := a.waiting
	a.waiting = nil
	for _, r := range w {
		a.serve(r.from, r.req)
	}
}

func (a *PBD) sendState(to automaton.NodeID) {
	var snap []byte
	if a.svc.set().Has(durability.Replicated) {
		snap = a.snapshot()
	}
	a.send(to, msg{kind: kindState, view: a.view, index: a.index, state: snap})
}

// OnEffectDone: the recovery's rows restore the database objects; a
// request's transaction committed.
func (a *PBD) OnEffectDone(d automaton.EffectDone) {
	if d.ID == a.recoverFx && a.primary && !a.ready {
		if d.Err == nil {
			res, _ := d.Result.(sqlstore.Result)
			a.recoveryDone, a.recoveryRes = true, res
			a.finishTakeOver()
			return
		}
		// The database did not answer: try again one checking period
		// later (the objects stay empty until it does, and nothing is
		// served).
		a.Emit(automaton.SetTimer{ID: timerRecover, After: a.checking})
		return
	}
	a.onTxDone(d)
}

// finishTakeOver makes a new primary ready once its recovery effect is
// done and, after a take-over, every promise it waits for arrived
// (takeover.go): the best state reported is installed, the database
// objects restored from the recovery's rows, the prepared buffers decided.
func (a *PBD) finishTakeOver() {
	if !a.primary || a.ready || !a.recoveryDone || !a.promisesComplete() {
		return
	}
	res := a.recoveryRes
	qs := a.recoveryQueries()
	var c uint64
	for i, q := range qs {
		if i < len(res.Rows) && q.Object == commitObject {
			if rows := res.Rows[i]; len(rows) == 1 && len(rows[0]) == 1 {
				n, _ := durability.AsInt64(rows[0][0])
				c = uint64(n)
			}
		}
	}
	if a.shortOfCommit(c) {
		return // the suspect's promise holds the updates up to c (takeover.go)
	}
	a.installBest()
	for i, q := range qs {
		if i >= len(res.Rows) {
			break
		}
		if q.Object != commitObject {
			_ = a.svc.set().Restore(q, res.Rows[i])
		}
	}
	a.decide(c)
	a.ready = true
	a.memView = a.view
	a.persistState() // before anything is answered in this view
	a.sendStates()
	a.resume()
}

// onTxDone: a group's transaction committed (or failed).
func (a *PBD) onTxDone(d automaton.EffectDone) {
	group := a.effects[d.ID]
	if group == nil {
		return
	}
	delete(a.effects, d.ID)
	if d.Err != nil {
		// The transaction did not commit, but the requests' changes are in
		// this primary's objects and prepared at the backups: run it again
		// one checking period later (inflight holds the later ones back).
		for _, p := range group {
			p.fx = 0
		}
		a.Emit(automaton.SetTimer{ID: timerRetryTx, After: a.checking})
		return
	}
	a.inflight = false
	for _, p := range group {
		p.dbDone = true
	}
	a.issue()
	a.release()
	a.sendStates()
}

// serve: a client's request, at the node it reached.
func (a *PBD) serve(from automaton.NodeID, req automaton.Request) {
	if res, refused := automaton.RefuseUnsupported(a.proto.Protocol, req); refused {
		a.answerTo(from, req.ID, res)
		return
	}
	if !a.primary {
		a.forward(req)
		return
	}
	if !a.ready || a.transferring() {
		a.waiting = append(a.waiting, waitReq{from: from, req: req})
		return
	}
	a.execute(from, req)
}

// execute is EXECUTE (Fig. III.2) through the proxies (IV.C.2): the
// request runs as one atomic action; its database statements become one
// durability.sql effect (startA/commitA as BEGIN/COMMIT), its replicated
// objects' update buffer goes to every member; the answer waits for both.
func (a *PBD) execute(from automaton.NodeID, req automaton.Request) {
	if p := a.queued[req.ID]; p != nil {
		if from != "" {
			p.from = from
		}
		return // a duplicate of a request in progress
	}
	if res, ok := a.done[req.ID]; ok {
		a.answerTo(from, req.ID, res) // a duplicated forward of an answered request
		return
	}
	p := &pending{id: req.ID, from: from}
	if a.cfg.Service.IsRead(req.Op) {
		p.res, p.dbDone = a.svc.read(req.Op), true
	} else if res, ok := a.svc.replies().lookup(req.ID); ok {
		p.res, p.dbDone = res, true // a retry of an executed write (replies.go)
	} else {
		res, w, err := a.svc.exec(req.ID, req.Op, req.Env)
		p.res, p.stmts, p.dbDone = res, w.SQL, len(w.SQL) == 0
		if err != nil {
			p.res = service.Errorf("%v", err)
		}
		if len(w.Ship) > 0 {
			a.index++
			p.ship, p.ups = a.index, w.Ship
			if a.twoMechanisms() {
				// Every update is decided by the database under two
				// mechanisms, one that touches only replicated objects too
				// (a transaction of the decision alone): the commit index
				// then covers every answered write, which a new primary's
				// recovery relies on (takeover.go shortOfCommit).
				p.stmts, p.dbDone = append(p.stmts, commitDecision(p.ship)), false
			}
			a.persistBuffer(p)
			for _, id := range a.memberIDs() {
				a.sendUpdate(id, p)
			}
		}
	}
	a.queue = append(a.queue, p)
	a.queued[p.id] = p
	if a.batching {
		return // the batch's end issues and releases (OnBatch)
	}
	a.issue()
	a.release()
}

func (a *PBD) sendUpdate(to automaton.NodeID, p *pending) {
	a.send(to, msg{kind: kindUpdate, view: a.view, index: p.ship, commit: a.commit, db: len(p.stmts) > 0, ups: p.ups})
}

// prepared reports whether every synced member holds p's update buffer.
// A member waiting for the state is not synced (it joined, or has not
// adopted this view), so it cannot take over; it gets the state once p
// is decided (sendStates), p included.
func (a *PBD) prepared(p *pending) bool {
	for _, m := range a.members {
		if !m.needsState && m.acked < p.ship {
			return false
		}
	}
	return a.heldByBackup(p)
}

// issue sends the next transaction when none is in flight: transactions
// commit in execution order, and a request's only once every member
// prepared its update buffer (commit.go).
//
// Group commit (issue 28, session 54): the transaction holds the
// statements of up to maxGroup requests, consecutive in execution order
// among those with statements, each prepared: one commit (one fsync)
// for all of them. A request is answered only once the whole
// transaction committed (release), so a crash before the commit loses
// only unanswered requests, all of the group's or none (the database
// applies the transaction whole). The statements run in execution order
// (a later request's upsert of a row comes after an earlier one's), the
// view check once, first.
func (a *PBD) issue() {
	if a.inflight || a.batching {
		return
	}
	var group []*pending
	n := 0
	for _, p := range a.queue {
		if p.fx != 0 || p.dbDone {
			continue
		}
		if p.ship > 0 && !a.prepared(p) {
			break
		}
		group = append(group, p)
		n += len(p.stmts)
		if len(group) == maxGroup {
			break
		}
	}
	if len(group) == 0 {
		return
	}
	a.nextEffect++
	fx := a.nextEffect
	var stmts []durability.Stmt
	if len(group) == 1 {
		stmts = a.fenced(group[0].stmts)
	} else {
		stmts = make([]durability.Stmt, 0, n+1)
		stmts = append(stmts, fence(a.view))
		for _, p := range group {
			stmts = append(stmts, p.stmts...)
		}
	}
	for _, p := range group {
		p.fx = fx
	}
	a.effects[fx] = group
	a.inflight = true
	a.Emit(automaton.Effect{ID: fx, Kind: sqlstore.EffectKind, Payload: &sqlstore.Payload{Stmts: stmts}})
}

// maxGroup bounds the requests of one group-committed transaction.
const maxGroup = 256

// durable reports whether p's effects are where its mechanisms keep them.
func (a *PBD) durable(p *pending) bool {
	if !p.dbDone && !a.proto.replyBeforeDB {
		return false
	}
	for _, m := range a.members {
		if m.needsState || m.acked < p.ship {
			if p.ship > 0 || m.needsState {
				return false
			}
		}
	}
	return a.heldByBackup(p)
}

// release answers the requests at the head of the queue whose effects
// are durable, in execution order (a read answers after every write it
// saw).
func (a *PBD) release() {
	for len(a.queue) > 0 && a.durable(a.queue[0]) {
		p := a.queue[0]
		a.queue = a.queue[1:]
		delete(a.queued, p.id)
		if p.ship > 0 {
			a.commit = p.ship
		}
		a.answer(p, p.res)
	}
	a.compact()
	if a.proto.replyBeforeDB {
		for _, p := range a.queue {
			if !p.answered && p.ship == 0 {
				a.answer(p, p.res)
			}
		}
	}
}

// maxDone bounds the primary's cache of answers, which serves duplicated
// forwards within one incarnation.
const maxDone = 4096

func (a *PBD) answer(p *pending, res service.Result) {
	if p.answered {
		return
	}
	p.answered = true
	if a.done == nil {
		a.done = map[automaton.RequestID]service.Result{}
	}
	a.done[p.id] = res
	a.doneOrder = append(a.doneOrder, p.id)
	if len(a.doneOrder) > maxDone {
		delete(a.done, a.doneOrder[0])
		a.doneOrder = a.doneOrder[1:]
	}
	a.released = append(a.released, p)
	a.answerTo(p.from, p.id, res)
}

func (a *PBD) answerTo(from automaton.NodeID, id automaton.RequestID, res service.Result) {
	if from == "" {
		a.Respond(id, res)
		return
	}
	a.send(from, msg{kind: kindReply, id: id, res: res})
}

// onAck: a member's cumulative acknowledgement.
func (a *PBD) onAck(from automaton.NodeID, m msg) {
	if !a.primary || m.view != a.view {
		return
	}
	mb := a.members[from]
	if mb == nil {
		// A live backup of this view that is not a member: one this
		// primary dropped while its acknowledgements were late (a loaded
		// machine), or a joiner dropped while its state was on its way.
		// Nothing else would make it a member again (it hears the
		// heartbeats, so it never asks), and under mapping pb a primary
		// left without members answers nothing (heldByBackup): its
		// acknowledgement is taken as a join (package doc, "Failure
		// detection").
		a.onJoin(from, m)
		return
	}
	mb.silent = 0
	if mb.needsState {
		// The ack of a state message names its index; an ack of a
		// heartbeat from before the state arrived does not count.
		if m.index != stateAck {
			return
		}
		// acked stays 0 until the member's next acknowledgement names its
		// index (onState sends it right after): a duplicated or late
		// acknowledgement of an earlier state must not count for
		// updates executed since (the primary's index may have moved).
		mb.needsState, mb.acked = false, 0
		a.resume()
		return
	}
	if m.index != stateAck && m.index > mb.acked {
		mb.acked = m.index
	}
	a.issue()
	a.release()
}

// onJoin: a node without the state asks to become a backup.
func (a *PBD) onJoin(from automaton.NodeID, m msg) {
	if !a.primary {
		return
	}
	mb := a.members[from]
	if mb == nil {
		mb = &member{}
		a.members[from] = mb
	}
	mb.needsState, mb.silent = true, 0
	if a.stateClear() {
		a.sendState(from)
	}
}

// checkBackups: a member silent for two check periods failed and is
// dropped (III.A, "the detection of backup failures"); one that still
// lacks the state gets it again, one that lags gets the update buffers
// it did not acknowledge again (they are in the queue: a buffer leaves
// it once every member acknowledged it).
func (a *PBD) checkBackups() {
	for _, id := range a.memberIDs() {
		mb := a.members[id]
		if mb.silent++; mb.silent > 2 {
			delete(a.members, id)
			continue
		}
		if !mb.needsState && mb.acked < a.index {
			for _, p := range a.queue {
				if p.ship > mb.acked {
					a.sendUpdate(id, p)
				}
			}
		}
	}
	a.sendStates()
	a.issue()
	a.release()
	a.resume()
}

// forward sends a client's request to the primary this node knows.
func (a *PBD) forward(req automaton.Request) {
	p := a.primaryID()
	if p == "" || p == a.cfg.Self {
		a.answerTo("", req.ID, service.Fail(synoderr.TryAgain, "no primary known"))
		return
	}
	if _, dup := a.fwd[req.ID]; dup {
		return
	}
	a.fwd[req.ID] = &forward{view: a.view}
	a.send(p, msg{kind: kindForward, view: a.view, id: req.ID, op: req.Op, env: req.Env})
}

// onForward: the primary serves a forwarded request (from an older view:
// refused, its outcome stays unknown to the client).
func (a *PBD) onForward(from automaton.NodeID, m msg) {
	if !a.primary || m.view != a.view {
		a.send(from, msg{kind: kindReply, id: m.id, res: service.Fail(synoderr.TryAgain, "not the primary of view %s", m.view)})
		return
	}
	a.serve(from, automaton.Request{ID: m.id, Op: m.op, Env: m.env})
}

func (a *PBD) onReply(m msg) {
	if _, ok := a.fwd[m.id]; !ok {
		return
	}
	delete(a.fwd, m.id)
	a.Respond(m.id, m.res)
}
