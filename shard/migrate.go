package shard

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Online slot migration (issue 33 item 3; docs/SHARDING.md, "Online
// migration"). Redis Cluster's MIGRATING/IMPORTING slot states, made
// replicated: every ownership change is a write in the logs of the two
// groups, so it is ordered with their clients' writes, and the copy is
// driven by a deterministic machine (Machine) whose progress lives in the
// placement namespace, so a new driver resumes where the last one stopped.
//
// # Slot states
//
// Each group keeps, per slot whose ownership it has changed, a reserved
// key (StateKey) whose value is "<state> <peer> <token>":
//
//	(absent)   the placement map decides: the group serves the slot if the
//	           map says it owns it (the node checks that before the group)
//	owned      the group serves the slot (set on the destination at hand-off)
//	importing  receiving the slot from peer: only the driver's imports
//	migrating  sending to peer: serves it, and records each written key
//	           in the dirty set (DirtyKey) to be copied again
//	frozen     sending, last pass: refuses the slot's keys (TRYAGAIN)
//	handed     peer owns the slot now: answers ASK peer
//	gone       the placement map has moved it: answers MOVED peer
//
// Admit is the check every request of a sharded group makes, as a guard
// in the same atomic group as the request's operations (package service,
// "guard key slot mode"): it is applied in log order with the state
// changes, so no group applies a write to a slot after the log entry that
// took the slot away from it. The token fences drivers: a driver that
// takes over bumps it in both groups, and every driver action is guarded
// by its token, so an old driver (a deposed placement leader still
// running) can no longer import, take the dirty set or delete.
//
// # Why copy-then-freeze, not Redis's key-by-key MIGRATE
//
// Redis moves a key atomically (MIGRATE deletes it from the source as the
// target acknowledges) because one thread runs both. Two replica groups
// cannot: a key imported to B but not yet deleted from A, or deleted from A
// but not yet imported, would be answered wrongly by one of them. So A
// keeps serving every key while they are copied; a write to a slot in
// migration also marks its key dirty (in A's log), and the driver copies
// the dirty keys again, in passes, until few remain; then A freezes the
// slots (clients get TRYAGAIN, which go-redis and redis-py retry), the last
// dirty keys are copied, B takes ownership, and A answers ASK until the
// placement map moves the slots and A answers MOVED. The freeze lasts one
// pass over at most FreezeAt keys. A keeps every key until the hand-off, so
// a cancel before it is just an unfreeze.

// ReservedPrefix starts every key migration keeps in a group's keyspace.
// No client key may start with it (the node refuses them).
const ReservedPrefix = "\x00synod:"

// DirtyKey is the set of keys written in a migrating slot since the last
// pass took them; TakenKey holds the keys a pass took until they are
// copied (so a driver that dies mid-pass loses none).
const (
	DirtyKey = ReservedPrefix + "dirty"
	TakenKey = ReservedPrefix + "taken"
)

// StateKey is the reserved key of slot's state in a group.
func StateKey(slot int) string { return ReservedPrefix + "slot:" + strconv.Itoa(slot) }

// Reserved reports whether key is one of migration's own keys.
func Reserved(key string) bool { return strings.HasPrefix(key, ReservedPrefix) }

// Slot states (the first word of a StateKey's value).
const (
	StAbsent    = "absent"
	StOwned     = "owned"
	StImporting = "importing"
	StMigrating = "migrating"
	StFrozen    = "frozen"
	StHanded    = "handed"
	StGone      = "gone"
)

// SlotState is a decoded StateKey value.
type SlotState struct {
	State string // one of St*
	Peer  string // the other group's name
	Token uint64
}

// ParseState reads a StateKey value; nil or empty is StAbsent.
func ParseState(v []byte) SlotState {
	f := strings.Fields(string(v))
	if len(f) == 0 {
		return SlotState{State: StAbsent}
	}
	s := SlotState{State: f[0]}
	if len(f) > 1 {
		s.Peer = f[1]
	}
	if len(f) > 2 {
		s.Token, _ = strconv.ParseUint(f[2], 10, 64)
	}
	return s
}

// String is the StateKey value of s.
func (s SlotState) String() string {
	peer := s.Peer
	if peer == "" {
		peer = "-"
	}
	return fmt.Sprintf("%s %s %d", s.State, peer, s.Token)
}

// Guard modes: what a request asks of a slot.
const (
	ModeRead   = "read"   // a client request that only reads
	ModeWrite  = "write"  // a client request that writes
	ModeAsking = "asking" // a client request after ASKING (Redis Cluster's ASK)
	// "in:N:s1,s2": the state is one of these, set by a driver of token
	// at most N (driver's state changes: an older driver cannot undo a
	// newer one's); "tok:N": the state carries token N (driver's copy
	// actions).
)

// Refusal kinds Admit answers.
const (
	RefuseTryAgain = "TRYAGAIN"
	RefuseAsk      = "ASK"
	RefuseMoved    = "MOVED"
	RefuseFenced   = "FENCED" // a driver action of a stale token or in a wrong state
)

// Admit decides whether a request in mode may run against a slot in state
// v (a StateKey value). It returns "" when it may, else the refusal kind
// and the peer group to redirect to (for ASK and MOVED).
func Admit(v []byte, mode string) (refusal, peer string) {
	s := ParseState(v)
	switch {
	case strings.HasPrefix(mode, "in:"):
		tok, states, _ := strings.Cut(mode[3:], ":")
		t, err := strconv.ParseUint(tok, 10, 64)
		if err == nil && s.Token <= t && slices.Contains(strings.Split(states, ","), s.State) {
			return "", ""
		}
		return RefuseFenced, ""
	case strings.HasPrefix(mode, "tok:"):
		if t, err := strconv.ParseUint(mode[4:], 10, 64); err == nil && t == s.Token && s.State != StAbsent {
			return "", ""
		}
		return RefuseFenced, ""
	}
	switch s.State {
	case StAbsent:
		if mode == ModeAsking {
			return RefuseMoved, "" // never owned here: the map's owner
		}
		return "", ""
	case StOwned:
		return "", ""
	case StMigrating:
		if mode == ModeAsking {
			return RefuseMoved, ""
		}
		return "", ""
	case StFrozen:
		return RefuseTryAgain, s.Peer
	case StHanded:
		if mode == ModeAsking {
			return RefuseMoved, s.Peer
		}
		return RefuseAsk, s.Peer
	case StGone:
		return RefuseMoved, s.Peer
	case StImporting:
		return RefuseMoved, s.Peer
	}
	return RefuseMoved, ""
}

// InMode is the guard mode of a driver's state change: the state is one
// of states, set by a driver of token at most tok.
func InMode(tok uint64, states []string) string {
	return "in:" + strconv.FormatUint(tok, 10) + ":" + strings.Join(states, ",")
}

// TokMode is the guard mode of a driver's copy action of token tok.
func TokMode(tok uint64) string { return "tok:" + strconv.FormatUint(tok, 10) }

// Tracks reports whether a write to a slot in state v must mark its key
// dirty (the slot is being copied).
func Tracks(v []byte) bool { return ParseState(v).State == StMigrating }

// ---- the placement record ----

// Placement is a sharded namespace's slot map as the placement namespace
// records it: the configuration epoch and, for each group (in the cluster
// file's order), the slots it owns. Epoch 1 is the cluster file's map;
// every flip of a migration makes the next.
type Placement struct {
	Epoch  uint64
	Groups [][]Range
}

// Encode is p's text form: "epoch N", then one line per group, "i slots".
func (p Placement) Encode() string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch %d\n", p.Epoch)
	for i, rs := range p.Groups {
		fmt.Fprintf(&b, "%d %s\n", i, FormatSlots(rs))
	}
	return b.String()
}

