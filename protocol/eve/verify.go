package eve

import (
	"sort"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
)

// The verifiers (the Eve/Adam thesis §2.2.3): they collect the execution replicas'
// tokens for a slot, decide commit, commit with state transfer, or
// rollback, and agree on that decision among themselves. The agreement is
// Synod's Paxos, one slot at a time (package doc, "Verifier agreement"):
// the leader of a ballot proposes a slot's decision (phase 2) and, once a
// majority of verifiers accepted it, announces it; a new leader first
// collects a majority's accepted decisions (phase 1) and re-proposes the
// one of the highest slot.

type verifier struct {
	promised proto.Ballot
	leading  bool // phase 1 done for promised, which is ours
	electing bool
	promises map[automaton.NodeID]*message

	acc     map[uint64]accepted  // this acceptor's accepted decisions, by slot (a window)
	decided map[uint64]*decision // decisions known, by slot (a window)
	// heard marks the decided slots learned from another node's message:
	// such a decision is durably chosen (the sender's records were durable
	// before its message left). A leader's own decision may rest on its
	// own acceptance not yet durable; a crash then loses it unseen, and
	// the slot may be decided again (invariant "one decision per slot").
	heard map[uint64]bool
	slot  uint64 // the next slot to decide
	epoch uint64 // the epoch after slot-1

	// The leader's round for slot.
	tokens   map[automaton.NodeID]token
	batches  map[[32]byte]*batch
	active   bool // tokens, a batch or a complaint arrived for slot
	ticks    int
	proposal *decision
	acks     map[automaton.NodeID]bool

	quiet int // ticks of activity without a decision (suspicion of the leader)
	// appliedSeen is the highest slot some execution replica is known to
	// have applied (its tokens, batches and status reports): a slot is
	// decided empty only when a replica stands right before it, so that
	// the verifiers never run ahead of every replica.
	appliedSeen uint64
}

func newVerifier() *verifier {
	v := &verifier{acc: map[uint64]accepted{}, decided: map[uint64]*decision{}, heard: map[uint64]bool{}, slot: 1}
	v.resetRound()
	return v
}

func (v *verifier) resetRound() {
	v.tokens, v.batches = map[automaton.NodeID]token{}, map[[32]byte]*batch{}
	v.active, v.ticks, v.proposal, v.acks = false, 0, nil, nil
}

// learn records a decided slot and moves to the next; heard says it came
// from another node.
func (v *verifier) learn(d *decision, heard bool) {
	if _, ok := v.decided[d.Slot]; !ok && d.Slot+decidedWindow > v.slot {
		v.decided[d.Slot] = d
	}
	if heard && v.decided[d.Slot] != nil {
		v.heard[d.Slot] = true
	}
	if d.Slot >= v.slot {
		v.slot, v.epoch = d.Slot+1, d.Epoch
		v.resetRound()
		v.quiet = 0
	}
	for s := range v.decided {
		if s+decidedWindow <= v.slot {
			delete(v.decided, s)
			delete(v.heard, s)
		}
	}
}

// verBatch keeps the batch of the current slot (a rollback re-executes it).
func (a *Eve) verBatch(b *batch) {
	v := a.ver
	v.appliedSeen = max(v.appliedSeen, b.Slot-1)
	if b.Slot == v.slot && b.Epoch == v.epoch {
		v.batches[b.digest()] = b
		v.active = true
	}
}

// onToken collects a token (§2.2.3).
func (a *Eve) onToken(t token) {
	v := a.ver
	if v == nil || !t.valid(a.macKey) || !a.isExecSet[t.Replica] {
		return
	}
	v.appliedSeen = max(v.appliedSeen, t.Slot-1)
	if t.Slot < v.slot {
		if d := v.decided[t.Slot]; d != nil {
			a.send(t.Replica, &message{Kind: kindDecide, Dec: d}) // its Decide was lost
		}
		return
	}
	if t.Slot > v.slot || t.Epoch != v.epoch {
		return
	}
	v.tokens[t.Replica] = t
	v.active = true
	if v.leading && v.proposal == nil {
		a.tryDecide(false)
	}
}

