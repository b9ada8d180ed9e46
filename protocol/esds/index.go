package esds

import (
	"sort"

	"github.com/synod-dev/synod/service"
)

// Indexes that keep every step's work proportional to what changed rather
// than to the number of operations held (they change no decision: each
// stands for a scan of a.ops that the code did before).
//
//   - dna: the done, non-applied operations in label order (the tentative
//     order past the stable state). New local labels exceed every label seen,
//     so they append; a label learned by gossip is inserted by binary search.
//     The stable-state advance takes a prefix of it.
//   - maxSolid: the largest label of an operation stable here and not yet
//     applied (max-stable_r of Fig. 4.5), maintained as operations become
//     stable here, instead of being searched for on every step.
//   - appliedLive: the applied operations not yet garbage-collected, the only
//     candidates for collection.

// dnaPos is the position of the first operation of dna whose label is not
// below l.
func (a *ESDS) dnaPos(l Label) int {
	return sort.Search(len(a.dna), func(i int) bool { return !a.dna[i].label.Less(l) })
}

// dnaInsert puts o (done, not applied) at its place in label order.
func (a *ESDS) dnaInsert(o *op) {
	if o.inDNA || o.applied || !o.label.Set {
		return
	}
	o.inDNA = true
	if n := len(a.dna); n == 0 || a.dna[n-1].label.Less(o.label) {
		a.dna = append(a.dna, o)
		return
	}
	i := a.dnaPos(o.label)
	a.dna = append(a.dna, nil)
	copy(a.dna[i+1:], a.dna[i:])
	a.dna[i] = o
}

// dnaRemove takes o out of dna; call it before o's label changes.
func (a *ESDS) dnaRemove(o *op) {
	if !o.inDNA {
		return
	}
	o.inDNA = false
	for i := a.dnaPos(o.label); i < len(a.dna); i++ {
		if a.dna[i] == o {
			a.dna = append(a.dna[:i], a.dna[i+1:]...)
			return
		}
	}
	panic("esds: operation missing from the done index")
}

// noteSolid records that o may have become stable here (max-stable_r).
func (a *ESDS) noteSolid(o *op) {
	if o.solid&a.bit() == 0 || o.applied || !o.label.Set {
		return
	}
	if !a.maxSolid.Set || a.maxSolid.Less(o.label) {
		a.maxSolid = o.label
	}
}

// cloner is implemented by service states that copy themselves more cheaply
// than Snapshot plus Restore (service.KVState).
type cloner interface{ Clone() service.State }

// copyStable returns a copy of the stable state.
func (a *ESDS) copyStable() service.State {
	if c, ok := a.stable.(cloner); ok && !a.recompute {
		return c.Clone()
	}
	// values=recompute keeps the seed's cost: a full copy through the
	// snapshot.
	s := a.svc.NewState()
	if err := s.Restore(a.stable.Snapshot()); err != nil {
		panic("esds: restoring the stable state: " + err.Error())
	}
	return s
}
