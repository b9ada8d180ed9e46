package shard

// The migration driver as a deterministic machine: Next says what to do
// (one write or read in one group's log, or in the placement namespace),
// the runtime does it and hands the outcome to Apply. The machine keeps
// no clock and does no I/O (node/migrate.go runs it on the placement
// leader; shard's simulation test runs it against model groups, with
// drivers that die and drivers that keep running after they were
// replaced).
//
// A driver starts from the record the placement namespace holds: it bumps
// the token and saves the record (a compare-and-set, so of two drivers
// one wins), re-sets the slot states the recorded phase starts from with
// its token (so the previous driver's actions are refused from then on),
// then runs the phases. Every phase is idempotent: redone from its start
// it reaches the same state. An action that fails stops the machine; the
// runtime starts a new one from the saved record.

// ActKind is the kind of an Action.
type ActKind int

// Action kinds.
const (
	ActSave       ActKind = iota // save Rec to the placement namespace (compare-and-set)
	ActSetState                  // set every slot of Slots in Group to State, if each is in Expect
	ActScan                      // scan Group's keys from Cursor, Count at a time
	ActDump                      // read Keys' values in Group (guarded by Token)
	ActImport                    // write Items in Group (guarded by Token)
	ActTake                      // move Group's dirty set into its taken set, return the taken keys
	ActClearTaken                // drop Group's taken set
	ActDelete                    // delete Keys in Group (guarded by Token)
	ActFlip                      // the placement map: Slots move to Group, next epoch
	ActWait                      // wait Wait seconds (rate limit, pause)
	ActStop                      // nothing more: finished, or stopped (Reason)
)

var actNames = []string{"save", "set-state", "scan", "dump", "import", "take", "clear-taken", "delete", "flip", "wait", "stop"}

func (k ActKind) String() string { return actNames[k] }

// Item is one key's value as copied: Value is the service's serialized
// form (KV's DUMP), TTL the time to live in ms (0: none); Absent for a key
// that no longer exists (a dirty key since deleted).
type Item struct {
	Key    string
	Value  []byte
	TTL    int64
	Absent bool
}

// Action is one step of the driver.
type Action struct {
	Kind   ActKind
	Group  int // a group index of the namespace
	Slots  []Range
	State  SlotState
	Expect []string
	Token  uint64
	Cursor uint64
	Count  int
	Keys   []string
	Items  []Item
	Rec    Migration
	Wait   float64
	Reason string
}

// Outcome is what an action gave: Err when it failed (then the machine
// stops), the keys and next cursor of a scan (0: the scan is complete),
// the keys of a take, the items of a dump.
type Outcome struct {
	Err    string
	Keys   []string
	Cursor uint64
	Items  []Item
	// Took is how long the action took, in seconds (the runtime measures
	// an import's; 0: not measured), by which the copy backs off
	// (Machine.Backoff).
	Took float64
}

// Machine drives one migration.
type Machine struct {
	Rec   Migration
	Batch int // keys per copy batch, at most
	// BatchBytes bounds a copy batch's bytes (session 49; 0: keys only):
	// an import carries the items in hand up to BatchBytes (one at least,
	// however big), and a dump asks for as many keys as BatchBytes holds
	// at the mean size copied so far (Batch at most, one at least;
	// probeKeys before anything was copied).
	BatchBytes int
	FreezeAt   int // freeze when a dirty pass takes at most this many keys
	MaxPasses  int // or after this many passes
	// Backoff (session 49): after an import that took more than
	// backoffOver times the fastest import this driver has seen, the copy
	// waits the excess (at most backoffMax): see backoff.
	Backoff bool
	// Backoffs counts the waits backoff asked, BackoffWait their sum in
	// seconds.
	Backoffs    int
	BackoffWait float64

	last     Action
	base     float64 // the fastest import seen, seconds (0: none yet)
	waitWhy  string
	reclaim  int // 0: save the bumped token; 1: B's state; 2: A's state; 3: done
	keys     []string
	items    []Item
	next     uint64 // the scan's next cursor
	scanDone bool
	taken    bool // a dirty pass has taken its keys
	wait     float64
	rate     float64
	save     bool // the record changed: save it before going on
	stopped  string
}

