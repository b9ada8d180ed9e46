package esds

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Persisted records.
const (
	recOp     = "o/" // o/<id>: an operation done here (entry: descriptor, label, stable-here flag)
	recStable = "s"  // the stable state standing for garbage-collected operations
	// recStableDelta is record "s" without its snapshot, written instead
	// of it at a collection while the operation records of what became
	// stable since the last "s" are kept (gc.go, collectDelta): the stable
	// state is then "s"'s snapshot plus those operations in label order.
	recStableDelta = "g"
	recMembers     = "m" // the removed members (bit mask)
	// recCounter holds lbl-counter when one of this replica's own labels
	// was lowered by gossip: the operation's record then names another
	// replica's label, so the counter is no longer implied by the records,
	// and a restart that forgot it could hand out a label another replica
	// still holds for a different operation (the invariant "labels
	// unique").
	recCounter = "c"
	// recPrefix holds a stable prefix of this replica (stable_prefix.go):
	// every operation done here labelled at most it is stable here. Under
	// stability=prefix a record o/<id> is not rewritten when the
	// operation becomes stable here below it, nor when it becomes stable
	// everywhere (flushDirty; package doc, "Records at stability").
	recPrefix = "p"
)

func labelBytes(l Label) []byte {
	e := wire.Encoder{}
	e.Bool(l.Set)
	e.Uvarint(l.C)
	e.Uvarint(uint64(l.R))
	return e.B
}

// stableHeader is the stable-state record's version 1 header (operation
// records use the messages' header: they hold a gossip entry).
var stableHeader = proto.Header{Protocol: "esds", Version: 1}

func uvarintBytes(v uint64) []byte {
	e := wire.Encoder{}
	e.Uvarint(v)
	return e.B
}

// recKey is o's record key, recOp+id (made once).
func (o *op) recKey() string {
	if o.rkey == "" {
		o.rkey = recOp + o.id
	}
	return o.rkey
}

func (a *ESDS) marshalOp(o *op) []byte {
	b, _ := a.marshalOpInto(o, nil)
	return b
}

// opRecordSize is the room marshalOp gives o's record: sized for the
// whole entry (a merge writes hundreds of these): grown from 64 bytes, a
// 100-byte value's record was copied twice.
func opRecordSize(o *op) int {
	n := 64 + len(o.id) + len(o.sop.Kind) + len(o.sop.Key)
	for _, b := range o.sop.Args {
		n += 4 + len(b)
	}
	for _, p := range o.prev {
		n += 4 + len(p)
	}
	return n
}

// marshalOpInto encodes o's record at the end of slab when it has
// opRecordSize(o) bytes of room there, else into a new array: it returns
// the record, capacity-limited (an append to it copies; nothing shares
// its bytes past its end), and slab extended by the record's bytes when
// they went there (flushDirty: one array for a step's records, not one
// each; issue 28, session 59).
func (a *ESDS) marshalOpInto(o *op, slab []byte) (rec, rest []byte) {
	n := opRecordSize(o)
	inSlab := cap(slab)-len(slab) >= n
	var e wire.Encoder
	if inSlab {
		e = recHeader.RecordIn(slab[len(slab) : len(slab) : len(slab)+n])
	} else {
		e = recHeader.Record(n)
	}
	x := a.entryOf(o)
	encodeEntry(&e, &x)
	rec = e.B[:len(e.B):len(e.B)]
	// Still in slab unless an append outgrew the n bytes of room (it
	// would have moved e.B to a new array of a larger capacity).
	if inSlab && cap(e.B) == n {
		slab = slab[:len(slab)+len(rec)]
	}
	return rec, slab
}

// marshalStable encodes the stable state, the label of the last operation in
// it, the label counter, the id summary and (when recording) the order log;
// without snap (record "g"), an empty snapshot in its place.
func (a *ESDS) marshalStable(snap bool) []byte {
	var b []byte
	if snap {
		b = a.snapshotStable()
		a.snapLen = len(b)
	}
	// Sized for the snapshot and the gone ids at once: growing a 1.3 MB
	// record by appends copies it more than once.
	e := stableHeader.Record(len(b) + 32*len(a.goneQ) + 256)
	e.Bytes(b)
	a.encodeStableFields(&e)
	a.encodeGone(&e, snap)
	return e.B
}

