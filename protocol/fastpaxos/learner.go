package fastpaxos

import (
	"bytes"
	"fmt"

	"github.com/synod-dev/synod/automaton"
)

// The learner (the Grid Services thesis V.A: "a learner accepts a value when it receives a
// message from a quorum of acceptors"): every acceptor sends its votes to
// every node; a value is chosen in round b when quorum(b) acceptors voted
// it in b, a fast quorum in a fast round, a classic quorum in a recovery
// round. Chosen values are executed in instance order.

func (a *FastPaxos) onVoted(from int, m *message) {
	for _, e := range m.Entries {
		if !e.Ballot.IsZero() {
			a.learnVote(from, e.I, e.Ballot, e.Value)
		}
	}
}

// learnVote counts acceptor acc's vote for val at instance i in round b.
func (a *FastPaxos) learnVote(acc int, i uint64, b Ballot, val []byte) {
	a.maxSeen = max(a.maxSeen, i)
	if a.role == leader && b == a.ballot {
		a.lastFast[acc] = max(a.lastFast[acc], i)
		a.trackVote(acc, i, val)
	}
	if _, ok := a.chosen[i]; ok || i <= a.chosenUpTo {
		return
	}
	vs := a.votes[i]
	if vs == nil {
		vs = map[int]vote{}
		a.votes[i] = vs
	}
	if old, ok := vs[acc]; ok && b.Less(old.bal) {
		return
	}
	vs[acc] = vote{bal: b, val: val}
	count := 0
	for _, v := range vs {
		if v.bal == b && bytes.Equal(v.val, val) {
			count++
		}
	}
	need := a.q.of(b)
	if a.proto.classicLearn {
		need = a.q.classic // broken on purpose: a classic quorum in a fast round
	}
	if count >= need {
		if isFast(b) {
			a.stats.FastLearned++
		} else {
			a.stats.ClassicLearned++
		}
		a.observe(Learned, i, b, val)
		a.learn(i, val)
		return
	}
	if a.role == leader {
		a.checkCollision(i)
	}
}

// learn records val chosen at instance i, and executes what it can.
func (a *FastPaxos) learn(i uint64, val []byte) {
	if _, ok := a.chosen[i]; ok || i <= a.chosenUpTo {
		return
	}
	a.chosen[i] = val
	a.learnedNow = append(a.learnedNow, i)
	a.persist(learnKey(i), encodeLearnRec(val))
	a.maxSeen = max(a.maxSeen, i)
	var lost []automaton.RequestID
	for _, v := range a.votes[i] {
		if id, ok := valueID(v.val); ok && !bytes.Equal(v.val, val) {
			lost = append(lost, id)
		}
	}
	delete(a.votes, i)
	delete(a.recovering, i)
	delete(a.stuck, i)
	if id, ok := valueID(val); ok {
		if _, seen := a.chosenReq[id]; !seen {
			a.chosenReq[id] = i
		}
		delete(a.tracks, id)
	}
	a.execute()
	if a.role == leader {
		automaton.SortRequestIDs(lost)
		for _, id := range lost {
			a.checkNotChosen(id)
		}
	}
}

// execute runs the chosen prefix in instance order and answers the
// requests this node holds. A request chosen at two instances runs once:
// the deduplication table answers the second (machine.apply).
func (a *FastPaxos) execute() {
	for {
		if _, ok := a.chosen[a.chosenUpTo+1]; !ok {
			if a.proto.skipGap && a.chosen[a.chosenUpTo+2] != nil {
				a.chosenUpTo += 2 // fastpaxos-broken-skipgap: the gap is never executed
				continue
			}
			break
		}
		a.chosenUpTo++
	}
	for a.executed < a.chosenUpTo {
		i := a.executed + 1
		if a.proto.skipGap && a.chosen[i] == nil {
			a.executed = i // the skipped instance
			continue
		}
		req, isCmd, err := decodeValue(a.chosen[i])
		if err != nil {
			panic(fmt.Sprintf("fastpaxos: instance %d holds a corrupt value: %v", i, err))
		}
		a.executed = i
		if isCmd {
			res := a.sm.apply(req, i)
			if _, ok := a.pending[req.ID]; ok {
				a.respond(automaton.Response{ID: req.ID, Result: res})
			}
		}
	}
}

// catchupTick asks the leader for chosen instances this learner missed
// (votes lost, or a restart).
func (a *FastPaxos) catchupTick() {
	if a.role == leader || a.leaderHint < 0 || a.leaderHint == a.self {
		return
	}
	target := max(a.leaderCommit, 0)
	if target <= a.chosenUpTo {
		a.catchupTicks = 0
		return
	}
	a.catchupTicks++
	if a.catchupTicks%2 != 1 {
		return
	}
	from := a.chosenUpTo + 1
	a.send(a.leaderHint, &message{Kind: kindCatchupReq, From: from, To: min(target, from+catchupMax-1)})
}

func (a *FastPaxos) onCatchupReq(from int, m *message) {
	var es []entry
	for i := m.From; i <= m.To && len(es) < catchupMax; i++ {
		if v, ok := a.chosen[i]; ok {
			es = append(es, entry{I: i, Value: v})
		}
	}
	if len(es) > 0 {
		a.send(from, &message{Kind: kindCatchup, Entries: es})
	}
}

func (a *FastPaxos) onCatchup(m *message) {
	for _, e := range m.Entries {
		if _, ok := a.chosen[e.I]; !ok && e.I > a.chosenUpTo {
			a.stats.CaughtUp++
			a.learn(e.I, e.Value)
		}
	}
}