// NewMachine returns a driver of rec that takes over from any earlier one
// (its token is rec's plus one).
func NewMachine(rec Migration) *Machine {
	rec.Token++
	rec.Err = ""
	return &Machine{Rec: rec, Batch: 100, BatchBytes: DefaultBatchBytes, FreezeAt: 100, MaxPasses: 8, Backoff: true}
}

// The copy's back-off (session 49): an import is a write in the
// destination's log, queued behind its clients' writes and synced with
// them, so the time it takes, above the fastest this driver has seen
// (the log idle but for the copy), is the queueing the clients' writes
// meet too. When an import takes more than backoffOver times the fastest,
// the driver waits the excess before the next batch (at most
// backoffMax, and beside any rate limit's wait, the longer of the two):
// the busier the group's log, the less of it the copy takes (about half
// of it once the queueing dominates), and an idle log sees no wait. A
// delay-based control (TCP Vegas's, against the smallest round trip)
// rather than a fixed rate: it needs no threshold in milliseconds, which
// would differ between a disk with fsync and memory. CockroachDB limits
// snapshots by a fixed rate; TiKV's flow control measures its own write
// stalls.
const (
	backoffOver  = 2.0
	backoffFloor = 0.001 // seconds: a fastest import under this counts as this
	backoffMax   = 1.0   // seconds
)

// backoff is the wait after an import that took took seconds (0: none).
func (m *Machine) backoff(took float64) float64 {
	if !m.Backoff || took <= 0 {
		return 0
	}
	if m.base == 0 || took < m.base {
		m.base = took
	}
	ex := took - backoffOver*max(m.base, backoffFloor)
	if ex <= 0 {
		return 0
	}
	return min(ex, backoffMax)
}

// DefaultBatchBytes is a copy batch's byte bound (Machine.BatchBytes). A
// batch is one entry in each group's log, replicated and synced before
// the group's next clients' entries: 100 keys of 4 KiB made 400 KiB
// entries, and the load's p99 during an unlimited copy rose to seconds
// (docs/SHARDING.md, "Online slot migration"). 64 KiB is about what a
// group's log takes from a burst of 64 clients' 1 KiB writes; CockroachDB
// and TiKV likewise send snapshots in chunks (of 256 KiB and 1 MiB, over
// a stream rather than through the log).
const DefaultBatchBytes = 64 << 10

// probeKeys is the first dump's keys, before any size is known (a
// driver taking over knows the record's mean size).
const probeKeys = 10

// itemBytes is an item's bytes as the migration counts them.
func itemBytes(it Item) int { return len(it.Key) + len(it.Value) }

// Stopped is why the machine stopped ("" while it runs).
func (m *Machine) Stopped() string { return m.stopped }

// preB and preA are the states of To and From a phase starts from ("": not
// set by a driver taking over in that phase), and the state the phase's
// own action leaves.
func preB(p Phase) (pre, post string) {
	switch {
	case p == PhImport:
		return "", ""
	case p < PhOwn, p >= PhCancelA && p <= PhCancelC:
		if p == PhCancelC {
			return StImporting, StGone
		}
		return StImporting, StImporting
	case p == PhOwn:
		return StImporting, StOwned
	case p < PhDone:
		return StOwned, StOwned
	}
	return "", ""
}

func preA(p Phase) (pre, post string) {
	switch p {
	case PhCopy, PhCatchup:
		return StMigrating, StMigrating
	case PhFreeze:
		return StMigrating, StFrozen
	case PhFinal, PhOwn:
		return StFrozen, StFrozen
	case PhHand:
		return StFrozen, StHanded
	case PhFlip, PhDrop:
		return StHanded, StHanded
	case PhGone:
		return StHanded, StGone
	}
	return "", ""
}

func (m *Machine) state(st string, peer string) SlotState {
	return SlotState{State: st, Peer: peer, Token: m.Rec.Token}
}

// Next is the driver's next action, given the operator's control.
func (m *Machine) Next(ctl Control) Action {
	m.rate = ctl.Rate
	m.last = m.next1(ctl)
	return m.last
}

