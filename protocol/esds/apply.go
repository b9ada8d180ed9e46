package esds

import (
	"slices"
	"sort"

	"github.com/synod-dev/synod/service"
)

// The replica's locally controlled actions (the ESDS thesis Figs. 4.2 and 4.5):
// do_it_r(x, l), solidify_r (folded into do_it and checkSolid), the stable
// state's advance (Fig. 4.5's memo, §4.3.1), and send_{r,f}("response", x,
// v), with the values they need: val_r(x) over the tentative state and
// stable-value_r(x).

// progress runs every enabled locally controlled action until none is: do_it,
// solidify (one replica), the stable-state advance, and the responses.
func (a *ESDS) progress() {
	for changed := true; changed; {
		changed = false
		for i := 0; i < len(a.waiting); i++ {
			o := a.waiting[i]
			if a.prevDone(o) {
				a.waiting = append(a.waiting[:i], a.waiting[i+1:]...)
				o.inWait = false
				a.doIt(o)
				changed = true
				i--
			}
		}
	}
	if !a.unopt {
		a.advanceStable()
	}
	a.sendResponses()
}

// sendResponses is send_{r,f}("response", x, v) for every pending operation
// whose precondition holds (canRespond), with v = value(x), to every front
// end that sent x here (frontend.go).
func (a *ESDS) sendResponses() {
	ids := make([]string, 0, len(a.pending))
	for id := range a.pending {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		reqs := a.pending[id]
		o := a.ops[id]
		if o == nil {
			continue
		}
		if !a.canRespond(o) {
			continue
		}
		res, ok := a.value(o)
		if !ok {
			res = service.Errorf("ERR operation %q is stable but its value was not kept across a restart", id)
		}
		delete(a.pending, id)
		for fe := 0; reqs != 0; fe++ {
			if reqs&(1<<fe) != 0 {
				reqs &^= 1 << fe
				a.sendResponse(fe, id, res)
			}
		}
	}
}

func (a *ESDS) prevDone(o *op) bool {
	for _, p := range o.prev {
		if a.gcd.has(p) || a.reads.has(p) {
			continue
		}
		q := a.ops[p]
		if q == nil || !q.label.Set {
			return false
		}
	}
	return true
}

// doIt is do_it_r(x, l): give x a label above every label seen.
func (a *ESDS) doIt(o *op) {
	a.counter++
	o.label = Label{C: a.counter, R: uint32(a.self), Set: true}
	if a.proto.dupLabel {
		o.label.R = 0 // broken: the label no longer names its replica
	}
	o.done |= a.bit()
	a.dnaInsert(o)
	a.markDirty(o)
	a.newInfo(o)
	if a.tentValid && a.tentMax.Less(o.label) && !a.unopt && !a.recompute {
		a.tentApply(o)
	} else if !a.staleAppend(o) {
		a.notePending(o, false) // the stale state lacks o (or there is none yet)
		a.tentValid = false
		a.lowerTent(o.label)
	}
	// ESDSAlg's do_it adds ⋂ done to solid_r[r]; ESDSOptAlg's does not, and
	// uses solidify for one replica instead. For one operation both amount to
	// this check (with one member, done here means done everywhere).
	if a.unopt || a.members() == a.bit() {
		a.checkSolid(o)
	}
}

// canRespond is send_{r,f}("response", x, v)'s precondition.
func (a *ESDS) canRespond(o *op) bool {
	if !o.label.Set {
		return false
	}
	if !o.strict || a.proto.earlyStrict {
		return true
	}
	m := a.members()
	if o.solid&a.bit() == 0 {
		return false
	}
	// x ∈ ⋂_i solid_r[i]
	return o.solid&m == m
}