// encodeStableFields appends what records "s" and "g" hold after the
// snapshot and before the gone ids: the label of the last operation in
// the stable state, the label counter, the id summary and the order log.
func (a *ESDS) encodeStableFields(e *wire.Encoder) {
	e.Bool(a.stableMax.Set)
	e.Uvarint(a.stableMax.C)
	e.Uvarint(uint64(a.stableMax.R))
	e.Uvarint(a.counter)
	a.gcd.encode(e)
	e.Uvarint(uint64(len(a.orderLog)))
	for _, id := range a.orderLog {
		e.String(id)
	}
}

// encodeGone appends the gone ids: the collected operations some peer
// has not acknowledged yet, in "s" (snap) only.
func (a *ESDS) encodeGone(e *wire.Encoder, snap bool) {
	// The gone ids go in "s" only: "g" stands for them with the kept
	// records of the operations collected since "s" (restore tells the
	// peers of those again). Under load the peers' acknowledgements lag,
	// and "g", written at every collection, would list tens of thousands.
	gone := make([]string, 0, len(a.goneQ))
	for id := range a.goneQ {
		if snap {
			gone = append(gone, id)
		}
	}
	sort.Strings(gone)
	e.Uvarint(uint64(len(gone)))
	for _, id := range gone {
		e.String(id)
	}
}

// stableRec is a decoded record "s" or "g".
type stableRec struct {
	snap      []byte
	stableMax Label
	counter   uint64
	gcd       idSummary
	log, gone []string
}

func decodeStable(b []byte) (stableRec, error) {
	var r stableRec
	d, err := stableHeader.OpenRecord(b, "stable")
	if err != nil {
		return r, err
	}
	r.snap = d.Bytes()
	r.stableMax.Set = d.Bool()
	r.stableMax.C = d.Uvarint()
	r.stableMax.R = uint32(d.Uvarint())
	r.counter = d.Uvarint()
	r.gcd.decode(d)
	n := d.Count(maxEntries*64, 1)
	r.log = make([]string, 0, n)
	for i := 0; i < n; i++ {
		r.log = append(r.log, d.String())
	}
	n = d.Count(maxEntries*64, 1)
	for i := 0; i < n; i++ {
		r.gone = append(r.gone, d.String())
	}
	return r, d.Done()
}

// snapshotStable is the stable state's snapshot. A KV state's is taken
// through the replica's kept key order: each collection would otherwise
// sort every key again, although the key set rarely changes between two
// collections (issue 28). The bytes are the same either way.
func (a *ESDS) snapshotStable() []byte {
	if kv, ok := a.stable.(*service.KVState); ok {
		return kv.SnapshotOrdered(&a.stableOrder)
	}
	return a.stable.Snapshot()
}