func (m *Machine) next1(ctl Control) Action {
	r := &m.Rec
	if m.stopped != "" {
		return Action{Kind: ActStop, Reason: m.stopped}
	}
	switch m.reclaim {
	case 0:
		return Action{Kind: ActSave, Rec: *r}
	case 1:
		if pre, post := preB(r.Phase); pre != "" {
			return Action{Kind: ActSetState, Group: r.To, Slots: r.Slots, State: m.state(pre, r.FromName), Expect: uniq(pre, post)}
		}
		m.reclaim++
		fallthrough
	case 2:
		if pre, post := preA(r.Phase); pre != "" {
			return Action{Kind: ActSetState, Group: r.From, Slots: r.Slots, State: m.state(pre, r.ToName), Expect: uniq(pre, post)}
		}
		m.reclaim++
	}
	if m.wait > 0 {
		w := m.wait
		m.wait = 0
		return Action{Kind: ActWait, Wait: w, Reason: m.waitWhy}
	}
	if ctl.Cancel && r.Phase < PhHand {
		m.enter(PhCancelA)
	}
	if m.save {
		m.save = false
		return Action{Kind: ActSave, Rec: *r}
	}
	if ctl.Paused && (r.Phase == PhCopy || r.Phase == PhCatchup) {
		return Action{Kind: ActWait, Wait: 0.1, Reason: "paused"}
	}
	switch r.Phase {
	case PhImport:
		return Action{Kind: ActSetState, Group: r.To, Slots: r.Slots, State: m.state(StImporting, r.FromName), Expect: []string{StAbsent, StGone, StImporting}}
	case PhMigrate:
		return Action{Kind: ActSetState, Group: r.From, Slots: r.Slots, State: m.state(StMigrating, r.ToName), Expect: []string{StAbsent, StOwned, StMigrating}}
	case PhCopy:
		if a, ok := m.copyStep(); ok {
			return a
		}
		if m.scanDone {
			m.enter(PhCatchup)
			return m.next1(ctl)
		}
		return Action{Kind: ActScan, Group: r.From, Cursor: r.Cursor, Count: 10 * m.Batch, Token: r.Token, Slots: r.Slots}
	case PhCatchup, PhFinal:
		if !m.taken {
			return Action{Kind: ActTake, Group: r.From, Token: r.Token, Slots: r.Slots}
		}
		if a, ok := m.copyStep(); ok {
			return a
		}
		return Action{Kind: ActClearTaken, Group: r.From, Token: r.Token, Slots: r.Slots}
	case PhFreeze:
		return Action{Kind: ActSetState, Group: r.From, Slots: r.Slots, State: m.state(StFrozen, r.ToName), Expect: []string{StMigrating, StFrozen}}
	case PhOwn:
		return Action{Kind: ActSetState, Group: r.To, Slots: r.Slots, State: m.state(StOwned, ""), Expect: []string{StImporting, StOwned}}
	case PhHand:
		return Action{Kind: ActSetState, Group: r.From, Slots: r.Slots, State: m.state(StHanded, r.ToName), Expect: []string{StFrozen, StHanded}}
	case PhFlip:
		return Action{Kind: ActFlip, Group: r.To, Slots: r.Slots}
	case PhDrop, PhCancelB:
		g := r.From
		if r.Phase == PhCancelB {
			g = r.To
		}
		if len(m.keys) > 0 {
			return Action{Kind: ActDelete, Group: g, Keys: m.keys, Token: r.Token, Slots: r.Slots}
		}
		if m.scanDone {
			if r.Phase == PhDrop && !m.taken {
				m.taken = true // the migration's own keys go last
				return Action{Kind: ActDelete, Group: g, Keys: []string{DirtyKey, TakenKey}, Token: r.Token, Slots: r.Slots}
			}
			m.enter(r.Phase + 1) // PhGone, PhCancelC
			return m.next1(ctl)
		}
		return Action{Kind: ActScan, Group: g, Cursor: r.Cursor, Count: 10 * m.Batch, Token: r.Token, Slots: r.Slots}
	case PhGone:
		return Action{Kind: ActSetState, Group: r.From, Slots: r.Slots, State: m.state(StGone, r.ToName), Expect: []string{StHanded, StGone}}
	case PhCancelA:
		return Action{Kind: ActSetState, Group: r.From, Slots: r.Slots, State: m.state(StOwned, ""), Expect: []string{StAbsent, StOwned, StMigrating, StFrozen}}
	case PhCancelC:
		return Action{Kind: ActSetState, Group: r.To, Slots: r.Slots, State: m.state(StGone, r.FromName), Expect: []string{StImporting, StGone}}
	}
	m.stopped = r.Phase.String()
	return Action{Kind: ActStop, Reason: m.stopped}
}