// onComplain: a request waits at its origin, the primary may be down; or
// (OK set) an idle execution replica reports the slot it applied, and gets
// the next decision if it missed it.
func (a *Eve) onComplain(from automaton.NodeID, m *message) {
	v := a.ver
	if v == nil {
		return
	}
	if m.OK {
		if a.isExecSet[from] {
			v.appliedSeen = max(v.appliedSeen, m.Slot)
		}
		if d := v.decided[m.Slot+1]; d != nil {
			a.send(from, &message{Kind: kindDecide, Dec: d})
		} else if d := v.decided[v.slot-1]; d != nil && d.Slot > m.Slot+1 {
			a.send(from, &message{Kind: kindDecide, Dec: d}) // beyond the window: it catches up by transfer
		}
		return
	}
	if m.Epoch < v.epoch {
		if d := v.decided[v.slot-1]; d != nil {
			a.sendAll(a.cfg.Nodes, &message{Kind: kindDecide, Dec: d}) // tell of the new epoch
		}
		return
	}
	v.active = true
}

// tryDecide applies the verification rule to the tokens of the current
// slot: commit a claim that r+1 replicas made; roll back when no claim
// can reach r+1 (or the wait timed out); an empty slot when the batch
// itself never arrived. Rollback and noop rotate the primary (§2.2.3).
func (a *Eve) tryDecide(timedOut bool) {
	v := a.ver
	count := map[claim]int{}
	var best claim
	bestN := 0
	for _, n := range a.execs { // node order: deterministic
		t, ok := v.tokens[n]
		if !ok {
			continue
		}
		c := t.claim()
		count[c]++
		if count[c] > bestN {
			best, bestN = c, count[c]
		}
	}
	need := a.quorum
	if a.proto.minority {
		need = 1 // broken: commit on the first claim
	}
	d := &decision{Slot: v.slot, Epoch: v.epoch}
	switch {
	case bestN >= need:
		d.Kind, d.Claim = decCommit, best
		for _, n := range a.execs {
			if t, ok := v.tokens[n]; ok && t.claim() == best {
				d.Tokens = append(d.Tokens, t)
			}
		}
	case len(v.tokens) == 0 && len(v.batches) == 0 && v.appliedSeen+1 < v.slot:
		return // no replica stands before this slot yet
	case timedOut || bestN+len(a.execs)-len(v.tokens) < need:
		d.Epoch++
		d.Kind = decNoop
		if b := v.batchToReplay(best); b != nil {
			d.Kind, d.Batch = decRollback, b
		}
	default:
		return
	}
	a.propose(d)
}

// batchToReplay picks the batch a rollback re-executes: the one the most
// tokens ran, else the first by digest.
func (v *verifier) batchToReplay(best claim) *batch {
	if b := v.batches[best.Batch]; b != nil {
		return b
	}
	ds := make([][32]byte, 0, len(v.batches))
	for d := range v.batches {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return string(ds[i][:]) < string(ds[j][:]) })
	if len(ds) == 0 {
		return nil
	}
	return v.batches[ds[0]]
}

// propose starts phase 2 for the slot's decision.
func (a *Eve) propose(d *decision) {
	v := a.ver
	v.proposal, v.acks = d, map[automaton.NodeID]bool{}
	a.sendAll(a.vers, &message{Kind: kindAccept, Ballot: v.promised, Dec: d})
}

// onAccept: an acceptor accepts a decision of a ballot it has not
// promised away; the record is durable before the answer leaves.
func (a *Eve) onAccept(from automaton.NodeID, m *message) {
	v := a.ver
	if v == nil {
		return
	}
	if m.Ballot.Less(v.promised) {
		a.send(from, &message{Kind: kindAccepted, Ballot: v.promised, Slot: m.Dec.Slot})
		return
	}
	if v.promised.Less(m.Ballot) {
		v.leading, v.electing = false, false
		v.promised = m.Ballot
		a.persistPromise() // a restart must not promise below it again
	}
	v.acc[m.Dec.Slot] = accepted{Ballot: m.Ballot, Dec: m.Dec}
	v.quiet = 0
	a.persistAccepted(m.Dec.Slot)
	a.send(from, &message{Kind: kindAccepted, Ballot: m.Ballot, Slot: m.Dec.Slot, OK: true})
}

// onAccepted: a majority of acceptances decides the slot.
func (a *Eve) onAccepted(from automaton.NodeID, m *message) {
	v := a.ver
	if v == nil {
		return
	}
	if !m.OK {
		if v.promised.Less(m.Ballot) {
			v.leading, v.electing = false, false // a newer leader
		}
		return
	}
	if !v.leading || v.proposal == nil || m.Ballot != v.promised || m.Slot != v.proposal.Slot {
		return
	}
	v.acks[from] = true
	if len(v.acks) < automaton.Majority(len(a.vers)) {
		return
	}
	d := v.proposal
	v.learn(d, false)
	a.sendAll(a.cfg.Nodes, &message{Kind: kindDecide, Dec: d})
}

