package paxos

import (
	"github.com/synod-dev/synod/automaton"
)

// A removal is answered once a majority of the configuration it makes knows
// it chosen (session 47, plmem47; package doc, "Membership changes").
//
// Why. A removal shrinks the configuration: instance k ("remove X") is
// chosen by a majority of the old configuration, the instances after it by
// majorities of the new one. Right after k is chosen only the leader may
// know it (the others accepted it and learn it from the next commit
// notice). If the leader then crashes, the survivors have not executed k:
// each is in the old configuration and needs a majority of it for phase 1,
// though they are a majority of the new one. Replacing a dead node D of
// {D, L, A} by N (add N, then remove D) and losing the leader L just after
// the removal leaves A and N, two of the new configuration {L, A, N}, each
// needing three promises of {D, L, A, N}: the group has no leader until L
// returns (and none at all if L's disk is gone), though the caller was
// told the removal was done and counts one crash of three
// (TestMemberRemoveAnsweredWhenTheNewMajorityKnows).
//
// So the leader holds the removal's answer (state pSettling) until the
// heartbeat acknowledgements of enough members of the current
// configuration show a chosen prefix reaching k that, with itself, they are
// a majority of it. Then any one crash leaves a member that knows k chosen
// beside a majority of the new configuration: it executes k, and the others
// fetch k from it (a Prepare beyond their chosen prefix, or the candidate's
// promises showing k chosen), so they elect. The commit notice leaves at
// once (checkChosen sends a heartbeat when no answer follows a choice), so
// the answer waits about one heartbeat more than before (the
// acknowledgement reports the follower's prefix before the notice it
// answers; the next round's reports it after). If the leader steps down
// or retires first (its own removal: the TakeOver hands the notice on),
// or the request reaches op_timeout, the outcome is answered as it was
// executed: chosen is chosen, only the guarantee above is not given.
//
// Adds are answered as before. An add to a configuration of odd size
// (3 -> 4, the placement's replacement) cannot strand a majority of the
// new configuration: any majority of it holds a majority of the old. An
// add to an even-sized configuration (4 -> 5) could, in principle, in the
// same way; the placement never makes one, and holding it would change
// the membership model's scripted prefix (MemberModel, whose second add is
// 4 -> 5). Decided here, not in the seeds (Lamport's SMR with alpha
// leaves it open when a change is "done").

// holdRemoval puts the answer to p, a removal instance i executed with
// outcome o, on hold at a leader (see above); false: answer it now.
func (a *Paxos) holdRemoval(p *pend, o outcome, i uint64) bool {
	if a.role != leader || !isMemberReq(p.req) || isTransferReq(p.req) || o.res.IsErr() {
		return false
	}
	if ch, err := parseChange(p.req.Op); err != nil || ch.add {
		return false
	}
	p.state = pSettling
	p.held, p.heldAt, p.knowers = o, i, nil
	a.settling = append(a.settling, p.req.ID)
	return true
}

// noteKnows records that peer from acknowledged a heartbeat with chosen
// prefix commit, and answers the held removals a majority now knows.
func (a *Paxos) noteKnows(from int, commit uint64) {
	if len(a.settling) == 0 {
		return
	}
	var ready []automaton.RequestID
	for _, id := range a.settling {
		p := a.pending[id]
		if commit >= p.heldAt {
			p.knowers.add(from)
		}
		c := a.sm.conf
		n := 0
		for _, m := range c.members {
			if h, ok := a.index[m.ID]; ok && (h == a.self || p.knowers.has(h)) {
				n++
			}
		}
		if n >= c.majority() {
			ready = append(ready, id)
		}
	}
	for _, id := range ready {
		a.answer(id, a.pending[id].held)
	}
}

// releaseSettling answers every held removal with its outcome: this
// leader steps down and can no longer count acknowledgements.
func (a *Paxos) releaseSettling() {
	for _, id := range append([]automaton.RequestID(nil), a.settling...) {
		a.answer(id, a.pending[id].held)
	}
}
