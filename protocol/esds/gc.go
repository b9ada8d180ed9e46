package esds

import (
	"sort"

	"github.com/synod-dev/synod/automaton"
)

// Garbage collection (seed 000 §4.3.1's remark on memoised stable state,
// §6.1): see the package doc.

// collect discards operations that are applied here and stable at every
// member (so nobody needs them from us), keeping their ids in the summary and
// their values in a bounded cache, and persists the stable state that now
// stands for them.
func (a *ESDS) collect() {
	m := a.members()
	var gone []*op
	live := a.appliedLive[:0]
	for _, o := range a.appliedLive {
		if o.applied && o.solid&m == m && a.pending[o.id] == 0 {
			gone = append(gone, o)
		} else {
			live = append(live, o)
		}
	}
	clear(a.appliedLive[len(live):])
	a.appliedLive = live
	if len(gone) == 0 {
		return
	}
	sort.Slice(gone, func(x, y int) bool { return gone[x].label.Less(gone[y].label) })
	for _, o := range gone {
		a.gcd.add(o.id)
		if o.svalOK {
			a.results[o.id] = o.sval
			a.resultQ = append(a.resultQ, o.id)
			if len(a.resultQ) > resultCacheSize {
				delete(a.results, a.resultQ[0])
				a.resultQ = a.resultQ[1:]
			}
		}
		delete(a.ops, o.id)
		delete(a.dirty, o.id)
		a.goneQ[o.id] = m &^ a.bit()
		for j := range a.peers {
			delete(a.peers[j].has, o.id)
			if j != a.self && m&(1<<j) != 0 {
				a.enqueue(j, o.id)
			}
		}
	}
	a.out = append(a.out, automaton.Persist{Key: recStable, Value: a.marshalStable()})
	for _, o := range gone {
		a.out = append(a.out, automaton.Persist{Key: recOp + o.id, Delete: true})
	}
}