// value is v: stable-value_r(x) for an applied operation, else val_r(x).
// An operation whose result the service says is the same in every state
// (service.StateFree: KV's plain SET) answers it without the tentative
// state being rebuilt: val_r(x) over any label order is that result. The
// seed computes val_r(x) from the label order and says nothing of when
// the state is rebuilt (Fig. 4.5's memo); at 64 clients the rebuilds a
// put's answer waited for replayed 8,000-18,000 operations in one step
// (tens to hundreds of milliseconds of the node's loop: ESDS's p99).
func (a *ESDS) value(o *op) (service.Result, bool) {
	if o.applied {
		return o.sval, o.svalOK
	}
	if !o.tvalOK && stateFree && !a.unopt && !a.recompute {
		if sf, ok := a.svc.(service.StateFree); ok {
			if res, ok := sf.StateFreeResult(o.sop); ok {
				a.freeAnswers++
				return res, true
			}
		}
	}
	if !o.tvalOK && a.keyValue(o) {
		return o.tval, true
	}
	if !o.tvalOK || a.unopt || a.recompute {
		if !o.tvalOK {
			a.lowerTent(o.label)
		}
		a.recomputeTent()
	}
	return o.tval, o.tvalOK
}

// keyValue computes val_r(o) for a key-local operation o over its keys
// alone, without rebuilding the tentative state, when every operation
// done here and not yet stable that is not a read is key-local: those
// naming o's keys (byKey), in label order up to o, applied to a copy of
// the stable state's entries for those keys (service.KVState.KeysState).
// A key-local operation depends on and changes its keys only, so on those
// keys that is the state the rebuild computes under o's label, and o's
// value is the same. The condition: no operation that is not key-local
// was done or placed since the last rebuild without being applied to the
// tentative state (pendNonLocal; set at a restart, whose restored
// operations were never noted), nor applied to it above the stable state
// (touchAll). An operation moved by a relabelling (notePending's wasDone)
// does not stop it: byKey holds it under its new label. The seed defines val_r(x) over the
// label order and is silent on how it is computed (the ESDS thesis Fig.
// 4.5's memo covers the stable state only). Issue 28: at 64 clients, half
// gets, the GETs of keys that gossip had written under a later local
// write rebuilt the state, replaying thousands of operations (a fifth of
// a replica's CPU). It reports whether it did.
func (a *ESDS) keyValue(o *op) bool {
	ks, ok := a.keyed()
	if !ok || o.applied || !o.label.Set || !ks.KeyLocal(o.sop) {
		return false
	}
	v, ok := a.overKeys(ks, o.sop, o.label)
	if !ok {
		return false
	}
	o.tval, o.tvalOK = v, true
	return true
}

// overKeys is the value of the key-local operation sop placed under label
// upTo (after every done operation when upTo is unset), computed over its
// keys alone (keyValue's argument): the stable state's entries for its
// keys, then the done, non-stable operations naming them (byKey) below
// upTo in label order. It reports false when that is not the value: an
// operation that is not key-local is pending (pendNonLocal) or applied
// above the stable state (touchAll), or the state cannot be cut by keys.
func (a *ESDS) overKeys(ks keyedService, sop service.Op, upTo Label) (service.Result, bool) {
	if !keyValues || a.pendNonLocal {
		return service.Result{}, false
	}
	if a.touchAll.Set && (!a.stableMax.Set || a.stableMax.Less(a.touchAll)) {
		return service.Result{}, false
	}
	sub, ok := a.stable.(interface {
		KeysState(keys []string) service.State
	})
	if !ok {
		return service.Result{}, false
	}
	a.keyIndexOn()
	locks := ks.Locks(sop)
	keys := make([]string, len(locks))
	var ops []*op
	for i, l := range locks {
		keys[i] = l.Key
		for _, q := range a.byKey[l.Key] {
			if (!upTo.Set || q.label.Less(upTo)) && !slices.Contains(ops, q) {
				ops = append(ops, q)
			}
		}
	}
	slices.SortFunc(ops, func(x, y *op) int {
		if x.label.Less(y.label) {
			return -1
		}
		return 1
	})
	st := sub.KeysState(keys)
	for _, q := range ops {
		st.Apply(q.sop)
	}
	a.keyAnswers++
	return st.Apply(sop), true
}