// restore rebuilds the replica from its records (see the package doc).
func (a *ESDS) restore(recs map[string][]byte) error {
	if b, ok := recs[recMembers]; ok {
		d := wire.NewDecoder(b)
		m := d.Uvarint()
		if err := d.Done(); err != nil {
			return fmt.Errorf("record %q: %w", recMembers, err)
		}
		a.removed |= m &^ a.bit() & a.all
	}
	// The stable state: record "s", then, when a later collection wrote
	// "g", its fields, and the operations between the two labels, which
	// "g" stands for with their records (applied below, in label order).
	var base Label // the label of the last operation in "s"'s snapshot
	snapN := 0     // its size
	for _, k := range []string{recStable, recStableDelta} {
		b, ok := recs[k]
		if !ok {
			continue
		}
		r, err := decodeStable(b)
		if err != nil {
			return fmt.Errorf("record %q: %w", k, err)
		}
		a.deltaWritten = k == recStableDelta
		if a.deltaWritten {
			deltaUse.restores.Add(1)
		}
		if k == recStable {
			snapN = len(r.snap)
			if err := a.stable.Restore(r.snap); err != nil {
				return fmt.Errorf("record %q: %w", k, err)
			}
			base = r.stableMax
		}
		a.stableMax, a.counter, a.gcd = r.stableMax, r.counter, r.gcd
		for _, id := range r.gone {
			if !a.goneless() { // (stability=prefix queues no "gone": gc.go)
				a.goneQ[id] = a.all &^ a.bit()
			}
		}
		if a.recording {
			a.orderLog = r.log
		}
	}
	if b, ok := recs[recCounter]; ok {
		d := wire.NewDecoder(b)
		c := d.Uvarint()
		if err := d.Done(); err != nil {
			return fmt.Errorf("record %q: %w", recCounter, err)
		}
		if c > a.counter {
			a.counter = c
		}
	}
	if b, ok := recs[recPrefix]; ok {
		d := wire.NewDecoder(b)
		a.spRec.Set = d.Bool()
		a.spRec.C = d.Uvarint()
		a.spRec.R = uint32(d.Uvarint())
		if err := d.Done(); err != nil {
			return fmt.Errorf("record %q: %w", recPrefix, err)
		}
	}
	keys := make([]string, 0, len(recs))
	for k := range recs {
		if strings.HasPrefix(k, recOp) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var above []*op
	var stale []keptRec
	for _, k := range keys {
		d, err := recHeader.OpenRecord(recs[k], "operation")
		if err != nil {
			return fmt.Errorf("record %q: %w", k, err)
		}
		x := decodeEntry(d, new(service.OpDecoder), 0)
		if err := d.Done(); err != nil {
			return fmt.Errorf("record %q: %w", k, err)
		}
		if x.ID != k[len(recOp):] || !x.Label.Set {
			return fmt.Errorf("record %q: holds operation %q (label %v)", k, x.ID, x.Label)
		}
		o := &op{id: x.ID, prev: x.Prev, strict: x.Strict, sop: x.Op, label: x.Label, done: a.bit()}
		if a.stableMax.Set && !a.stableMax.Less(o.label) && (!base.Set || base.Less(o.label)) {
			above = append(above, o) // in the stable state after "s"'s snapshot
		}
		if a.gcd.has(x.ID) {
			if !base.Set || base.Less(o.label) {
				a.uncompacted = append(a.uncompacted, keptRec{k, o.label}) // kept for "g"
			} else if snapN >= deltaMin {
				// "s" stands for it: its delete was queued (dropStale)
				// or lost with a crash. Queued again (large states only:
				// small ones' collections are as before).
				stale = append(stale, keptRec{k, o.label})
			}
			continue // collected (since "s", or its delete was lost with a crash)
		}
		if x.Flags&flagSolid != 0 || a.spRec.Set && !a.spRec.Less(o.label) {
			o.solid = a.bit()
		}
		if x.Flags&flagAll != 0 {
			o.done, o.solid = a.all, a.all
		}
		if a.stableMax.Set && !a.stableMax.Less(o.label) {
			o.applied = true // inside the persisted stable state; its value is gone
		}
		if o.label.C > a.counter {
			a.counter = o.label.C
		}
		a.arrival++
		o.arrival = a.arrival
		a.ops[o.id] = o
		o.pOK, o.pFlags, o.pLabel = true, x.Flags, x.Label
	}
	a.queueStale(stale)
	if snapN >= deltaMin {
		// A large state stays on the delta path (collectEveryTick) from
		// its first tick: with snapLen 0 its first collection examined
		// every applied operation and rewrote "s" whole in one step
		// (10,000 keys: 8-15 ms), the step rewrite.go paces. Small states
		// (every simulation) restart as before.
		a.snapLen = snapN
	}
	// The operations collected since "s" ("g"): every peer is told again.
	for _, k := range a.uncompacted {
		if !a.goneless() {
			a.goneQ[k.key[len(recOp):]] = a.all &^ a.bit()
		}
	}
	// The stable state from "s"'s snapshot to "g"'s label.
	slices.SortFunc(above, func(x, y *op) int {
		if x.label.Less(y.label) {
			return -1
		}
		return 1
	})
	for _, o := range above {
		v := a.stable.Apply(o.sop)
		if q := a.ops[o.id]; q != nil {
			q.sval, q.svalOK = v, true
		}
	}
	// Indexes (index.go), in label order.
	for _, o := range a.sortedOps() {
		if o.applied {
			a.appliedLive = append(a.appliedLive, o)
		} else {
			a.dnaInsert(o)
			a.noteSolid(o)
		}
	}
	return nil
}

// idSummary is the compact set of garbage-collected operation ids (seed §6.1's
// future work: ids need not be kept for ever). Ids of the form
// "<client as 16 hex digits>-<seq decimal>" (AssignedOpID's form, which
// is also the gateway's assigned op id) are kept per client as
// sorted disjoint ranges of sequence numbers, a watermark plus the gaps; other
// ids are kept one by one.
type idSummary struct {
	clients map[uint64][]span
	other   map[string]bool
}

type span struct{ lo, hi uint64 }

// parseDerived parses an id of AssignedOpID's form, in its canonical
// spelling (lower-case hex, no leading zero in the sequence number). It
// allocates nothing: every gossip entry about a collected operation asks
// the id summary (issue 28).
func parseDerived(id string) (client, seq uint64, ok bool) {
	// One pass over the bytes (strconv.ParseUint read each part again
	// after the check: a fifth of the id summary's CPU, which every
	// collection and every request and gossip entry about an unknown
	// operation asks; TestParseDerivedAsStrconv).
	if len(id) < 18 || id[16] != '-' || id[17] == '0' && len(id) > 18 {
		return 0, 0, false
	}
	for i := range 16 {
		d := id[i]
		switch {
		case '0' <= d && d <= '9':
			client = client<<4 | uint64(d-'0')
		case 'a' <= d && d <= 'f':
			client = client<<4 | uint64(d-'a'+10)
		default:
			return 0, 0, false
		}
	}
	for i := 17; i < len(id); i++ {
		d := id[i]
		if d < '0' || d > '9' || seq > (math.MaxUint64-uint64(d-'0'))/10 {
			return 0, 0, false
		}
		seq = seq*10 + uint64(d-'0')
	}
	return client, seq, true
}

func (s *idSummary) has(id string) bool {
	if c, q, ok := parseDerived(id); ok {
		l := s.clients[c]
		i := sort.Search(len(l), func(i int) bool { return l[i].hi >= q })
		return i < len(l) && l[i].lo <= q
	}
	return s.other[id]
}

func (s *idSummary) add(id string) {
	c, q, ok := parseDerived(id)
	if !ok {
		if s.other == nil {
			s.other = map[string]bool{}
		}
		s.other[strings.Clone(id)] = true // not the message's ids (idStrings)
		return
	}
	if s.clients == nil {
		s.clients = map[uint64][]span{}
	}
	l := s.clients[c]
	i := sort.Search(len(l), func(i int) bool { return l[i].hi+1 >= q })
	switch {
	case i < len(l) && l[i].lo <= q && q <= l[i].hi:
		return
	case i < len(l) && l[i].hi+1 == q:
		l[i].hi = q
		if i+1 < len(l) && l[i+1].lo == q+1 {
			l[i].hi = l[i+1].hi
			l = append(l[:i+1], l[i+2:]...)
			break
		}
		return // grown in place: the map's list is l (most adds)
	case i < len(l) && q+1 == l[i].lo:
		l[i].lo = q
		return
	default:
		l = append(l, span{})
		copy(l[i+1:], l[i:])
		l[i] = span{q, q}
	}
	s.clients[c] = l
}

// size is the number of ranges and explicit ids kept.
func (s *idSummary) size() int {
	n := len(s.other)
	for _, l := range s.clients {
		n += len(l)
	}
	return n
}

func (s *idSummary) encode(e *wire.Encoder) {
	cs := make([]uint64, 0, len(s.clients))
	for c := range s.clients {
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i] < cs[j] })
	e.Uvarint(uint64(len(cs)))
	for _, c := range cs {
		e.Uvarint(c)
		e.Uvarint(uint64(len(s.clients[c])))
		for _, sp := range s.clients[c] {
			e.Uvarint(sp.lo)
			e.Uvarint(sp.hi)
		}
	}
	os := make([]string, 0, len(s.other))
	for id := range s.other {
		os = append(os, id)
	}
	sort.Strings(os)
	e.Uvarint(uint64(len(os)))
	for _, id := range os {
		e.String(id)
	}
}