// campaign starts phase 1 with a ballot above every one promised here.
func (a *Eve) campaign() {
	v := a.ver
	v.promised = proto.Ballot{Round: v.promised.Round + 1, Node: uint32(a.pos[a.cfg.Self] + 1)}
	v.leading, v.electing, v.promises = false, true, map[automaton.NodeID]*message{}
	v.quiet = 0
	a.persistPromise()
	a.sendAll(a.vers, &message{Kind: kindPrepare, Ballot: v.promised})
}

// onPrepare: promise a higher ballot and report what was accepted and
// decided (decided slots as accepted under an unbeatable ballot: their
// value is the only one any ballot can choose).
func (a *Eve) onPrepare(from automaton.NodeID, m *message) {
	v := a.ver
	if v == nil {
		return
	}
	if m.Ballot.Less(v.promised) {
		a.send(from, &message{Kind: kindPromise, Ballot: v.promised})
		return
	}
	if v.promised.Less(m.Ballot) {
		v.leading, v.electing = false, false
		v.promised = m.Ballot
		a.persistPromise()
	}
	p := &message{Kind: kindPromise, Ballot: m.Ballot, OK: true}
	for s, ac := range v.acc {
		if v.decided[s] == nil {
			p.Accepted = append(p.Accepted, ac)
		}
	}
	for _, d := range v.decided {
		p.Accepted = append(p.Accepted, accepted{Ballot: decidedBallot, Dec: d})
	}
	sort.Slice(p.Accepted, func(i, j int) bool { return p.Accepted[i].Dec.Slot < p.Accepted[j].Dec.Slot })
	a.send(from, p)
}

// decidedBallot marks a decided slot in a Promise.
var decidedBallot = proto.Ballot{Round: 1 << 40}

// onPromise: with a majority, lead: learn the decided slots and
// re-propose the accepted decision of the highest slot.
func (a *Eve) onPromise(from automaton.NodeID, m *message) {
	v := a.ver
	if v == nil || !v.electing {
		return
	}
	if !m.OK {
		if v.promised.Less(m.Ballot) {
			v.electing = false
			v.promised = m.Ballot // the next campaign goes above it
		}
		return
	}
	if m.Ballot != v.promised {
		return
	}
	v.promises[from] = m
	if len(v.promises) < automaton.Majority(len(a.vers)) {
		return
	}
	v.electing, v.leading = false, true
	if a.proto.noRecovery {
		return // broken: decide the next slot afresh, whatever was accepted
	}
	best := map[uint64]accepted{}
	heard := map[uint64]bool{}
	for _, n := range a.vers {
		p := v.promises[n]
		if p == nil {
			continue
		}
		for _, ac := range p.Accepted {
			if b, ok := best[ac.Dec.Slot]; !ok || b.Ballot.Less(ac.Ballot) {
				best[ac.Dec.Slot] = ac
			}
			if ac.Ballot == decidedBallot && n != a.cfg.Self {
				heard[ac.Dec.Slot] = true
			}
		}
	}
	slots := make([]uint64, 0, len(best))
	for s := range best {
		slots = append(slots, s)
	}
	sort.Slice(slots, func(i, j int) bool { return slots[i] < slots[j] })
	for i, s := range slots {
		ac := best[s]
		if s < v.slot {
			continue
		}
		if ac.Ballot == decidedBallot {
			// Decided (it came from a Decide or a majority's acceptance).
			v.learn(ac.Dec, heard[s])
			a.sendAll(a.cfg.Nodes, &message{Kind: kindDecide, Dec: ac.Dec})
			continue
		}
		if i < len(slots)-1 {
			// Below the highest slot, so decided, but an acceptor's entry
			// may be a stale proposal that lost (the acceptors that took
			// part in the final ballot may have dropped the slot from
			// their window): not learned; replicas catch up by transfer.
			continue
		}
		v.slot = s
		v.resetRound()
		a.propose(ac.Dec)
	}
}

// verifierTick: the leader's wait for tokens, retransmissions, and the
// others' suspicion of a leader that decides nothing.
func (a *Eve) verifierTick() {
	v := a.ver
	switch {
	case v.leading && v.proposal != nil:
		a.sendAll(a.vers, &message{Kind: kindAccept, Ballot: v.promised, Dec: v.proposal})
	case v.leading && v.active:
		if v.ticks++; v.ticks >= 2 {
			a.tryDecide(true)
		}
	case v.electing:
		a.sendAll(a.vers, &message{Kind: kindPrepare, Ballot: v.promised})
	case !v.leading && v.active:
		if v.quiet++; v.quiet >= 3+a.pos[a.cfg.Self] {
			a.campaign()
		}
	}
}