// readValue is val_r of a read placed after every operation done here
// (localRead): the tentative state's answer when it is valid, or when it
// is stale only on keys the read does not name (staleAppend's condition);
// else the answer over the read's keys alone (keyValue's condition, with
// every done, non-stable operation on them); else the rebuilt state's. A
// read leaves the state unchanged (service.Service.IsRead).
func (a *ESDS) readValue(sop service.Op) service.Result {
	if a.tentValid && a.tent != nil {
		return a.tent.Apply(sop)
	}
	if ks, ok := a.keyed(); ok && ks.KeyLocal(sop) {
		locks := a.readLocks(ks, sop)
		if a.tent != nil && !a.pendAll && !slices.ContainsFunc(locks, func(l service.Lock) bool { return a.pendKeys[l.Key] }) {
			return a.tent.Apply(sop)
		}
		if v, ok := a.overKeys(ks, sop, Label{}); ok {
			return v
		}
	}
	a.recomputeTent()
	return a.tent.Apply(sop)
}

// keyValues is a variable for the test that compares runs with and
// without answers over keys alone (keyValue).
var keyValues = true

// recomputeTent rebuilds the tentative state: the stable state (σ0 in the
// unoptimised variant, which recomputes every value from scratch as ESDSImpl
// does) plus every non-applied done operation in label order.
//
// The optimised variant starts instead from the highest checkpoint below
// every label placed (or value dropped) since the last rebuild, when one is
// above the stable state: a checkpoint is the tentative state after the
// operations up to its label, and nothing under that label has changed, so
// every value it yields, and every value below it (kept from when it was
// computed), is the one the rebuild from the stable state computes. This
// changes no value, only the work: a gossip message's operations land near
// the end of the label order, so a rebuild replays the last few hundred
// operations instead of every one not yet stable (see the package doc).
func (a *ESDS) recomputeTent() {
	ops := a.doneNotApplied()
	a.tent, a.tentMax = nil, a.stableMax
	if c, ok := a.ckptFor(); ok {
		a.tent, a.tentMax = c.st.(cloner).Clone(), c.label
		a.ckptUsed++
		if c.final {
			a.ckptFinalUsed++
		}
		ops = ops[sort.Search(len(ops), func(i int) bool { return c.label.Less(ops[i].label) }):]
	} else if a.stableMax.Set {
		a.tent = a.copyStable()
	} else {
		a.tent = a.svc.NewState()
	}
	// Checkpoints: one at the final frontier (below it gossip places no
	// label, see finalFrontier), and one ckptTail operations before the
	// end (below where the next gossip's operations are likely to land),
	// each only ckptGap operations or more past the previous one or the
	// start: a checkpoint costs a copy of the state's key map.
	atF, atT := -1, -1
	if !a.unopt && !a.recompute {
		if _, ok := a.tent.(cloner); ok {
			if f, ok := a.finalFrontier(); ok && ckptFrontier {
				atF = sort.Search(len(ops), func(i int) bool { return f.Less(ops[i].label) }) - 1
				if atF < ckptGap-1 {
					atF = -1
				}
			}
			if t := len(ops) - ckptTail - 1; t >= max(atF, -1)+ckptGap {
				atT = t
			}
		}
	}
	a.replayed += len(ops)
	a.maxReplay = max(a.maxReplay, len(ops))
	for i, o := range ops {
		a.tentApply(o)
		if i == atF || i == atT {
			a.addCkpt(o.label, i == atF)
		}
	}
	a.tentValid = true
	a.tentLow = Label{}
	clear(a.pendKeys)
	a.pendAll, a.pendNonLocal = false, false
}

