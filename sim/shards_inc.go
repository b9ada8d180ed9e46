package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/synod-dev/synod/automaton"
)

// Group incarnations in the sharded world (issue 33, session 49; the
// node's are node/groups.go and node/placer_retire.go, the decision
// shard/retire.go).
//
// With ShardsConfig.Incarnations (it needs NewGroups and the register
// placement: no PlaceReplicas) the placer reports the groups a split
// creates as Created, and shard.Decide retires such a group once it owns
// no slots (a merge emptied it, or its split never flipped): retireGroup
// makes the name unplaced at the next incarnation, and the next split
// into it creates a fresh group on the machines Decide chooses, as for
// any unplaced name. A replica belongs to one incarnation (shReplica.
// incarn); a peer message and a timer carry their replica's
// (shEvent.ginc) and reach only the replica of that incarnation on their
// machine: the node's incarnated name ("<ns>#<shard>@<inc>"), under which
// loops, records and messages go.
//
// Retiring, the world does what the nodes do when they read the record
// (and, when crashes are on, half the time crashes one of the group's
// machines just before, for 200 ms to 1.5 s: a member down during the
// retirement, the case the incarnation is for):
// every replica of the group on a machine that is up (or paused) stops
// and its records go. A machine down at the time keeps its replica and
// its log (stale): at its restart it boots it from that log, with that
// incarnation's configuration, as a node restarts the group from its
// stored members copy, and retires it a placement poll later
// (retireStale, 100-500 ms). Meanwhile its messages reach nothing (its
// peers run no replica of its incarnation) and no client or placement
// request is routed to it (replicaOn: the current incarnation only), so
// it commits and answers nothing.
//
// The broken variant reuse-name founds the name again without an
// incarnation: a peer message reaches the group's replica on its machine
// whatever incarnation it is of (as a message named by the group's plain
// name would), and a stale replica is never retired (nothing tells it
// from the new founding). The invariant "one history per group name" catches it: a
// message of one incarnation delivered to a replica of another is a
// violation (two histories under one name).

// incName is g's name with its incarnation ("s2", "s2@3").
func (g *shGroup) incName() string {
	if g.incarn == 0 {
		return g.name
	}
	return fmt.Sprintf("%s@%d", g.name, g.incarn)
}

// retireGroup carries out Decide's retirement of created group g: its
// name unplaced at incarnation inc.
func (w *shWorld) retireGroup(g *shGroup, inc uint64) {
	if inc != g.incarn+1 || len(w.place.Groups[g.idx]) > 0 {
		w.fail("retiring %s at incarnation %d, owning %v", g.incName(), inc, w.place.Groups[g.idx])
		return
	}
	w.tracef("placement: group %s retired (owns nothing): its name is unplaced at incarnation %d", g.incName(), inc)
	if w.faults["crash"] && w.rngFault.Intn(2) == 0 {
		// The fault that matters here, at its moment: a member down
		// during the retirement (half the time, when crashes are on).
		var can []*shMachine
		for _, r := range g.reps {
			if r.m.up && !r.m.paused && w.mayTake(r.m) {
				can = append(can, r.m)
			}
		}
		if len(can) > 0 {
			m := can[w.rngFault.Intn(len(can))]
			w.crash(m)
			w.after(w.between(200*time.Millisecond, 1500*time.Millisecond), &shEvent{kind: shRestart, mach: m.idx, inc: m.inc})
			w.checkMajority(string(m.id) + "'s crash at a retirement")
		}
	}
	for _, r := range g.reps {
		m := r.m
		if m.up {
			// Reads the record: stops the replica and removes its records.
			m.reps = slices.DeleteFunc(m.reps, func(x *shReplica) bool { return x == r })
			if m.running == r {
				m.running, m.outs = nil, nil
			}
			r.rel.Crash()
			r.a, r.buf, r.timers, r.durable = nil, nil, nil, nil
			continue
		}
		// Down: it comes back with this incarnation's log.
		r.staleNodes, r.staleParams = w.bootConfig(r)
		r.stale = true
		w.tracef("placement: %s is down and keeps its replica of %s", m.id, g.incName())
	}
	g.ids, g.reps, g.hint = nil, nil, -1
	g.members, g.boot, g.former, g.chain = nil, nil, nil, nil
	g.joining, g.leaving = "", ""
	g.incarn = inc
	w.stats.Retired++
}

// staleBooted schedules the retirement of the stale replicas restarted
// machine m booted: a placement poll later. Broken reuse-name: never (the
// name has no incarnation by which the node could tell its replica is of
// an earlier founding: it runs on, under the group's name).
func (w *shWorld) staleBooted(m *shMachine) {
	for _, r := range m.reps {
		if r.stale {
			w.stats.StaleBooted++
			w.tracef("%s boots its replica of %s@%d, retired while it was down", m.id, r.g.name, r.incarn)
			if w.cfg.Broken == "reuse-name" {
				return
			}
			w.after(w.between(100*time.Millisecond, 500*time.Millisecond), &shEvent{kind: shRetireStale, mach: m.idx, inc: m.inc})
			return
		}
	}
}

// retireStale stops m's stale replicas and removes their records (its
// first placement read after its restart), unless m went down again.
func (w *shWorld) retireStale(m *shMachine, inc uint64) {
	if !m.up || m.inc != inc {
		return
	}
	m.reps = slices.DeleteFunc(m.reps, func(r *shReplica) bool {
		if !r.stale {
			return false
		}
		if m.running == r {
			m.running, m.outs = nil, nil
		}
		r.rel.Crash()
		r.a, r.buf, r.timers, r.durable = nil, nil, nil, nil
		w.tracef("%s retires its replica of %s@%d", m.id, r.g.name, r.incarn)
		return true
	})
}

// replicaFor is the replica of m that peer message or timer e is for: the
// one of e's group and incarnation (nil: none runs here). Broken
// reuse-name: a peer message goes to the group's replica on m whatever its
// incarnation, and the one-history invariant reports it.
func (w *shWorld) replicaFor(m *shMachine, e *shEvent) *shReplica {
	var other *shReplica
	for _, r := range m.reps {
		if r.g.idx != e.group {
			continue
		}
		if r.incarn == e.ginc {
			return r
		}
		if other == nil || r.incarn == r.g.incarn {
			other = r
		}
	}
	if other == nil || e.kind != shPeer || w.cfg.Broken != "reuse-name" {
		return nil
	}
	from := automaton.NodeID("?")
	if e.from >= 0 {
		from = w.machines[e.from].id
	}
	w.violation("group %s: a message of its incarnation %d (from %s) reached %s's replica of incarnation %d: two histories under one name", other.g.name, e.ginc, from, m.id, other.incarn)
	return other
}