// ParsePlacement reads Encode's form; it checks the invariant (Check).
func ParsePlacement(s string, groups int) (Placement, error) {
	p := Placement{Groups: make([][]Range, groups)}
	for i, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if i == 0 {
			if len(f) != 2 || f[0] != "epoch" {
				return p, fmt.Errorf("placement: first line %q is not \"epoch N\"", line)
			}
			e, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return p, fmt.Errorf("placement: epoch: %v", err)
			}
			p.Epoch = e
			continue
		}
		if len(f) == 1 {
			continue // a group with no slots
		}
		if len(f) != 2 {
			return p, fmt.Errorf("placement: bad line %q", line)
		}
		g, err := strconv.Atoi(f[0])
		if err != nil || g < 0 || g >= groups {
			return p, fmt.Errorf("placement: bad group in %q", line)
		}
		if p.Groups[g], err = ParseSlots(f[1]); err != nil {
			return p, err
		}
	}
	return p, Check(p.Groups)
}

// Move returns the placement after slots move to group to: the next epoch.
func (p Placement) Move(slots []Range, to int) Placement {
	m := Build(p.Groups)
	for _, r := range slots {
		for s := r.First; s <= r.Last; s++ {
			m.Owner[s] = int16(to)
		}
	}
	q := Placement{Epoch: p.Epoch + 1, Groups: make([][]Range, len(p.Groups))}
	for _, or := range m.Ranges() {
		if or.Group >= 0 {
			q.Groups[or.Group] = append(q.Groups[or.Group], or.Range)
		}
	}
	return q
}