// notePending records, when the tentative state becomes stale because o
// was placed under its last label (or moved, wasDone), which keys it may
// now hold wrongly: o's, when o is key-local; all of them otherwise.
func (a *ESDS) notePending(o *op, wasDone bool) {
	ks, ok := a.keyed()
	if !ok || !ks.KeyLocal(o.sop) {
		a.pendAll, a.pendNonLocal = true, true
		return
	}
	if wasDone {
		a.pendAll = true
		return
	}
	if a.pendAll {
		// Every key is pending already: the keys are read only while
		// pendAll is false (readValue, staleAppend), and the rebuild that
		// clears pendAll clears them (recomputeTent).
		return
	}
	if a.tent == nil {
		// No tentative state yet (a replica no value was asked of):
		// the keys are read only beside one (readValue, staleAppend),
		// and the rebuild that makes it clears them. A replica that
		// only merges gossip added every write's key here.
		return
	}
	if a.pendKeys == nil {
		a.pendKeys = map[string]bool{}
	}
	for _, l := range opLocks(ks, o) {
		a.pendKeys[l.Key] = true
	}
}

// staleAppend applies o, just done here with the largest label, to a
// stale tentative state when no key o names is pending (notePending) and
// every operation placed since the state was last valid is key-local: the
// stale state is then the rebuilt one on every key o names (a key-local
// operation changes its keys only, and the sequence of operations on those
// keys is the same in both), so o's value is val_r(o) in the current label
// order, and the rebuild is put off until a value needs a pending key
// (issue 18: at 64 clients, each rebuild cloned the 10,000-key state).
// It reports whether it did.
func (a *ESDS) staleAppend(o *op) bool {
	ks, ok := a.keyed()
	if !ok || a.tentValid || a.tent == nil || a.pendAll ||
		!a.tentMax.Less(o.label) || !ks.KeyLocal(o.sop) {
		return false
	}
	for _, l := range opLocks(ks, o) {
		if a.pendKeys[l.Key] {
			return false
		}
	}
	o.tval = a.tent.Apply(o.sop)
	o.tvalOK = true
	a.tentMax = o.label
	a.staleApplied++
	return true
}

// addCkpt keeps a copy of the tentative state, whose last operation is
// labelled l, dropping the oldest when ckptMax are kept.
func (a *ESDS) addCkpt(l Label, final bool) {
	if len(a.ckpts) == ckptMax {
		copy(a.ckpts, a.ckpts[1:])
		a.ckpts = a.ckpts[:ckptMax-1]
	}
	a.ckpts = append(a.ckpts, tentCkpt{label: l, st: a.tent.(cloner).Clone(), final: final})
}

// finalFrontier is the label below which the tentative order is final: the
// minimum, over the other members, of the highest label of their origin
// received (heard). Its argument (the ESDS thesis §4.2.3's do_it, and the stream
// rule of the package doc): replica i's counter only grows, so a label i
// gives later exceeds every label i gave before; and whoever sent (c, i)
// knew, at that moment, every operation i had labelled before it, with a
// label at most i's (labels only decrease by merging), so this replica
// knows them too. A label of origin i that gossip may still bring here is
// therefore above heard[i], or already known here (merging it changes
// nothing); and this replica's own next labels exceed its counter. So no
// operation will be placed at or below the frontier: a checkpoint there is
// never made stale by gossip, only passed by the stable state. False while
// some member has not been heard from. (Only placement relies on this:
// ckptFor still drops every checkpoint a placed label lands under.)
func (a *ESDS) finalFrontier() (Label, bool) {
	var f Label
	m := a.members()
	for i, h := range a.heard {
		if i == a.self || m&(1<<i) == 0 {
			continue
		}
		if !h.Set {
			return Label{}, false
		}
		if !f.Set || h.Less(f) {
			f = h
		}
	}
	return f, f.Set
}

// tentCkpt is the tentative state after the operations up to label.
type tentCkpt struct {
	label Label
	st    service.State
	final bool // placed at the final frontier
}

// Checkpoint placement (recomputeTent) and the number kept; variables for
// the test that compares runs with and without checkpoints.
var (
	ckptTail, ckptGap = 512, 512
	ckptFrontier      = true
)

const ckptMax = 8