// copyStep is the next dump or import of the keys in hand.
func (m *Machine) copyStep() (Action, bool) {
	r := &m.Rec
	if len(m.items) > 0 {
		n, b := 1, itemBytes(m.items[0])
		for n < len(m.items) && (m.BatchBytes <= 0 || b+itemBytes(m.items[n]) <= m.BatchBytes) {
			b += itemBytes(m.items[n])
			n++
		}
		return Action{Kind: ActImport, Group: r.To, Items: m.items[:n], Token: r.Token, Slots: r.Slots}, true
	}
	if len(m.keys) > 0 {
		n := min(len(m.keys), m.Batch)
		if m.BatchBytes > 0 && r.Keys > 0 {
			n = min(n, max(1, int(int64(m.BatchBytes)*r.Keys/max(r.Bytes, 1))))
		} else if m.BatchBytes > 0 {
			n = min(n, probeKeys) // no size known yet
		}
		return Action{Kind: ActDump, Group: r.From, Keys: m.keys[:n], Token: r.Token, Slots: r.Slots}, true
	}
	return Action{}, false
}

// enter moves the record to phase p.
func (m *Machine) enter(p Phase) {
	m.Rec.Phase = p
	m.Rec.Cursor = 0
	m.keys, m.items, m.next, m.scanDone, m.taken = nil, nil, 0, false, false
	m.save = true
}

func uniq(a, b string) []string {
	if a == b {
		return []string{a}
	}
	return []string{a, b}
}

// Apply takes the outcome of the action Next returned last.
func (m *Machine) Apply(o Outcome) {
	a := m.last
	r := &m.Rec
	if o.Err != "" {
		m.stopped = a.Kind.String() + ": " + o.Err
		r.Err = m.stopped
		return
	}
	switch a.Kind {
	case ActSave:
		if m.reclaim == 0 {
			m.reclaim = 1
		}
	case ActSetState:
		if m.reclaim < 3 {
			m.reclaim++
			return
		}
		m.enter(r.Phase + 1) // import → migrate → copy, freeze → final, own → hand → flip, gone → done, cancel-a → cancel-b, cancel-c → canceled
	case ActScan:
		m.keys = m.keys[:0]
		for _, k := range o.Keys {
			if !Reserved(k) && InRanges(r.Slots, KeySlot(k)) {
				m.keys = append(m.keys, k)
			}
		}
		m.next = o.Cursor
		if o.Cursor == 0 {
			m.scanDone = true
		}
		if len(m.keys) == 0 {
			r.Cursor = m.next
			m.save = true
		}
	case ActDump:
		m.items = o.Items
		m.keys = m.keys[len(a.Keys):]
	case ActImport:
		for _, it := range a.Items {
			r.Keys++
			r.Bytes += int64(itemBytes(it))
		}
		m.wait, m.waitWhy = 0, "rate"
		if m.rate > 0 {
			// The batch's share of a second at the rate, less the time
			// its import took (when measured): a rate, not a pause after
			// each batch (with 64 KiB batches of 4 KiB values, 16 keys, a
			// pause of 8 ms beside imports of ~20 ms held 2,000 keys/s to
			// 800).
			m.wait = max(0, float64(len(a.Items))/m.rate-o.Took)
		}
		if b := m.backoff(o.Took); b > m.wait {
			m.wait, m.waitWhy = b, "backoff"
			m.Backoffs++
			m.BackoffWait += b
		}
		m.items = m.items[len(a.Items):]
		if len(m.items) == 0 && len(m.keys) == 0 && r.Phase == PhCopy {
			r.Cursor = m.next
			m.save = true
		}
	case ActTake:
		m.taken = true
		m.keys = m.keys[:0]
		for _, k := range o.Keys {
			if !Reserved(k) && InRanges(r.Slots, KeySlot(k)) {
				m.keys = append(m.keys, k)
			}
		}
		r.Dirty = len(m.keys)
	case ActClearTaken:
		r.Passes++
		m.save = true
		if r.Phase == PhFinal || r.Dirty <= m.FreezeAt || r.Passes >= m.MaxPasses {
			m.enter(r.Phase + 1)
		} else {
			m.taken = false
		}
	case ActDelete:
		if len(m.keys) > 0 {
			m.keys = nil
			r.Cursor = m.next
			m.save = true
		}
	case ActFlip:
		m.enter(PhDrop)
	}
}