// Owns reports whether group g owns every slot of rs in p.
func (p Placement) Owns(g int, rs []Range) bool {
	m := Build(p.Groups)
	for _, r := range rs {
		for s := r.First; s <= r.Last; s++ {
			if int(m.Owner[s]) != g {
				return false
			}
		}
	}
	return true
}

// InRanges reports whether slot is in rs.
func InRanges(rs []Range, slot int) bool {
	for _, r := range rs {
		if slot >= r.First && slot <= r.Last {
			return true
		}
	}
	return false
}

// ---- the migration record ----

// Phase is where a migration is. The order is the order they run in.
type Phase int

// Phases. Each sets one thing in one log, so a driver that takes over
// redoes at most the phase it finds recorded (every phase is idempotent).
const (
	PhImport  Phase = iota // B: importing
	PhMigrate              // A: migrating (dirty tracking on)
	PhCopy                 // scan A's slots, copy in batches
	PhCatchup              // copy the dirty keys, in passes, until few
	PhFreeze               // A: frozen
	PhFinal                // copy the last dirty keys
	PhOwn                  // B: owned
	PhHand                 // A: handed (ASK)
	PhFlip                 // placement: the slots are B's, next epoch (MOVED)
	PhDrop                 // delete the slots' keys from A
	PhGone                 // A: gone
	PhDone
	PhCancelA // A: owned again (unfreeze), dirty sets dropped
	PhCancelB // delete what B imported
	PhCancelC // B: gone (back to A)
	PhCanceled
)

var phaseNames = []string{"import", "migrate", "copy", "catchup", "freeze", "final", "own", "hand", "flip", "drop", "gone", "done", "cancel-a", "cancel-b", "cancel-c", "canceled"}

func (p Phase) String() string {
	if p >= 0 && int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return "phase" + strconv.Itoa(int(p))
}

// Finished reports whether a migration in phase p has ended.
func (p Phase) Finished() bool { return p == PhDone || p == PhCanceled }

// Migration is one migration's record in the placement namespace.
type Migration struct {
	ID       uint64
	From, To int // group indexes in the namespace's shards
	FromName string
	ToName   string
	Slots    []Range
	Phase    Phase
	Token    uint64 // the driver's fencing token (bumped by each driver)
	Cursor   uint64 // scan position in From (PhCopy, PhDrop, PhCancelB)
	Keys     int64  // keys copied (imports, every pass)
	Bytes    int64  // bytes copied
	Passes   int    // dirty passes done
	Dirty    int    // keys the last pass took
	Err      string // why the driver stopped, if it did
}