// lowerTent notes that the tentative state from l on is stale.
func (a *ESDS) lowerTent(l Label) {
	if !a.tentLow.Set || l.Less(a.tentLow) {
		a.tentLow = l
	}
}

// ckptFor drops the stale checkpoints (at or above tentLow, or at or below
// the stable state) and returns the highest one left.
func (a *ESDS) ckptFor() (tentCkpt, bool) {
	if a.unopt || a.recompute {
		return tentCkpt{}, false
	}
	a.dropCkpts(a.tentLow)
	if len(a.ckpts) == 0 {
		return tentCkpt{}, false
	}
	return a.ckpts[len(a.ckpts)-1], true
}

// dropCkpts drops the checkpoints at or above from (when set: they lack an
// operation placed under them) and those at or below the stable state
// (which only grows, so they are never usable again).
func (a *ESDS) dropCkpts(from Label) {
	keep := a.ckpts[:0]
	for _, c := range a.ckpts {
		stale := from.Set && !c.label.Less(from)
		if !stale && (!a.stableMax.Set || a.stableMax.Less(c.label)) {
			keep = append(keep, c)
		} else if stale && c.final {
			a.ckptFinalStale++ // finalFrontier's argument failed (tests)
		}
	}
	clear(a.ckpts[len(keep):])
	a.ckpts = keep
}

func (a *ESDS) tentApply(o *op) {
	if a.tent == nil {
		a.tent = a.svc.NewState()
	}
	o.tval = a.tent.Apply(o.sop)
	o.tvalOK = true
	a.tentMax = o.label
	a.noteTouch(o)
}

// opLocks is ks.Locks(o.sop), computed once per operation (an operation
// never changes; the service's Locks allocates its answer at every call).
func opLocks(ks keyedService, o *op) []service.Lock {
	if o.locks == nil {
		o.locks = appendLocks(ks, o.lock0[:0], o.sop)
	}
	return o.locks
}

// lockAppender is a keyed service that appends an operation's locks to a
// slice (service.KV.AppendLocks): a key-local operation's one lock then
// goes into the operation's own array (opLocks), a local read's into the
// replica's scratch array (readLocks), without an allocation each.
type lockAppender interface {
	AppendLocks(dst []service.Lock, op service.Op) []service.Lock
}

// appendLocks is ks's Locks(sop) appended to dst.
func appendLocks(ks keyedService, dst []service.Lock, sop service.Op) []service.Lock {
	if la, ok := ks.(lockAppender); ok {
		return la.AppendLocks(dst, sop)
	}
	return append(dst, ks.Locks(sop)...)
}

// readLocks is ks's Locks(sop) in the replica's scratch array: valid until
// the next call (a read's locks, looked at and dropped in one step).
func (a *ESDS) readLocks(ks keyedService, sop service.Op) []service.Lock {
	a.lockBuf = appendLocks(ks, a.lockBuf[:0], sop)
	return a.lockBuf
}

// keyedService is a service that names the keys each operation reads and
// writes (service.Lockable) and says which operations are key-local:
// depend on, and change, only the keys they name (service.KV). Any other
// operation is taken to touch the whole state.
type keyedService interface {
	service.Lockable
	KeyLocal(op service.Op) bool
}

// stateFree is a variable for the test that compares runs with and
// without state-free answers (value).
var stateFree = true

// commute is a variable for the test that compares runs with and without
// commuting insertions (tentInsert).
var commute = true

// keyed returns the service as a keyedService when this replica uses
// commuting insertions and stale appends (tentInsert, staleAppend): the
// service names its keys, commute is on, and values are memoised (the
// optimised variant, values=memo).
func (a *ESDS) keyed() (keyedService, bool) {
	if !commute || a.unopt || a.recompute {
		return nil, false
	}
	ks, ok := a.svc.(keyedService)
	return ks, ok
}

