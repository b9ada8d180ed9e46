package pbpaxos

import (
	"fmt"
	"hash/fnv"
	"sort"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// The basic protocol (the Grid Services thesis VI.A.2): the leader assigns the next
// instance to a request, executes it, and proposes <request, state after
// it>; it proposes instance i only once i-1 is chosen (param pipeline=1,
// the seed's), or up to pipeline instances ahead with chained updates (an
// acceptor accepts a chained update only on top of the previous instance
// of the same ballot). Learners apply the chosen state.

// tentative is the leader's state after every instance it proposed: the
// state it executes new requests on.
func (a *PBPaxos) tentative() *machine {
	if a.tent == nil {
		a.tent = a.sm.clone()
	}
	return a.tent
}

// propose executes queued requests and proposes them, at most batch per
// instance and while fewer than pipeline instances are outstanding, all in
// one Accept.
func (a *PBPaxos) propose() {
	if a.role != leader || !a.ready {
		return
	}
	var entries []entry
	for len(a.queue) > 0 && a.next-1-a.applied < uint64(a.prm.pipeline) {
		t := a.tentative()
		v0 := t.version()
		var cs []cmd
		for len(a.queue) > 0 && len(cs) < a.prm.batch {
			id := a.queue[0]
			a.queue = a.queue[1:]
			p := a.pending[id]
			if p == nil || p.state != pQueued {
				continue
			}
			if p.txnCmd != nil && !a.commitReady(p) {
				continue
			}
			c := a.command(p)
			if c.writes() {
				a.wound(c)
			}
			t.execute(&c)
			t.remember([]cmd{c})
			a.tentGen++
			p.state = pProposed
			cs = append(cs, c)
			a.served = append(a.served, served{newReq: true, early: a.applied < a.batchTop})
		}
		if len(cs) == 0 {
			break
		}
		e := entry{I: a.next, Cmds: encodeCmds(cs), Kind: a.prm.state}
		switch a.prm.state {
		case updDelta:
			if a.replayCheaper(t.st, v0, len(e.Cmds)) {
				e.Kind = updReplay
				break
			}
			d, err := t.st.(service.DeltaState).Delta(v0)
			if err != nil {
				e.Kind, e.Upd = updFull, t.snapshot()
			} else {
				e.Upd = d
			}
		case updFull:
			e.Upd = t.snapshot()
		}
		if !service.UsesEnv(a.cfg.Service) && e.Kind == updReplay {
			e.Upd = nil
		}
		a.shipAs(&e)
		entries = append(entries, e)
		a.next++
	}
	if len(entries) == 0 {
		return
	}
	a.broadcast(&message{Kind: kindAccept, Ballot: a.ballot, Commit: a.applied, Entries: entries})
	for _, e := range entries {
		a.acceptOwn(e)
	}
	a.checkChosen()
}

// command is the command the leader executes for a queued request. The
// environment goes with it only for a nondeterministic service (replay
// needs it; the others carry the leader's resulting state).
func (a *PBPaxos) command(p *pend) cmd {
	req := p.req
	var envs []service.Env
	if service.UsesEnv(a.cfg.Service) {
		envs = []service.Env{a.logEnv(req)}
	}
	switch {
	case p.txnCmd != nil:
		return *p.txnCmd
	case len(req.Ops) > 0:
		return cmd{Kind: cmdGroup, ID: req.ID, Ops: req.Ops, Envs: envs}
	case a.read(req):
		return cmd{Kind: cmdRead, ID: req.ID, Op: req.Op, Envs: envs}
	}
	return cmd{Kind: cmdOp, ID: req.ID, Op: req.Op, Envs: envs}
}

// retransmit resends, in one Accept per peer and in instance order, the
// instances in flight for a tick that the peer has not accepted.
func (a *PBPaxos) retransmit() {
	if len(a.inflight) == 0 {
		return
	}
	ids := make([]uint64, 0, len(a.inflight))
	for i, f := range a.inflight {
		if f.sent < a.tick {
			ids = append(ids, i)
		}
	}
	sort.Slice(ids, func(x, y int) bool { return ids[x] < ids[y] })
	for _, to := range a.cfg.Nodes {
		if to == a.cfg.Self {
			continue
		}
		var entries []entry
		for _, i := range ids {
			if !a.inflight[i].acks[to] {
				s := a.log[i]
				entries = append(entries, entry{I: i, Cmds: s.cmds, Kind: s.kind, Upd: s.upd})
			}
		}
		if len(entries) > 0 {
			a.send(to, &message{Kind: kindAccept, Ballot: a.ballot, Commit: a.applied, Entries: entries})
		}
	}
	for _, i := range ids {
		a.inflight[i].sent = a.tick
	}
}

// onAccept is the acceptor's phase 2: it keeps the requests and the update
// of each entry (the update until the instance is applied), persists them,
// and answers. A chained update (delta, replay) is accepted only on top of
// the previous instance accepted under the same ballot, or of the applied
// state; the leader retransmits the others in order.
func (a *PBPaxos) onAccept(from automaton.NodeID, m *message) {
	if !a.acceptBallot(from, m.Ballot) {
		a.send(from, &message{Kind: kindAccepted, Ballot: m.Ballot, OK: false, Promised: a.promised})
		return
	}
	acks := make([]uint64, 0, len(m.Entries))
	for _, e := range m.Entries {
		// An instance already chosen here is acknowledged without being
		// stored again (a proposal of a higher ballot for a chosen
		// instance carries the chosen value), but it counts as accepted
		// under the ballot: X-Paxos confirms go to the owner of the
		// highest ballot accepted (reads.go). Without this, followers
		// that had applied a new leader's whole takeover batch kept
		// confirming reads to the deposed leader, and no read was
		// answered until the next write (synod-lab sim --protocol pbpaxos
		// ... --seeds 76, see Scenarios).
		if e.I <= a.applied {
			if s := a.log[e.I]; (s == nil || !s.known) && len(e.Cmds) > 0 && a.gaps[e.I] {
				a.fillGap(e.I, e.Cmds)
			}
			a.accBal = maxBallot(a.accBal, m.Ballot)
			acks = append(acks, e.I)
			continue
		}
		if s := a.log[e.I]; s != nil && s.chosen {
			a.accBal = maxBallot(a.accBal, m.Ballot)
			acks = append(acks, e.I)
			continue
		}
		if (e.Kind == updDelta || e.Kind == updReplay) && e.I-1 > a.applied {
			if p := a.log[e.I-1]; p == nil || p.bal != m.Ballot {
				continue
			}
		}
		s := &slot{bal: m.Ballot, known: len(e.Cmds) > 0, cmds: e.Cmds, kind: e.Kind, upd: e.Upd}
		a.putSlot(e.I, s)
		a.persist(slotKey(e.I), encodeSlotRec(s))
		a.accBal = maxBallot(a.accBal, m.Ballot)
		acks = append(acks, e.I)
	}
	a.send(from, &message{Kind: kindAccepted, Ballot: m.Ballot, OK: true, Acks: acks, Commit: a.applied})
	a.learnCommit(from, m.Ballot, m.Commit)
}

func (a *PBPaxos) putSlot(i uint64, s *slot) {
	a.log[i] = s
	a.maxInst = max(a.maxInst, i)
}

func (a *PBPaxos) onAccepted(from automaton.NodeID, m *message) {
	if a.role != leader || m.Ballot != a.ballot {
		return
	}
	if !m.OK {
		a.onRejected(m.Promised)
		return
	}
	a.hbAck[from] = a.tick
	for _, i := range m.Acks {
		if f := a.inflight[i]; f != nil {
			f.acks[from] = true
		}
	}
	a.checkChosen()
}

// checkChosen marks the instances a majority accepted as chosen, applies
// the chosen prefix and proposes what waits.
func (a *PBPaxos) checkChosen() {
	var done []uint64
	for i, f := range a.inflight {
		if len(f.acks) >= a.majority() {
			done = append(done, i)
		}
	}
	if len(done) == 0 {
		return
	}
	for _, i := range done {
		delete(a.inflight, i)
		if s := a.log[i]; s != nil {
			s.chosen = true
		}
		a.chosenTo = max(a.chosenTo, i)
	}
	a.advance()
	a.propose()
}

// learnCommit applies a commit notice: every instance up to commit is
// chosen, and one this node accepted under the notice's ballot holds the
// chosen value. The others are fetched (catch-up).
func (a *PBPaxos) learnCommit(from automaton.NodeID, b Ballot, commit uint64) {
	if commit <= a.applied {
		return
	}
	a.chosenTo = max(a.chosenTo, commit)
	for i := a.applied + 1; i <= commit; i++ {
		if s := a.log[i]; s != nil && s.bal == b {
			s.chosen = true
		}
	}
	a.advance()
	if a.applied < commit && a.catchupAge == 0 {
		a.requestCatchup(from)
	}
}

// advance applies chosen instances in order: a learner applies the chosen
// state (the Grid Services thesis VI.A.2). A covered entry is applied with the whole state
// that covers it; a chosen whole state further on is installed at once,
// over instances whose requests this node never had (they become gaps: the
// seed's "knows requests 1-87 and 90 and the state after 90").
func (a *PBPaxos) advance() {
	for {
		i := a.applied + 1
		s := a.log[i]
		j := i
		if s == nil || !s.chosen || s.kind == updCovered {
			if a.chosenTo <= a.applied {
				break
			}
			j = a.nextWholeState(i)
			if j == 0 {
				break
			}
		}
		// Instances jumped over: an entry of the whole state's ballot (the
		// rest of its takeover batch) holds the chosen requests; any other
		// is a proposal that was not chosen, forgotten here and on disk
		// (a restart replays the entries up to the applied prefix).
		b := a.log[j].bal
		for k := i; k < j; k++ {
			t := a.log[k]
			if t != nil && t.bal != b {
				delete(a.log, k)
				a.Emit(automaton.Persist{Key: slotKey(k), Delete: true})
				t = nil
			}
			if t == nil || !t.known {
				a.gaps[k] = true
			}
		}
		a.applyEntry(j, a.log[j])
	}
	if a.applied > a.savedC {
		a.savedC = a.applied
		a.persist(recCommit, encodeUintRec(a.applied))
	}
	if a.applied-a.snapAt >= uint64(a.prm.snapshotEvery) {
		a.takeSnapshot()
	}
	if a.role == leader && !a.ready && a.applied >= a.batchTop {
		a.onTakeoverDone()
	}
}

// nextWholeState returns the first chosen instance >= i that carries a
// whole state, or 0.
func (a *PBPaxos) nextWholeState(i uint64) uint64 {
	for j := i; j <= a.maxInst; j++ {
		if s := a.log[j]; s != nil && s.chosen && s.kind == updFull {
			return j
		}
	}
	return 0
}

// applyEntry installs chosen instance i on the replicated state and
// answers the requests it holds.
func (a *PBPaxos) applyEntry(i uint64, s *slot) {
	var cs []cmd
	if s.known {
		var err error
		if cs, err = decodeCmds(s.cmds); err != nil {
			panic(fmt.Sprintf("pbpaxos: instance %d holds corrupt requests: %v", i, err))
		}
	}
	a.replayOrder(s, cs)
	if err := a.sm.install(cs, s.kind, s.upd); err != nil {
		panic(fmt.Sprintf("pbpaxos: %s: installing instance %d (%s): %v", a.cfg.Self, i, updNames[s.kind], err))
	}
	a.applied = i
	a.appliedPN = pn{s.bal, i}
	a.chosenTo = max(a.chosenTo, i)
	s.upd = nil // only the latest state is kept: a.sm
	a.justApplied = append(a.justApplied, appliedRec{i: i, known: s.known, digest: digest(s.cmds)})
	for _, c := range cs {
		if p := a.pending[c.ID]; p != nil && p.state != pRead && p.state != pRelayed && c.Kind != cmdNoop {
			a.answer(c.ID, c.Result, c.Results)
		}
	}
}

// onTakeoverDone: both phases are complete (the Grid Services thesis VI.B Protocol 1): the
// leader serves new requests from now on.
func (a *PBPaxos) onTakeoverDone() {
	a.ready = true
	a.tent = nil
	a.leadWaiting()
}

// takeSnapshot persists the replicated state at the applied instance and
// drops the records of the instances the previous snapshot covered.
func (a *PBPaxos) takeSnapshot() {
	prev := a.snapAt
	a.persist(recSnapshot, encodeSnapRec(a.applied, a.appliedPN, a.sm.snapshot()))
	a.snapAt = a.applied
	a.dropLog(prev)
}

// dropLog forgets the instances up to i, in memory and on disk.
func (a *PBPaxos) dropLog(i uint64) {
	var ks []uint64
	for k := range a.log {
		if k <= i {
			ks = append(ks, k)
		}
	}
	sort.Slice(ks, func(x, y int) bool { return ks[x] < ks[y] })
	for _, k := range ks {
		delete(a.log, k)
		a.Emit(automaton.Persist{Key: slotKey(k), Delete: true})
	}
	for g := range a.gaps {
		if g <= i {
			delete(a.gaps, g)
		}
	}
}

func digest(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}
