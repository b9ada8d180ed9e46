package pb

import (
	"sort"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// The primary (the Grid Services thesis III.B, Fig. III.2).

// initPrimary is INIT_PRIMARY: claim the heartbeat and state-update
// sources (here: start sending them) and schedule HEARTBEAT_GENERATOR.
func (a *PB) initPrimary() {
	a.role = rolePrimary
	a.peers = map[automaton.NodeID]*peer{}
	a.inflight = map[automaton.RequestID]*waiter{}
	a.waiters = nil
	a.committed = a.stable
	a.lastCheck = a.m.applied
	a.Emit(automaton.SetTimer{ID: timerHeartbeat, After: a.sending})
}

// serve is EXECUTE (Fig. III.2) for a request that reached the primary from
// its own client (from == "") or forwarded by node from:
// check_previous_requests, service.op, extract_state, then
// notify_change_with_ack, whose wait is the waiter released by advance.
func (a *PB) serve(req automaton.Request, from automaton.NodeID) {
	end := automaton.IsSessionEnd(req.Op) && len(req.Ops) == 0
	read := !end && automaton.IsReadRequest(a.cfg.Service, req)
	if !read && !a.proto.noDedup {
		if w := a.inflight[req.ID]; w != nil {
			w.join(req, from) // a resubmission of a request under way
			return
		}
		if r, ok := a.m.lookup(req.ID); ok {
			// Done before (perhaps by an earlier primary): the old answer,
			// once every member holds its entry.
			a.wait(&waiter{index: r.index, out: r.out, write: true}, req, from)
			return
		}
		if _, gone := a.m.closed[req.ID.Client]; end && gone && a.m.clients[req.ID.Client] == nil {
			a.answer(&waiter{out: outcome{res: service.OK()}}, req, from) // ended before
			return
		}
		if res, refused := a.m.refused(req.ID); refused {
			a.answer(&waiter{out: outcome{res: res}}, req, from) // forgotten, or its session ended
			return
		}
	}
	if read {
		// A read sees every entry up to m.applied, so it waits until every
		// member holds them: a fail-over cannot take back what it saw.
		a.wait(&waiter{index: a.m.applied, out: a.m.read(req)}, req, from)
		return
	}
	e := a.m.execute(req)
	a.stepExec = append(a.stepExec, req.ID)
	a.appendEntry(e)
	w := &waiter{index: e.index, out: e.out, write: true}
	if !a.proto.noDedup {
		a.inflight[req.ID] = w
	}
	upd := a.updateMsg(e)
	for _, n := range sortedNodes(a.peers) {
		a.send(n, upd)
	}
	if a.proto.replyFirst {
		// Broken: the answer leaves before the backups have the update.
		a.answer(w, req, from)
		delete(a.inflight, req.ID)
		return
	}
	a.wait(w, req, from)
}

func (a *PB) updateMsg(e entry) message {
	return message{Kind: kindUpdate, View: a.view, Index: e.index, Stable: a.committed,
		ID: e.id, Full: e.full, Payload: e.payload, Out: e.out, Low: e.low, End: e.end}
}

// appendEntry counts an entry in the state (already changed by execute or
// inject) and keeps it in the log.
func (a *PB) appendEntry(e entry) {
	a.m.commitLocal(e)
	e.chain = a.m.chain
	a.log = append(a.log, e)
	a.persistEntry(e)
}

// join adds a resubmission's destination to a waiter.
func (w *waiter) join(req automaton.Request, from automaton.NodeID) {
	w.req = req
	if from == "" {
		w.local = true
		return
	}
	if !contains(w.to, from) {
		w.to = append(w.to, from)
	}
}

// wait queues w (in index order) until committed reaches its index.
func (a *PB) wait(w *waiter, req automaton.Request, from automaton.NodeID) {
	w.join(req, from)
	if w.index <= a.committed {
		a.release(w)
		return
	}
	k := sort.Search(len(a.waiters), func(i int) bool { return a.waiters[i].index > w.index })
	a.waiters = append(a.waiters, nil)
	copy(a.waiters[k+1:], a.waiters[k:])
	a.waiters[k] = w
}

// answer replies to whoever asked, at once (refusals, and the broken
// variant's early replies).
func (a *PB) answer(w *waiter, req automaton.Request, from automaton.NodeID) {
	w.join(req, from)
	a.release(w)
}

// release sends w's answer to its local client and its forwarders.
func (a *PB) release(w *waiter) {
	if w.write {
		a.stepReplies = append(a.stepReplies, stepReply{id: w.req.ID, index: w.index, write: true})
	}
	if w.local {
		a.respond(w.req.ID, w.out)
	}
	for _, n := range w.to {
		a.send(n, message{Kind: kindReply, ID: w.req.ID, Out: w.out})
	}
}

// advance recomputes the committed count (every member acknowledged it)
// and releases the waiters it covers.
func (a *PB) advance() {
	c := a.m.applied
	for _, n := range sortedNodes(a.peers) {
		if p := a.peers[n]; p.member && p.acked < c {
			c = p.acked
		}
	}
	if !a.hasBackup() {
		c = a.committed // rule 1 (takeover.go): no backup holds the entries after it
	}
	if c > a.committed {
		a.committed = c
	}
	if a.committed > a.stable {
		a.stable = a.committed
	}
	k := 0
	for k < len(a.waiters) && a.waiters[k].index <= a.committed {
		w := a.waiters[k]
		if w.write {
			delete(a.inflight, w.req.ID)
		}
		a.release(w)
		k++
	}
	a.waiters = a.waiters[k:]
	a.prune()
}

// prune drops log entries every member and joiner has.
func (a *PB) prune() {
	keep := a.stable
	if a.role == rolePrimary {
		keep = a.committed
		for _, n := range sortedNodes(a.peers) {
			if p := a.peers[n]; p.acked < keep {
				keep = p.acked
			}
		}
	}
	if keep <= a.logStart {
		return
	}
	drop := keep - a.logStart
	if drop > uint64(len(a.log)) {
		drop = uint64(len(a.log))
	}
	a.log = append(a.log[:0:0], a.log[drop:]...)
	a.logStart += drop
}

// onAck counts a backup's acknowledgement (the reply of
// notify_change_with_ack), or a joiner's request to become a member.
func (a *PB) onAck(from automaton.NodeID, m message) {
	if a.role != rolePrimary || a.collecting || m.View != a.view {
		return
	}
	p := a.peers[from]
	if p == nil {
		return
	}
	p.heard = true
	if m.Index > a.m.applied {
		// It holds entries this primary never had: it must rejoin.
		a.dropPeer(from)
		return
	}
	if p.xfer != nil && m.Nonce != p.xfer.nonce || p.xfer == nil && m.Nonce != p.nonce {
		return // about an earlier transfer to this node, or from before it rejoined
	}
	p.acked = max(p.acked, m.Index)
	if p.fresh {
		p.fresh = false
		a.resend(from, p)
	}
	if !p.member && m.Joined && m.Index >= a.committed {
		// A joiner that installed the state and holds everything committed.
		// Its acked becomes what it applied (m.Index): a joiner's earlier
		// acks count updates received in order and held in memory, not
		// applied, and a member's acked must be what it holds durably
		// (the invariant reply-after-acks; pb seed 18 of the chunked-join
		// scenario's flags at 9cd4774 answered entry 46 with the new
		// member at 45).
		p.acked = m.Index
		p.member, p.nonce, p.xfer = true, p.xfer.nonce, nil
		a.members = append(a.members, from)
		a.epoch++
		a.sendHeartbeats(kindHeartbeat)
	}
	a.advance()
}

// resend sends a peer the entries after what it acknowledged, from the log;
// a peer behind the log must rejoin.
func (a *PB) resend(n automaton.NodeID, p *peer) {
	if p.acked >= a.m.applied {
		return
	}
	if p.acked < a.logStart {
		a.dropPeer(n)
		return
	}
	from := p.acked - a.logStart
	to := uint64(len(a.log))
	if to-from > maxResend {
		to = from + maxResend
	}
	for _, e := range a.log[from:to] {
		a.send(n, a.updateMsg(e))
	}
}

// dropPeer removes a backup the primary believes failed (or that must
// rejoin) from the view: a new member list, announced at once.
func (a *PB) dropPeer(n automaton.NodeID) {
	p := a.peers[n]
	if p == nil {
		return
	}
	delete(a.peers, n)
	if p.member {
		for i, x := range a.members {
			if x == n {
				a.members = append(a.members[:i:i], a.members[i+1:]...)
				break
			}
		}
		a.epoch++
		a.sendHeartbeats(kindHeartbeat)
	}
	a.advance()
}

// onHeartbeatTimer is HEARTBEAT_GENERATOR: notify_change(HEARTBEAT), to
// every configured node, so that removed and restarted nodes learn the
// view too.
func (a *PB) onHeartbeatTimer() {
	if a.role != rolePrimary {
		return
	}
	a.sendHeartbeats(a.heartbeatKind())
	a.Emit(automaton.SetTimer{ID: timerHeartbeat, After: a.sending})
}

func (a *PB) viewMsg(kind byte) message {
	stable := a.stable
	if a.role == rolePrimary {
		stable = a.committed
	}
	var applied uint64
	if a.m != nil {
		applied = a.m.applied
	}
	return message{Kind: kind, View: a.view, Prev: a.prev, Base: a.base, Epoch: a.epoch,
		Members: a.members, Index: applied, Stable: stable}
}

func (a *PB) sendHeartbeats(kind byte) {
	hb := a.viewMsg(kind)
	for _, n := range a.others() {
		a.send(n, hb)
	}
}

// checkBackups is the primary's failure detector for its backups (III.A:
// "the detection of backup failures"): a peer silent for backupMisses
// checks is dropped; a peer whose acknowledgement has not reached what was
// sent a check ago gets the missing entries again.
func (a *PB) checkBackups() {
	if a.collecting {
		return // it waits for every promise (takeover.go)
	}
	for _, n := range sortedNodes(a.peers) {
		p := a.peers[n]
		if p.heard {
			p.misses = 0
		} else {
			p.misses++
		}
		p.heard = false
		if p.misses >= backupMisses {
			a.dropPeer(n)
		}
	}
	for _, n := range sortedNodes(a.peers) {
		if p := a.peers[n]; p.acked < a.lastCheck {
			a.resend(n, p)
		}
	}
	a.lastCheck = a.m.applied
}

// stepDown ends this node's reign on learning of a later view: its state
// may hold entries no backup has, so it rejoins as a backup; its clients'
// requests are forwarded to the new primary (the duplicate table there
// answers those it already holds).
func (a *PB) stepDown() {
	a.stepDownForward()
	a.becomeJoining()
}

// stepDownForward moves a primary's local requests to its forwards and
// stops its heartbeats.
func (a *PB) stepDownForward() {
	a.collecting, a.promises, a.suspect = false, nil, ""
	for _, w := range a.waiters {
		if w.local {
			a.fwds[w.req.ID] = &fwd{req: w.req}
		}
	}
	for _, id := range sortedIDs(a.inflight) {
		if w := a.inflight[id]; w.local {
			a.fwds[id] = &fwd{req: w.req}
		}
	}
	a.Emit(automaton.CancelTimer{ID: timerHeartbeat})
}

func sortedIDs[V any](m map[automaton.RequestID]V) []automaton.RequestID {
	out := make([]automaton.RequestID, 0, len(m))
	for id := range m {
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