func (s *idSummary) decode(d *wire.Decoder) {
	*s = idSummary{clients: map[uint64][]span{}, other: map[string]bool{}}
	n := d.Count(maxEntries*64, 2)
	for i := 0; i < n && d.Err() == nil; i++ {
		c := d.Uvarint()
		m := d.Count(maxEntries*64, 2)
		l := make([]span, 0, m)
		for k := 0; k < m; k++ {
			sp := span{d.Uvarint(), d.Uvarint()}
			if sp.hi < sp.lo || (k > 0 && sp.lo <= l[k-1].hi+1) {
				d.Fail(fmt.Errorf("esds: id summary of client %x: bad range %d..%d", c, sp.lo, sp.hi))
				return
			}
			l = append(l, sp)
		}
		s.clients[c] = l
	}
	n = d.Count(maxEntries*64, 1)
	for i := 0; i < n; i++ {
		s.other[d.String()] = true
	}
}

// flushDirty persists every operation whose durable part changed in this step,
// ahead of the step's sends and responses.
func (a *ESDS) flushDirty() {
	if a.membersDirty {
		a.membersDirty = false
		a.persists = append(a.persists, automaton.Persist{Key: recMembers, Value: uvarintBytes(a.removed)})
	}
	if a.counterDirty {
		a.counterDirty = false
		a.persists = append(a.persists, automaton.Persist{Key: recCounter, Value: uvarintBytes(a.counter)})
	}
	if len(a.dirtyOps) == 0 {
		return
	}
	// Under stability=prefix (goneless) a record is not rewritten for
	// stable everywhere (the peers' stamps teach it again after a
	// restart), nor for stable here at or below the stable prefix, which
	// record "p" then says once for all of them, after this step's
	// records (package doc, "Records at stability"). The operations whose
	// record already says what it would say are left out before the sort,
	// which orders only the records written (issue 28).
	var sp Label
	if a.goneless() {
		sp = a.solidPrefix()
	}
	needP := false
	dirty := a.flushBuf[:0] // reused step to step (cleared below)
	for _, o := range a.dirtyOps {
		if !o.dirty || !o.label.Set {
			continue
		}
		f := a.flagsOf(o)
		if o.pOK && o.pLabel == o.label {
			if o.pFlags == f {
				continue // the record already says this
			}
			if a.goneless() {
				derived := byte(flagAll)
				if sp.Set && !sp.Less(o.label) {
					derived |= flagSolid
				}
				if (f&^o.pFlags)&^derived == 0 {
					needP = needP || f&^o.pFlags&flagSolid != 0 && brokenPrefixRec != 1
					continue // "p" or the peers say the rest
				}
			}
		}
		dirty = append(dirty, o)
	}
	slices.SortFunc(dirty, func(x, y *op) int { return strings.Compare(x.id, y.id) })
	// Room for every record below, "p" and the step's sends and
	// responses (Step appends them): one allocation, not a slice grown
	// record by record and copied once more in Step.
	a.persists = slices.Grow(a.persists, len(dirty)+1+len(a.Out))
	// The step's records share one array (marshalOpInto), sized for all
	// of them: one allocation per step, where each record was one (every
	// replica writes every operation's record: ~3 allocations of the ~28
	// of a put over a 3-node cluster). The runtimes copy what they keep
	// (the WAL's live records, the memory store, the harness's disk), so
	// the array is garbage once the step's batch is committed.
	size := 0
	for _, o := range dirty {
		size += opRecordSize(o)
	}
	slab := make([]byte, 0, size)
	for _, o := range dirty {
		o.pOK, o.pFlags, o.pLabel = true, a.flagsOf(o), o.label
		var rec []byte
		rec, slab = a.marshalOpInto(o, slab)
		a.persists = append(a.persists, automaton.Persist{Key: o.recKey(), Value: rec})
	}
	if needP && (!a.spRec.Set || a.spRec.Less(sp)) {
		a.spRec = sp
		a.persists = append(a.persists, automaton.Persist{Key: recPrefix, Value: labelBytes(sp)})
	}
	clear(dirty)
	a.flushBuf = dirty[:0]
}

// brokenPrefixRec (tests only, TestBrokenPrefixRecordCaught): 1 leaves a
// record unwritten when its operation becomes stable here at or below the
// stable prefix, without writing record "p".
var brokenPrefixRec int
