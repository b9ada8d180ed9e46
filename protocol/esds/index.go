package esds

import (
	"slices"
	"sort"

	"github.com/synod-dev/synod/service"
)

// Indexes that keep every step's work proportional to what changed rather
// than to the number of operations held (they change no decision: each
// stands for a scan of a.ops that the code did before).
//
//   - dna: the done, non-applied operations in label order (the tentative
//     order past the stable state). New local labels exceed every label seen,
//     so they append; labels learned by gossip are merged in once per read.
//     The stable-state advance takes a prefix of it.
//   - maxSolid: the largest label of an operation stable here and not yet
//     applied (max-stable_r of Fig. 4.5), maintained as operations become
//     stable here, instead of being searched for on every step.
//   - appliedLive: the applied operations not yet garbage-collected, the only
//     candidates for collection.
//   - byKey: per key, the done, non-applied key-local writes naming it
//     (apply.go keyValue), in no order. Only answers over keys read it, so
//     it is kept only while they do: built from dna when one first needs
//     it and dropped at a gossip tick when none has since the last (under
//     puts alone, indexing and unindexing every write was a tenth of a
//     replica's step CPU in process, issue 28).

// dnaPos is the position of the first operation of dna whose label is not
// below l.
func (a *ESDS) dnaPos(l Label) int {
	return sort.Search(len(a.dna), func(i int) bool { return !a.dna[i].label.Less(l) })
}

// dnaInsert puts o (done, not applied) at its place in label order: at the
// end when its label is the largest (a local do_it), otherwise into dnaNew,
// merged in one pass by dnaSettle before dna is next read.
func (a *ESDS) dnaInsert(o *op) {
	if o.inDNA || o.applied || !o.label.Set {
		return
	}
	o.inDNA = true
	a.keyIndex(o)
	if n := len(a.dna); len(a.dnaNew) == 0 && (n == 0 || a.dna[n-1].label.Less(o.label)) {
		a.dna = append(a.dna, o)
		return
	}
	a.dnaNew = append(a.dnaNew, o)
}

// dnaSettle merges dnaNew into dna: O(len(dna) + k log k) for k arrivals,
// where inserting them one by one would move dna k times. The merge runs
// from the back, in dna's own array (grown when it has no room): only the
// operations above the lowest arrival move, and no new array is made per
// merge.
func (a *ESDS) dnaSettle() {
	k := len(a.dnaNew)
	if k == 0 {
		return
	}
	if k > 1 {
		slices.SortFunc(a.dnaNew, func(x, y *op) int { return x.label.Compare(y.label) })
	}
	n := len(a.dna)
	a.dna = slices.Grow(a.dna, k)[:n+k]
	d, nw := a.dna, a.dnaNew
	i, j := n-1, k-1
	for w := n + k - 1; j >= 0; w-- {
		if i >= 0 && nw[j].label.Less(d[i].label) {
			d[w] = d[i]
			i--
		} else {
			d[w] = nw[j]
			j--
		}
	}
	clear(a.dnaNew)
	a.dnaNew = a.dnaNew[:0]
}

// dnaRemove takes o out of dna (or dnaNew, where it is not merged yet);
// call it before o's label changes. It does not settle dnaNew: a gossip
// message that relabels operations between arrivals settled once per
// relabelling, each a merge of the whole index (a tenth of a replica's
// CPU at 64 clients, issue 28).
func (a *ESDS) dnaRemove(o *op) {
	if !o.inDNA {
		return
	}
	o.inDNA = false
	for i, q := range a.dnaNew {
		if q == o {
			n := len(a.dnaNew) - 1
			copy(a.dnaNew[i:], a.dnaNew[i+1:])
			a.dnaNew[n] = nil
			a.dnaNew = a.dnaNew[:n]
			return
		}
	}
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

// keyIndexOn makes byKey hold every done, non-applied key-local write
// (those in dna), building it when it was dropped (keyIndexIdle), and
// notes that it was used.
func (a *ESDS) keyIndexOn() {
	a.byKeyUsed = true
	if a.byKeyOn {
		return
	}
	a.byKeyOn = true
	a.keyIndexBuilds++
	for _, o := range a.dna {
		a.keyIndex(o)
	}
	for _, o := range a.dnaNew {
		a.keyIndex(o)
	}
}

// keyIndexIdle drops byKey (at a gossip tick) when nothing read it since
// the last tick: the writes it holds leave it and later ones do not
// enter it until keyIndexOn rebuilds it. Dropping and rebuilding it
// changes no value (TestKeyIndexDropsChangeNoValue): overKeys orders what
// it finds by label.
func (a *ESDS) keyIndexIdle() {
	used := a.byKeyUsed
	a.byKeyUsed = false
	if used || !a.byKeyOn || keyIndexKeep {
		return
	}
	a.byKeyOn = false
	a.keyIndexDrops++
	for k, q := range a.byKey {
		for _, o := range q {
			o.inKeys = false
		}
		delete(a.byKey, k)
		if clear(q); cap(q) <= 4 && len(a.byKeyFree) < byKeyFreeMax {
			a.byKeyFree = append(a.byKeyFree, q[:0])
		}
	}
	a.byKey = nil
}

// keyIndexKeep (tests only, TestKeyIndexDropsChangeNoValue) keeps byKey
// once built, as before it was dropped when idle.
var keyIndexKeep bool

// keyIndex adds o, done and not applied, to byKey when it is a key-local
// write of a keyed service (apply.go keyed) and byKey is kept
// (keyIndexOn); it stays there across relabellings until applied
// (keyUnindex).
func (a *ESDS) keyIndex(o *op) {
	if o.inKeys || !a.byKeyOn {
		return
	}
	ks, ok := a.keyed()
	if !ok || !ks.KeyLocal(o.sop) || a.svc.IsRead(o.sop) {
		return
	}
	o.inKeys = true
	if a.byKey == nil {
		a.byKey = map[string][]*op{}
	}
	for _, l := range opLocks(ks, o) {
		q, ok := a.byKey[l.Key]
		if !ok && len(a.byKeyFree) > 0 {
			q = a.byKeyFree[len(a.byKeyFree)-1]
			a.byKeyFree = a.byKeyFree[:len(a.byKeyFree)-1]
		}
		a.byKey[l.Key] = append(q, o)
	}
}

// byKeyFreeMax bounds the emptied byKey lists kept for reuse (keyIndex):
// with most keys naming one unapplied write at a time, each write made a
// list and its application dropped it (an allocation per write per
// replica).
const byKeyFreeMax = 1024

// keyUnindex takes o, now applied, out of byKey.
func (a *ESDS) keyUnindex(o *op) {
	if !o.inKeys {
		return
	}
	o.inKeys = false
	ks, _ := a.keyed()
	for _, l := range opLocks(ks, o) {
		q := a.byKey[l.Key]
		for i := range q {
			if q[i] == o {
				q[i] = q[len(q)-1]
				q[len(q)-1] = nil
				q = q[:len(q)-1]
				break
			}
		}
		if len(q) == 0 {
			delete(a.byKey, l.Key)
			if cap(q) <= 4 && len(a.byKeyFree) < byKeyFreeMax {
				a.byKeyFree = append(a.byKeyFree, q)
			}
		} else {
			a.byKey[l.Key] = q
		}
	}
}
