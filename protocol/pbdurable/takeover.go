package pbdurable

import (
	"encoding/json"
	"fmt"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability"
)

// Take-overs that lose no acknowledged write when the failure detector
// is wrong (package doc, "Take-overs"). The Grid Services thesis's
// switch_to_primary (III.A problem 3, IV.C.2 recover) assumes a perfect
// failure detector: the senior backup takes over after one silent
// check period (here after suspect_checks: package doc, "Failure
// detection"), and the primary drops a backup silent for two. Under a
// slow disk or a pause both happen to live nodes, and together they lose
// writes: the primary, whose heartbeats wait behind its own fsync, drops
// the backups it stopped hearing and answers alone, while a backup that
// stopped hearing it takes over with the state it had.
//
// Two rules close it (decision, the seed being silent):
//
//   - A write is answered (and its transaction issued) only once at
//     least one synced backup of the view holds its update buffer
//     (heldByBackup), so every acknowledged write is at a node other
//     than the primary. A primary left without a synced backup waits
//     until one joins.
//   - A new primary serves only once every node but its suspected
//     predecessor (the primary of the view it left) has adopted its view
//     and sent a promise: the replicated state it holds (the view of
//     that state, its index, the image and the held buffers). Adopting
//     the view stops the node acknowledging the old view, so the old
//     primary answers nothing more; the new primary installs the latest
//     state reported (its view, then its index) if it is later than its
//     own. So whatever the old primary acknowledged, a backup that
//     acknowledged it reported it.

// promiseState is a promise's state: the replicated objects' image at
// applied, and the held buffers after it (kindUpdate encodings).
type promiseState struct {
	Snap    []byte
	Applied uint64
	Held    [][]byte
}

// collects reports whether this namespace's take-overs wait for promises
// and its answers for a backup: only the replicated objects need them
// (the database's are fenced and recovered by the recovery queries), and
// only with other nodes. Not yet under two mechanisms (mapping pbdb): the
// promised state and the database's commit index are not reconciled
// there (package doc, "Take-overs from a live primary").
func (a *PBD) collects() bool {
	s := a.svc.set()
	return !a.proto.soloTakeOver && len(a.cfg.Nodes) > 1 && s.Has(durability.Replicated)
}

// beginCollect starts a take-over's collection of promises, before the
// view moves on: the suspect is the primary of the view being left.
func (a *PBD) beginCollect() {
	a.collecting, a.promises, a.suspect = false, nil, ""
	if !a.collects() {
		return
	}
	a.collecting, a.promises = true, map[automaton.NodeID]msg{}
	if p := a.primaryID(); p != a.cfg.Self {
		a.suspect = p
	}
}

// promisesComplete reports whether every node but the suspect promised.
func (a *PBD) promisesComplete() bool {
	if !a.collecting {
		return true
	}
	for _, n := range a.cfg.Nodes {
		if n == a.cfg.Self || n == a.suspect {
			continue
		}
		if _, ok := a.promises[n]; !ok {
			return false
		}
	}
	return true
}

// onPromise: a node adopted this new primary's view and reports its
// state.
func (a *PBD) onPromise(from automaton.NodeID, m msg) {
	if !a.primary || a.ready || !a.collecting || m.view != a.view {
		return
	}
	a.promises[from] = m
	a.finishTakeOver()
}

// bestPromise is the node whose reported state is the latest (its view,
// then its index), "" for this node's own, and that state's index.
func (a *PBD) bestPromise() (automaton.NodeID, uint64) {
	best, bv, bi := automaton.NodeID(""), a.memView, a.index
	for _, n := range a.cfg.Nodes {
		m, ok := a.promises[n]
		if !ok || m.stateView.IsZero() {
			continue
		}
		if bv.Less(m.stateView) || (m.stateView == bv && m.index > bi) {
			best, bv, bi = n, m.stateView, m.index
		}
	}
	return best, bi
}

// shortOfCommit reports whether, under two mechanisms, the best state
// promised so far stops before the database's commit index c while the
// suspect has not promised: the updates up to c are then at the suspect
// only (its buffers are durable: it persisted each before shipping it;
// every backup that acknowledged them restarted since), and the new
// primary waits for the suspect's promise (it comes once the suspect
// adopts this view, alive or restarted) rather than recover a commit
// index beyond its replicated state.
func (a *PBD) shortOfCommit(c uint64) bool {
	if !a.collecting || !a.twoMechanisms() || a.suspect == "" {
		return false
	}
	if _, ok := a.promises[a.suspect]; ok {
		return false
	}
	_, bi := a.bestPromise()
	return bi < c
}

