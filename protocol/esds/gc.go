package esds

import (
	"slices"
	"sort"
	"sync/atomic"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Garbage collection (the ESDS thesis §4.3.1's remark on memoised stable state,
// §6.1): see the package doc.

// collect discards operations that are applied here and stable at every
// member (so nobody needs them from us), keeping their ids in the summary and
// their values in a bounded cache, and persists the stable state that now
// stands for them.
func (a *ESDS) collect() {
	m := a.members()
	if a.collectEveryTick() {
		a.dropStale()
		if a.rw != nil {
			a.rewriteStep()
		}
	}
	if !a.collectDue(m) {
		return
	}
	a.gcSkipped, a.gcLastN = 0, 0
	// The operations examined: every applied one, or on the incremental
	// path (collectEveryTick) at most gcScanPerTick of them from where
	// the last tick stopped, of which at most gcPerTick go.
	from, to, most := 0, len(a.appliedLive), len(a.appliedLive)
	if a.collectEveryTick() {
		from = min(a.gcCursor, len(a.appliedLive))
		to, most = min(from+gcScanPerTick, len(a.appliedLive)), gcPerTick
	}
	var gone []*op
	next := to // the first operation not examined
	live := a.appliedLive[:from]
	for i := from; i < len(a.appliedLive); i++ {
		o := a.appliedLive[i]
		if i < next && o.applied && o.solid&m == m && a.pending[o.id] == 0 {
			gone = append(gone, o)
			if len(gone) == most {
				next = i + 1
			}
			continue
		}
		if i == next {
			a.gcCursor = len(live)
		}
		live = append(live, o)
	}
	if next >= len(a.appliedLive) {
		a.gcCursor = 0 // from the oldest again at the next tick
	} else {
		deltaUse.bounded.Add(1)
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
			a.keepResult(o.id, o.sval)
		}
		delete(a.ops, o.id)
		o.gone = true   // its queued stream positions now say "gone"
		o.dirty = false // nothing to persist: its record goes (or stays for "g")
		if a.goneless() {
			// No "gone" positions: the peers learn o is stable here
			// from our stable prefix, which covers the collected
			// operations (stable_prefix.go solidPrefix; package doc,
			// "Stability as a prefix").
			continue
		}
		a.goneQ[o.id] = m &^ a.bit()
		for j := range a.peers {
			if j != a.self && m&(1<<j) != 0 {
				a.enqueueOp(j, o.id, nil)
			}
		}
	}
	if a.collectDelta(len(gone)) || a.collectEveryTick() && a.startRewrite() {
		// Record "g": the stable state is "s"'s snapshot plus the
		// operation records kept since (store.go restore); also while
		// the next "s" is being encoded (startRewrite).
		a.persists = append(a.persists, automaton.Persist{Key: recStableDelta, Value: a.marshalStable(false)})
		a.deltaWritten = true
		for _, o := range gone {
			a.uncompacted = append(a.uncompacted, keptRec{o.recKey(), o.label})
		}
		return
	}
	a.persists = append(a.persists, automaton.Persist{Key: recStable, Value: a.marshalStable(true)})
	if a.deltaWritten || len(a.uncompacted) > 0 {
		a.persists = append(a.persists, automaton.Persist{Key: recStableDelta, Delete: true})
	}
	if a.collectEveryTick() {
		// A large state (the records "g" kept): their deletes, and the
		// ones of the operations this collection discards, go at most
		// gcPerTick a tick from the next one on (dropStale), not all in
		// this step: 76,000 of them made this step 94-116 ms of CPU (in
		// process, 10,000 keys, ~25k puts/s), in which this replica
		// answered nothing (issue 28, session 50: the put p99).
		seg := make([]keptRec, 0, len(gone))
		for _, o := range gone {
			seg = append(seg, keptRec{o.recKey(), o.label})
		}
		a.queueStale(seg)
		a.queueStale(a.uncompacted)
		a.uncompacted, a.deltaWritten = nil, false
		return
	}
	// The record keys made when the records were written (recKey), not
	// recOp+id again: one allocation fewer per operation collected.
	a.persists = slices.Grow(a.persists, len(gone)+len(a.uncompacted)+a.staleN)
	for _, o := range gone {
		a.persists = append(a.persists, automaton.Persist{Key: o.recKey(), Delete: true})
	}
	for _, k := range a.uncompacted {
		a.persists = append(a.persists, automaton.Persist{Key: k.key, Delete: true})
	}
	a.dropStaleAll()
	a.uncompacted, a.deltaWritten = nil, false
}

// dropStale deletes at most gcPerTick of the records "s" stands for
// (stale, oldest first): the operations were collected before the "s"
// now durable or queued, so a record outliving a crash is one restore
// skips (its id is in the id summary and its label at most "s"'s) and
// queues here again; none of them can be written again (a collected
// operation is never received again: replicaRequest, receiveGossip).
func (a *ESDS) dropStale() {
	n := min(a.staleN, gcPerTick)
	if n == 0 {
		return
	}
	a.persists = slices.Grow(a.persists, n)
	a.staleN -= n
	for n > 0 {
		seg := a.stale[0]
		k := min(n, len(seg))
		for _, r := range seg[:k] {
			a.persists = append(a.persists, automaton.Persist{Key: r.key, Delete: true})
		}
		n -= k
		if k < len(seg) {
			a.stale[0] = seg[k:]
			continue
		}
		a.stale[0] = nil
		a.stale = a.stale[1:]
	}
	if a.staleN == 0 {
		a.stale = nil
	}
}

// queueStale queues the deletes of the records seg names (dropStale),
// after those queued before; seg is the queue's from now on.
func (a *ESDS) queueStale(seg []keptRec) {
	if len(seg) > 0 {
		a.stale = append(a.stale, seg)
		a.staleN += len(seg)
	}
}

// dropStaleAll deletes every record left in stale (a collection that
// rewrites "s" with its deletes in the step: small states, or a large one
// restored before its first "s" here).
func (a *ESDS) dropStaleAll() {
	for _, seg := range a.stale {
		for _, r := range seg {
			a.persists = append(a.persists, automaton.Persist{Key: r.key, Delete: true})
		}
	}
	a.stale, a.staleN = nil, 0
}

// goneless reports whether collection queues no "gone" positions: under
// stability=prefix the peers learn that a collected operation is stable
// here from the stable prefix every stream message carries, which covers
// it (stable_prefix.go solidPrefix). impl=simple sends a stream only when
// it has positions to send (combination.go gossipEnabled), so an idle
// stream's grown prefix would never reach the peer: it keeps "gone".
func (a *ESDS) goneless() bool { return a.spPrefix && !a.simple }

// collectDelta reports whether this collection writes record "g" (the
// stable state's fields without its snapshot) and keeps the records of the
// n operations it discards, instead of rewriting record "s". The ESDS
// thesis §6.1 is silent on how the stable state is kept. Decision (issue
// 28): a collection rewrote the whole snapshot in the node's event loop
// (10,000 keys: 1.3 MB, 14-36 ms of one step, during which nothing else is
// answered: ESDS's put p99); now, once the snapshot exceeds deltaMin, a
// collection writes "g" and keeps the collected operations' records, and
// "s" is rewritten (deleting them) only when they would take, at
// gcOpBytes each, deltaFactor times the snapshot: the stable state is
// recovered as "s"'s snapshot plus the kept operations between "s"'s
// label and "g"'s, in label order (store.go restore). Every record "g"
// stands for was written in an earlier step or earlier in this one's
// batch (do_it's, on the step that did the operation here), and a
// runtime makes records durable in order, so "g" is never durable without
// them. Small states (every simulation) rewrite "s" as before.
func (a *ESDS) collectDelta(n int) bool {
	if a.snapLen < deltaMin {
		return false
	}
	if a.rw == nil && (len(a.uncompacted)+n)*gcOpBytes >= deltaFactor*a.snapLen {
		return false
	}
	deltaUse.writes.Add(1)
	return true
}

// Delta records (collectDelta): variables for the tests that run the delta
// path on small states, which count the records "g" written, the
// restarts that found one and the collections that stopped at their
// bound (collectEveryTick) (deltaUse).
var (
	deltaMin    = 64 << 10
	deltaFactor = 8
	deltaUse    struct {
		writes, restores, bounded atomic.Int64
		// paced rewrites of "s" started and ended, and the parts
		// encoded before the last (rewrite.go)
		pacedStarts, pacedEnds, pacedParts atomic.Int64
	}
)

// collectDue reports whether a collection is worth its cost now. Each one
// writes the whole stable state (record "s", which stands for the records
// it deletes): with a large state (10,000 keys: a 1.3 MB snapshot, sorted
// and encoded in the event loop) and collection every gcEveryTicks, that
// record was a quarter of a replica's CPU under load (issue 18). The ESDS thesis
// §6.1 leaves when to collect open. Decision: collect when the operations
// that can go would take, as records of about gcOpBytes each, at least
// half the last snapshot's size (so the rewrite costs at most about
// twice what it frees); when none became collectable since the last look
// (a quiet replica collects at once); or when gcMaxSkips collections have
// been put off (a bound on the memory held). Small states (every
// simulation) collect as before.
func (a *ESDS) collectDue(m uint64) bool {
	if a.collectEveryTick() {
		return true
	}
	if a.gcSkipped >= gcMaxSkips || a.snapLen <= 2*gcOpBytes || a.snapLen >= deltaMin {
		// (a collection that writes "g" costs what it discards; the one
		// that rewrites "s" comes when the kept records call for it)
		return true
	}
	n := 0
	for _, o := range a.appliedLive {
		if o.applied && o.solid&m == m {
			n++
		}
	}
	if n*gcOpBytes*2 >= a.snapLen || n == a.gcLastN {
		return true
	}
	a.gcSkipped++
	a.gcLastN = n
	return false
}

// Collection amortisation (collectDue).
const (
	gcOpBytes  = 128
	gcMaxSkips = 50
)

// collectEveryTick reports whether collection is incremental: once the
// stable state is kept as record "s" plus "g" (collectDelta: a snapshot
// of at least deltaMin), a collection costs what it discards (one small
// record "g" and the per-operation work), so it runs at every tick and
// each tick examines at most gcScanPerTick applied operations, from
// where the last one stopped, and discards at most gcPerTick of them.
// The ESDS thesis §6.1 leaves when to collect open. Decision (issue 28):
// collecting every gcEveryTicks ticks discarded ten ticks' worth of
// operations in one step (64 clients, 10,000 keys: the longest ticks,
// 4-10 ms of CPU, in which nothing else is answered); bounded and at
// every tick, no tick does more than gcPerTick operations' work, and the
// bound is about four times what 25k puts/s make collectable per tick,
// so a backlog drains. Small states (every simulation, unless a test
// lowers deltaMin) collect every gcEveryTicks ticks, whole, as before.
func (a *ESDS) collectEveryTick() bool { return a.snapLen >= deltaMin }

// Incremental collection (collectEveryTick): variables so that the tests
// that force the delta path on small states (delta_test.go) also bound
// it.
var (
	gcPerTick     = 2048
	gcScanPerTick = 8192
)

// keepResult keeps the value of id, just collected, for a late retry
// (frontend.go), evicting the oldest kept beyond resultCacheSize. The
// values are a ring, oldest at resultHead once full: cut from the front
// and appended at the back, it was copied into a new array every few
// hundred collections (issue 28, session 54). It is not a map: every
// collected operation was an insertion and an eviction of a hashed string
// key at every replica (6% of ESDS Step CPU in process under puts), where
// a lookup (keptResult) happens only for a retry of an operation already
// collected here.
func (a *ESDS) keepResult(id string, v service.Result) {
	if len(a.results) < resultCacheSize {
		a.results = append(a.results, resultEntry{id, v})
		return
	}
	a.results[a.resultHead] = resultEntry{id, v}
	a.resultHead = (a.resultHead + 1) % len(a.results)
}

// keptResult is the value keepResult kept for id, if it still does: a
// scan of the ring from the newest (at most resultCacheSize string
// comparisons, once per late retry).
func (a *ESDS) keptResult(id string) (service.Result, bool) {
	n := len(a.results)
	for k := 1; k <= n; k++ {
		if r := &a.results[(a.resultHead-k+n)%n]; r.id == id {
			return r.res, true
		}
	}
	return service.Result{}, false
}

// resultEntry is one value kept for a late retry (keepResult).
type resultEntry struct {
	id  string
	res service.Result
}