// Encode is m's text form (one "name value" per line).
func (m Migration) Encode() string {
	return fmt.Sprintf("id %d\nfrom %d %s\nto %d %s\nslots %s\nphase %d\ntoken %d\ncursor %d\nkeys %d\nbytes %d\npasses %d\ndirty %d\nerr %s\n",
		m.ID, m.From, m.FromName, m.To, m.ToName, FormatSlots(m.Slots), m.Phase, m.Token, m.Cursor, m.Keys, m.Bytes, m.Passes, m.Dirty, strconv.Quote(m.Err))
}

// ParseMigration reads Encode's form.
func ParseMigration(s string) (Migration, error) {
	var m Migration
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		name, v, _ := strings.Cut(line, " ")
		var err error
		u := func() uint64 { x, e := strconv.ParseUint(v, 10, 64); err = e; return x }
		i := func() int64 { x, e := strconv.ParseInt(v, 10, 64); err = e; return x }
		switch name {
		case "id":
			m.ID = u()
		case "from", "to":
			g, n, _ := strings.Cut(v, " ")
			x, e := strconv.Atoi(g)
			err = e
			if name == "from" {
				m.From, m.FromName = x, n
			} else {
				m.To, m.ToName = x, n
			}
		case "slots":
			m.Slots, err = ParseSlots(v)
		case "phase":
			m.Phase = Phase(i())
		case "token":
			m.Token = u()
		case "cursor":
			m.Cursor = u()
		case "keys":
			m.Keys = i()
		case "bytes":
			m.Bytes = i()
		case "passes":
			m.Passes = int(i())
		case "dirty":
			m.Dirty = int(i())
		case "err":
			m.Err, err = strconv.Unquote(v)
		}
		if err != nil {
			return m, fmt.Errorf("migration record, %s: %v", name, err)
		}
	}
	return m, nil
}

// Control is what an operator sets on a migration, read by the driver
// before each action: pause, a rate limit (keys per second, 0: none) and
// cancel.
type Control struct {
	Paused bool
	Rate   float64
	Cancel bool
}

// EncodeControl and ParseControl are Control's text form.
func EncodeControl(c Control) string {
	return fmt.Sprintf("paused %t\nrate %g\ncancel %t\n", c.Paused, c.Rate, c.Cancel)
}

// ParseControl reads EncodeControl's form (an empty string is the zero Control).
func ParseControl(s string) Control {
	var c Control
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		name, v, _ := strings.Cut(line, " ")
		switch name {
		case "paused":
			c.Paused = v == "true"
		case "cancel":
			c.Cancel = v == "true"
		case "rate":
			c.Rate, _ = strconv.ParseFloat(v, 64)
		}
	}
	return c
}

// ScanSpace is the size of the scan position space (KV's SCAN cursor is a
// 62-bit hash of the key, uniform over keys): KeysLeft estimates from it.
const ScanSpace = 1 << 62

// KeysLeft estimates the keys still to copy in the copy phase: the keys
// copied so far scaled by the part of the scan space not yet covered (SCAN
// positions are uniform hashes, so keys spread evenly over them). Outside
// the copy phase it is the last dirty pass's count. An estimate: the
// record holds no count of the slots' keys.
func (m Migration) KeysLeft() int64 {
	switch {
	case m.Phase < PhCopy:
		return -1 // unknown yet
	case m.Phase == PhCopy:
		if m.Cursor == 0 {
			return -1
		}
		f := float64(m.Cursor) / ScanSpace
		return int64(math.Round(float64(m.Keys) * (1 - f) / f))
	case m.Phase <= PhFinal:
		return int64(m.Dirty)
	}
	return 0
}

// BytesLeft is KeysLeft times the mean size of a key copied so far.
func (m Migration) BytesLeft() int64 {
	k := m.KeysLeft()
	if k < 0 || m.Keys == 0 {
		return k
	}
	return k * m.Bytes / m.Keys
}