// noteTouch records, per key, the largest label of an operation applied to
// the tentative state that names it (and, of operations that are not
// key-local, touchAll). Labels only grow here: after a relabelling or a
// rebuild an entry may be higher than any operation now touching the key,
// which makes tentInsert more cautious, never wrong.
//
// Once noted, an operation needs no noting again (rebuilds replay it): its
// entries stay at least its label, which only decreases.
func (a *ESDS) noteTouch(o *op) {
	if o.touched {
		return
	}
	ks, ok := a.keyed()
	if !ok {
		return
	}
	o.touched = true
	if a.svc.IsRead(o.sop) {
		// A read leaves the state unchanged (labelChanged): an operation
		// placed under it changes no state after it, only the read's own
		// value, which keeps the one computed in the order of its time.
		return
	}
	if !ks.KeyLocal(o.sop) {
		if !a.touchAll.Set || a.touchAll.Less(o.label) {
			a.touchAll = o.label
		}
		return
	}
	if a.touch == nil {
		a.touch = map[string]Label{}
	}
	for _, l := range opLocks(ks, o) {
		if t, ok := a.touch[l.Key]; !ok || t.Less(o.label) {
			a.touch[l.Key] = o.label
		}
	}
}

// tentInsert applies o, newly done here with a label under the tentative
// state's last one, to the valid tentative state in place, when no
// operation after o's label in the tentative order names any key o names
// (nor is one not key-local, nor is o): operations on disjoint keys
// commute, so the state is the one the rebuild in label order computes,
// o's value is computed from the same keys' values as there, and no later
// value changes. It reports whether it did; otherwise the caller
// invalidates the state as before. The seed defines val_r(x) over the whole
// label order and is silent on computing it (see the package doc,
// "Commuting insertions"). Checkpoints at or above o's label lack o and are
// dropped.
func (a *ESDS) tentInsert(o *op) bool {
	ks, ok := a.keyed()
	if !ok || !a.tentValid || a.tent == nil || o.applied {
		return false
	}
	if (a.touchAll.Set && o.label.Less(a.touchAll)) || !ks.KeyLocal(o.sop) {
		return false
	}
	for _, l := range opLocks(ks, o) {
		if t, ok := a.touch[l.Key]; ok && o.label.Less(t) {
			return false
		}
	}
	o.tval = a.tent.Apply(o.sop)
	o.tvalOK = true
	a.noteTouch(o)
	a.commuted++
	a.dropCkpts(o.label)
	return true
}

// advanceStable is the optimised variant's stable-state memo (Fig. 4.5):
// apply, in label order, every operation whose label is at most the label of
// max-stable_r, the highest-labelled operation stable here.
func (a *ESDS) advanceStable() {
	maxStable := a.maxSolid // max-stable_r (index.go)
	if !maxStable.Set {
		return
	}
	a.maxSolid = Label{} // every operation stable here is applied below
	a.dnaSettle()
	n := 0
	for n < len(a.dna) && !maxStable.Less(a.dna[n].label) {
		a.applyStable(a.dna[n])
		n++
	}
	rest := copy(a.dna, a.dna[n:])
	clear(a.dna[rest:])
	a.dna = a.dna[:rest]
}

func (a *ESDS) applyStable(o *op) {
	o.sval = a.stable.Apply(o.sop)
	o.svalOK = true
	o.applied = true
	o.inDNA = false
	a.keyUnindex(o)
	a.appliedLive = append(a.appliedLive, o)
	a.stableMax = o.label
	if a.recording {
		a.orderLog = append(a.orderLog, o.id)
	}
	// The tentative state stays valid: the stable order is a prefix of it.
}

// sortedOps lists every operation by label, then (undone ones) by arrival.
func (a *ESDS) sortedOps() []*op {
	l := make([]*op, 0, len(a.ops))
	for _, o := range a.ops {
		l = append(l, o)
	}
	sort.Slice(l, func(x, y int) bool {
		if l[x].label != l[y].label {
			return l[x].label.Less(l[y].label)
		}
		return l[x].arrival < l[y].arrival
	})
	return l
}
