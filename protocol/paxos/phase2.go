package paxos

import (
	"slices"
	"sort"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Phase 2 (the Grid Services thesis chapter V): proposing batches over a window of
// instances, acceptance, choice, commit notices (package doc, "Phase 2,
// commit and execution").

// proposeAt accepts v at instance i under the leader's own ballot and starts
// counting acceptances, the leader's own included. The leader's acceptance
// record is not persisted here: the caller broadcasts the Accept first and
// then calls persistOwn; the Accept, an Early Send, leaves without waiting
// for that record or any other emitted since the last output that waits
// (see "Phase 2, commit and execution" in the package doc for why sending
// it so and counting the vote at once is safe).
//
// cmds is v's commands when the caller has just encoded them (propose: they
// are already in inLog; v is nil there, the slot's value set by
// broadcastAccept); nil makes proposeAt decode v and note its commands in
// inLog (a value picked in phase 1, a membership change). The slot keeps
// the commands (keptCmds), so the leader decodes none of its own batches
// (the two decodings were 5-6 % of a leader's CPU and 4 of its allocations
// per SET under pipelined SETs, issue 28).
func (a *Paxos) proposeAt(i uint64, v []byte, cmds []cmd, c *conf) entry {
	if cmds != nil {
		cmds = keptCmds(cmds)
	} else if dec, err := decodeBatch(v); err == nil {
		cmds = dec
		for _, c := range cmds {
			a.inLog[c.ID] = i
		}
	}
	s := &slot{bal: a.ballot, val: v, cmds: cmds}
	a.putSlot(i, s)
	a.ownUnsaved = append(a.ownUnsaved, i)
	f := &flight{conf: c, sent: a.tick}
	f.acks.add(a.self)
	a.inflight[i] = f
	return entry{I: i, Value: v}
}

// keptCmds returns cmds as decodeBatch(encodeBatch(cmds)) returns them,
// for the slot to execute. An operation keeps its request's argument
// slices: the runtime hands those over as the automaton's own and never
// modifies them (automaton package doc), as pending requests already keep
// them; services do not change an argument in place (KV shares its stored
// values copy-on-write, KVState.Clone).
// Only an operation whose arguments DecodeOp would give otherwise (an
// empty argument list or argument, an argument with spare capacity) is
// copied by service.CopyOp, which gives exactly what DecodeOp would.
//
// cmds is the caller's own slice (propose builds it for this batch) and is
// changed in place; a group's operation list, the request's, is not: it is
// kept as it is when every operation is (the usual case: no list to
// allocate per group), else copied with the operations that change.
func keptCmds(cmds []cmd) []cmd {
	for k := range cmds {
		c := &cmds[k]
		c.Op = keptOp(c.Op)
		for j, op := range c.Ops {
			if !keptAsIs(op) {
				ops := make([]service.Op, len(c.Ops))
				copy(ops, c.Ops[:j])
				for ; j < len(c.Ops); j++ {
					ops[j] = keptOp(c.Ops[j])
				}
				c.Ops = ops
				break
			}
		}
	}
	return cmds
}

// keptAsIs reports whether keptOp returns op unchanged.
func keptAsIs(op service.Op) bool {
	if len(op.Args) == 0 {
		return op.Args == nil
	}
	for _, a := range op.Args {
		if len(a) == 0 || cap(a) != len(a) {
			return false
		}
	}
	return true
}

func keptOp(op service.Op) service.Op {
	if len(op.Args) == 0 {
		op.Args = nil
		return op
	}
	for _, a := range op.Args {
		if len(a) == 0 || cap(a) != len(a) {
			return service.CopyOp(op)
		}
	}
	return op
}

// persistOwn emits the Persist of the leader's own acceptances proposed
// in this step (proposeAt), after the Accept that carries them. Every output
// emitted from here on, in this step or a later one, is released only once
// these records are durable (automaton contract), and every output that
// depends on the leader's own vote (a choice it completes, a commit notice,
// an answer) is emitted after this call.
func (a *Paxos) persistOwn() {
	for _, i := range a.ownUnsaved {
		if s := a.log[i]; s != nil && s.bal == a.ballot {
			if a.proto.Protocol == BrokenAnswerEarly {
				// Broken on purpose (broken_answer.go): no position, so
				// the answers that rest on this vote do not wait for it.
				a.persist(slotKey(i), encodeSlot(s))
				continue
			}
			a.persistSlot(i, s)
		}
	}
	a.ownUnsaved = a.ownUnsaved[:0]
}

func (a *Paxos) putSlot(i uint64, s *slot) {
	a.log[i] = s
	if i > a.maxInst {
		a.maxInst = i
	}
	if i < a.logStart {
		a.logStart = i
	}
}

// retransmitAccepts resends, in one Accept per peer, the instances in flight
// for at least a tick that the peer has not acknowledged.
func (a *Paxos) retransmitAccepts() {
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
	var pb [8]int
	for _, to := range a.peers(false, pb[:]) {
		var entries []entry
		for _, i := range ids {
			if !a.inflight[i].acks.has(to) {
				entries = append(entries, entry{I: i, Value: a.log[i].val})
			}
		}
		if len(entries) > 0 {
			a.send(to, &message{Kind: kindAccept, Ballot: a.ballot, Commit: a.chosenUpTo, Entries: entries})
		}
	}
	for _, i := range ids {
		a.inflight[i].sent = a.tick
	}
}

// propose fills the phase 2 window with batches of queued commands, all sent
// in one Accept message.
//
// A membership change is proposed alone in its instance k, and nothing is
// proposed after it until it has executed: the configuration of the
// instances after k is the one k makes, known only once k is chosen.
func (a *Paxos) propose() {
	if a.role != leader || !a.ready || len(a.changes) > 0 || !a.isMember() {
		return
	}
	var entries []entry
	var batches [][]cmd // entries[k]'s commands, when its value is still to encode (broadcastAccept)
	for len(a.queue) > 0 && a.next-1-a.chosenUpTo < uint64(a.prm.Window) && len(a.changes) == 0 {
		var cmds []cmd
		for len(a.queue) > 0 && len(cmds) < a.prm.Batch {
			id := a.queue[0]
			p := a.pending[id]
			if p == nil || p.state != pQueued {
				a.queue = a.queue[1:]
				continue
			}
			if _, ok := a.inLog[id]; ok {
				a.queue = a.queue[1:]
				p.state = pProposed
				continue
			}
			if isMemberReq(p.req) {
				if len(cmds) > 0 {
					break // close the batch before the change
				}
				a.queue = a.queue[1:]
				p.state = pProposed
				a.inLog[id] = a.next
				c := cmd{ID: id, Op: p.req.Op}
				entries = append(entries, a.proposeAt(a.next, encodeChange(c), nil, a.sm.conf))
				batches = append(batches, nil)
				if ch, err := parseChange(c.Op); err == nil {
					if n, err := a.sm.conf.apply(ch, a.next); err == nil {
						a.noteChange(ch)
						a.changes = append(a.changes, pendingChange{at: a.next, conf: n})
						a.quorumRound = 0 // leases and reads count against both configurations now
						a.emitMembers()
					}
				}
				a.next++
				break
			}
			a.queue = a.queue[1:]
			p.state = pProposed
			cmds = append(cmds, a.command(p.req))
			a.inLog[id] = a.next
		}
		if len(cmds) == 0 {
			continue
		}
		if a.proto.splitGroups {
			cmds = splitGroups(cmds) // broken on purpose
		}
		entries = append(entries, a.proposeAt(a.next, nil, cmds, a.sm.conf)) // the value: broadcastAccept's
		batches = append(batches, cmds)
		a.next++
	}
	if len(a.changes) > 0 {
		a.updateQuorumRound()
	}
	if len(entries) > 0 {
		commit, early := a.earlyAccept()
		a.broadcastAccept(&message{Kind: kindAccept, Ballot: a.ballot, Commit: commit, Entries: entries}, batches, early)
		a.persistOwn()
		a.checkChosen()
	}
}

// broadcastAccept sends propose's Accept m to every peer. Its entries k
// with batches[k] != nil have no value yet: proposeAt left their slots'
// values for here, so that each batch is encoded once, straight into the
// message (marshalAccept), and not into a buffer of its own that marshal
// then copies (session 56, issue 28: one allocation and one copy of the
// values per instance fewer). The slots keep the values in the message,
// which no runtime modifies (automaton package doc). Without peers (one
// member) each is encoded on its own. Nothing between proposeAt and here
// reads a slot's value.
func (a *Paxos) broadcastAccept(m *message, batches [][]cmd, early bool) {
	var pb [8]int
	peers := a.peers(false, pb[:])
	var b []byte
	if len(peers) > 0 {
		b = marshalAccept(m, batches)
	} else {
		for k, cmds := range batches {
			if cmds != nil {
				m.Entries[k].Value = encodeBatch(cmds)
			}
		}
	}
	for k, en := range m.Entries {
		if batches[k] != nil {
			a.log[en.I].val = en.Value
		}
	}
	for _, h := range peers {
		a.Emit(automaton.Send{To: a.nodes[h], Msg: b, Early: early})
	}
}

// earlyAccept says whether the Accept that propose sends now may be an
// Early Send (automaton.Send.Early), and which commit notice it carries.
//
// An Early Send waits only for the records that the last output emitted
// before it that is not Early waits for: every record of the earlier steps
// up to such an output, and in this step every record before the last such
// output in a.Out (if any). So:
//   - its commit notice is the chosen prefix, but below the first instance
//     whose record this step persisted after that output. The prefix
//     known at the end of earlier steps is covered (checkChosen); a choice
//     of this step is covered by its answer or heartbeat, and with a
//     configuration of one member the leader chooses an instance in the
//     step that proposes it.
//   - it is not Early with a configuration of one member, nor when this
//     step persisted a promise after its last waiting output. Its ballot
//     rests on the leader's promise record: with two members or more, the
//     Prepares that followed that record wait for it, and a configuration
//     grows from one member only by an Accept that is not Early.
//
// The Accept's values need no durability at the leader (package doc).
// Every other record (the chosen-prefix record, a snapshot) is a
// consequence of choices, not the basis of one.
func (a *Paxos) earlyAccept() (commit uint64, early bool) {
	if len(a.sm.conf.members) < 2 {
		return a.chosenUpTo, false
	}
	commit = a.chosenUpTo
	for _, o := range a.Out[waitingOutput(a.Out)+1:] {
		p, ok := o.(automaton.Persist)
		if !ok || p.Delete {
			continue
		}
		if p.Key == recPromised {
			return a.chosenUpTo, false
		}
		if i, ok := slotOfKey(p.Key); ok && i <= commit {
			commit = i - 1
		}
	}
	return commit, true
}

// command is the log command the leader proposes for req. The environment
// goes into the log only for a nondeterministic service: it is the one the
// request carried when it reached the leader, that is the one the node the
// client contacted observed at arrival (forwarding keeps it). Every replica
// executes with this one chosen environment (package doc, "Nondeterministic
// services").
func (a *Paxos) command(req automaton.Request) cmd {
	c := cmd{ID: req.ID, Op: req.Op, Ops: req.Ops, nested: a.nested(req), low: min(req.Unanswered, req.ID.Seq)}
	if service.UsesEnv(a.cfg.Service) {
		c.Env = a.logEnv(req) // a zero Env is encoded as none, and decoded as zero
	}
	if len(c.Ops) > 0 {
		c.Op = service.Op{}
	}
	return c
}

// splitGroups is paxos-broken-splitgroup's batch: every operation of a group
// becomes a command of its own. The first operations of the batch's groups
// come first, then the batch's single commands, then the second operations
// of the groups, and so on (A1 B1 s A2 B2), so the single commands and the
// other groups of a batch run between two operations of a group instead of
// before or after it.
func splitGroups(cmds []cmd) []cmd {
	var out []cmd
	for k := 0; ; k++ {
		more := false
		for _, c := range cmds {
			if k < len(c.Ops) {
				out = append(out, cmd{ID: c.ID, Op: c.Ops[k], Env: c.Env, part: k, parts: len(c.Ops)})
				more = more || k+1 < len(c.Ops)
			}
		}
		if k == 0 {
			for _, c := range cmds {
				if len(c.Ops) == 0 {
					out = append(out, c)
				}
			}
		}
		if !more {
			return out
		}
	}
}

func (a *Paxos) onAccepted(from int, m *message) {
	if a.role != leader || m.Ballot != a.ballot {
		return
	}
	if !m.OK {
		a.onRejected(m.Promised)
		return
	}
	top := a.acked[from]
	for _, i := range m.Acks {
		if f := a.inflight[i]; f != nil {
			f.acks.add(from)
		} else if len(a.ownChosen) > 0 {
			a.ackOwnChosen(i, from)
		}
		top = max(top, i)
	}
	a.acked[from] = top
	a.checkChosen()
}

// checkChosen marks instances accepted by a majority as chosen and executes
// the chosen prefix. A choice is followed in its step by an output that
// waits for every record before it: an answer, or else a heartbeat (a
// choice no answer follows: a no-op, an expiry). So the votes behind the
// chosen prefix known at the end of a step, the leader's own included,
// are durable before any Early Accept emitted later leaves (earlyAccept).
//
// An instance chosen without the leader's own vote (acceptors other than
// the leader form a majority of its acks: the leader is no member of its
// configuration) is unpinned before its answers are emitted
// (automaton.Unpin); one whose choice counted the leader's vote is kept
// (keepOwnChosen) until the other acceptors' acks alone are a majority.
func (a *Paxos) checkChosen() {
	n0 := len(a.Out)
	any := false
	var ub [4]uint64
	unpin := ub[:0]
	for i, f := range a.inflight {
		if a.chosenBy(f) {
			if s := a.log[i]; s != nil {
				s.chosen = true
				a.observe(i, ByQuorum, s.val)
			}
			delete(a.inflight, i)
			if a.chosenByOthers(f) || a.proto.Protocol == BrokenUnpinOne {
				// BrokenUnpinOne: broken on purpose (broken_unpin.go), it
				// unpins on the leader's unsynced vote and one follower's.
				unpin = append(unpin, i)
			} else {
				a.keepOwnChosen(i, f)
			}
			any = true
		}
	}
	if any {
		slices.Sort(unpin) // the map's order is random; the outputs' must not be
		for _, i := range unpin {
			a.Emit(automaton.Unpin{Pos: i})
		}
		a.advance(true)
		if waitingOutput(a.Out[n0:]) < 0 {
			a.sendHeartbeat()
		}
		a.propose()
	}
}

// ownChoice is an instance chosen by a majority that counted the leader's
// own vote, and its acks (ownChosen).
type ownChoice struct {
	i uint64
	f *flight
}

// keepOwnChosen keeps instance i, just chosen with the leader's own vote
// in f's acks, until the other acceptors' acks alone are a majority
// (ackOwnChosen): then the instance is chosen whatever becomes of the
// leader's record of it, and the leader unpins it (automaton.Unpin), so
// that its answers leave on whichever quorum is durable first (package
// doc, "The leader's own acceptance against the followers'"). At most
// 2 x window instances are kept, the lowest dropped first: a follower
// down keeps none longer, and a dropped one only waits for the leader's
// own record, as before.
func (a *Paxos) keepOwnChosen(i uint64, f *flight) {
	if !f.acks.has(a.self) || len(f.conf.members)-1 < f.conf.majority() {
		return // the others can never be a majority (one or two members)
	}
	k := len(a.ownChosen)
	for k > 0 && a.ownChosen[k-1].i > i {
		k--
	}
	a.ownChosen = slices.Insert(a.ownChosen, k, ownChoice{i, f})
	if n := len(a.ownChosen) - 2*max(a.prm.Window, 1); n > 0 {
		clear(a.ownChosen[:n])
		a.ownChosen = slices.Delete(a.ownChosen, 0, n)
	}
}

// ackOwnChosen counts peer from's acceptance of instance i if i is kept
// (keepOwnChosen), and unpins i once the acceptances other than the
// leader's are a majority: each left its node after its record was
// durable (an Accepted is never Early), so t+1 of 2t+1 acceptors durably
// accepted i under this ballot, the Classic Paxos quorum (the seed's
// ch. V.A), without the leader's own vote.
func (a *Paxos) ackOwnChosen(i uint64, from int) {
	for k := range a.ownChosen {
		o := &a.ownChosen[k]
		if o.i != i {
			continue
		}
		o.f.acks.add(from)
		if a.chosenByOthers(o.f) {
			a.Emit(automaton.Unpin{Pos: i})
			a.ownChosen = slices.Delete(a.ownChosen, k, k+1)
		}
		return
	}
}

// chosenByOthers reports whether the acks in f other than the leader's
// own are a majority of f's configuration.
func (a *Paxos) chosenByOthers(f *flight) bool {
	c := f.conf
	n := 0
	for _, m := range c.members {
		if h, ok := a.index[m.ID]; ok && h != a.self && f.acks.has(h) {
			n++
		}
	}
	return n >= c.majority()
}

// waitingOutput returns the index in outs of the last output that waits for
// every Persist emitted before it (a Send that is not Early, a Respond, an
// Effect), or -1.
func waitingOutput(outs []automaton.Output) int {
	last := -1
	for k, o := range outs {
		switch o := o.(type) {
		case automaton.Send:
			if !o.Early {
				last = k
			}
		case automaton.Respond, automaton.Effect:
			last = k
		}
	}
	return last
}

func (a *Paxos) onAccept(from int, m *message) {
	if !a.acceptBallot(from, m.Ballot) {
		if a.role == candidate && m.Ballot.Less(a.ballot) && !a.removed(from) {
			// A live leader with a lower ballot: give up the candidacy; the
			// rejection below makes that leader take a higher ballot.
			a.stepDown()
		}
		a.send(from, &message{Kind: kindAccepted, Ballot: m.Ballot, OK: false, Promised: a.promised})
		return
	}
	acks := make([]uint64, 0, len(m.Entries))
	for _, e := range m.Entries {
		if e.I <= a.chosenUpTo {
			acks = append(acks, e.I) // chosen here already: the value is the same
			continue
		}
		if s := a.log[e.I]; s != nil && s.chosen {
			acks = append(acks, e.I)
			continue
		}
		s := &slot{bal: m.Ballot, val: e.Value}
		a.putSlot(e.I, s)
		a.persistSlot(e.I, s)
		acks = append(acks, e.I)
		if ch, ok := valueChange(e.Value); ok && ch.add {
			a.noteChange(ch)
			a.emitMembers()
		}
	}
	ack := &message{Kind: kindAccepted, Ballot: m.Ballot, OK: true, Acks: acks}
	if a.proto.Protocol == BrokenEarlyAck {
		// Broken on purpose (broken_early.go): the 2b leaves before the
		// vote it reports is durable.
		a.Emit(automaton.Send{To: a.nodes[from], Msg: ack.marshal(), Early: true})
	} else {
		a.send(from, ack)
	}
	a.learnCommit(from, m.Ballot, m.Commit)
}

// learnCommit applies a commit notice: every instance up to commit is chosen;
// an instance accepted here under the notice's ballot holds the chosen value.
// Anything else is fetched from the sender.
func (a *Paxos) learnCommit(from int, b Ballot, commit uint64) {
	if commit <= a.chosenUpTo {
		return
	}
	for i := a.chosenUpTo + 1; i <= commit; i++ {
		s := a.log[i]
		if s == nil || (!s.chosen && s.bal != b) {
			a.requestCatchup(from, i, commit)
			break
		}
		if !s.chosen {
			a.observe(i, ByCommit, s.val)
		}
		s.chosen = true
	}
	a.advance(true)
}