// installBest installs the latest state the promises reported when it is
// later than this node's own (its view, then its index).
func (a *PBD) installBest() {
	if !a.collecting {
		return
	}
	best, bi := a.bestPromise()
	m := a.promises[best]
	a.collecting, a.promises = false, nil
	if best == "" {
		return
	}
	var ps promiseState
	if err := json.Unmarshal(m.state, &ps); err != nil {
		panic(fmt.Sprintf("pbdurable: undecodable promise from %s: %v", best, err))
	}
	for _, p := range a.svc.set().Proxies() {
		if p.Mechanism() != durability.Replicated {
			p.Init() // restored by the recovery queries next
		}
	}
	if err := a.install(ps.Snap); err != nil {
		panic(fmt.Sprintf("pbdurable: promised state from %s does not install: %v", best, err))
	}
	a.initDatabaseObjects() // the promised image's copies: the recovery queries restore them next
	a.held = map[uint64]prepared{}
	for _, b := range ps.Held {
		u, err := decode(b)
		if err != nil || u.kind != kindUpdate {
			panic(fmt.Sprintf("pbdurable: undecodable held buffer from %s: %v", best, err))
		}
		a.held[u.index] = prepared{ups: u.ups, db: u.db}
	}
	a.applied, a.index, a.commit, a.dbApplied = ps.Applied, bi, ps.Applied, 0
}

// sendPromise tells the primary of this node's view the state it holds
// (while it is not synced: it adopted the view, or waits for its state).
func (a *PBD) sendPromise() {
	p := a.primaryID()
	if p == "" || p == a.cfg.Self || a.synced || !a.collects() {
		return
	}
	a.promised = true
	m := msg{kind: kindPromise, view: a.view, index: a.index, stateView: a.memView}
	if !a.memView.IsZero() {
		ps := promiseState{Snap: a.snapshot(), Applied: a.applied}
		for i := a.applied + 1; i <= a.index; i++ {
			if h, ok := a.held[i]; ok {
				ps.Held = append(ps.Held, msg{kind: kindUpdate, view: a.memView, index: i, db: h.db, ups: h.ups}.encode())
			}
		}
		m.state, _ = json.Marshal(ps)
	}
	a.send(p, m)
}

// stepDownState: a primary that learns of a later view keeps its objects
// as the state of its view: every request it executed is in them (it
// reports them in its promise like a backup's; a primary that was not
// ready yet still holds the state it took over with).
//
// Under two mechanisms (pbdb) its objects also hold requests whose
// transactions are undecided (executed, shipped, not committed, perhaps
// never: a later view fenced them), which no promise may report as
// applied. It goes back to its durable state instead, kept in memory:
// the image it last persisted (decided changes only: written when no
// transaction was undecided) and the buffers it executed since, held as
// prepared, for the next primary's recovery to decide against the
// database's commit index like any backup's.
func (a *PBD) stepDownState() {
	if !a.collects() || !a.ready {
		return
	}
	if a.twoMechanisms() && a.snapImg != nil {
		if err := a.install(a.snapImg); err != nil {
			panic(fmt.Sprintf("pbdurable: own image does not install: %v", err))
		}
		a.initDatabaseObjects()
		a.held = a.own
		a.applied, a.commit, a.dbApplied = a.snapAt, a.snapAt, 0
		a.snapImg, a.own = nil, nil
		return
	}
	a.applied = a.index
	a.held = map[uint64]prepared{}
}

// initDatabaseObjects empties the objects a node other than the primary
// does not keep (database and reconstructible ones).
func (a *PBD) initDatabaseObjects() {
	for _, p := range a.svc.set().Proxies() {
		if p.Mechanism() != durability.Replicated {
			p.Init()
		}
	}
}

// heldByBackup reports whether a synced backup holds p's update buffer
// (always true for a request without one, or on a single node).
//
// Under two mechanisms (pbdb) the database's commit index decides
// instead: every update has a transaction, a new primary recovers the
// commit index and waits for the suspect's durable buffers when no other
// node holds the updates up to it (shortOfCommit), so a write the primary
// answered alone is not lost; and a primary whose members were all
// dropped must still commit, or its queue never drains for the state a
// returning member needs (stateClear).
func (a *PBD) heldByBackup(p *pending) bool {
	if p.ship == 0 || !a.collects() || a.twoMechanisms() {
		return true
	}
	for _, m := range a.members {
		if !m.needsState && m.acked >= p.ship {
			return true
		}
	}
	return false
}
