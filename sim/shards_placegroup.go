package sim

import (
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/release"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
	"github.com/synod-dev/synod/synoderr"
)

// The placement namespace replicated (issue 33 items 2, 3 and 6;
// docs/SHARDING.md "The placement namespace in the simulation").
//
// With ShardsConfig.PlaceReplicas > 0 (3 by default with the decided
// plan, since session 44; -1 keeps the registers of the earlier world)
// the placement records are not world registers: they are keys of a KV namespace, #placement, replicated by
// a group of the world's protocol (paxos: the real automaton) on
// PlaceReplicas machines spread over the machine list as
// config.PlacementGroup spreads them (machines 1, 1+M/3, 1+2M/3 of M).
// Its replicas share their machines' processor, disk and fate with the
// data groups' replicas; they take part in every fault (the nemesis's
// budget counts them as a group's).
//
// Records (as node/slotmap.go names them, one namespace): "map" the slot
// map (shard.Placement), "mig" the migration record (shard.Migration),
// "mem/<group>" a group's members record (members, joining, leaving,
// former). Every record write is one atomic group through the
// placement log, as node/migrate.go writes them: the migration record
// and the slot map behind a version guard (guard <key> version <v>,
// the version the writer read or wrote last), then the set, the key's
// new version, and "incr seq", which numbers the placement log's record
// writes. What the world calls the placement state (the slot map the
// clients load, the migration record, the members records) is what the
// first replica to apply each numbered write applied: the chosen
// prefix of the placement log.
//
// The placement leader. The placer (shards_place.go), the migration
// driver and the change driver run on the machine whose replica of
// #placement leads it (as node/placer.go runs on the placement leader).
// At every PlaceTick, and at once when its machine crashes or pauses,
// the world checks that this replica still leads (its Leader() is
// itself, and no other replica on a live machine leads with a higher
// term); if not, the placement leader is deposed: its placer and both
// drivers stop, and its record writes still in flight may still reach
// the log (they are fenced by their version guards and by the
// migration's driver token); its members write in flight is resent from
// its machine for a while (lingerSend, as a live deposed leader's
// replacement goroutine runs on). A replica that leads then starts the next
// placement leader, which first reads through the placement log (a
// request in the log, answered after everything chosen before it) and
// then resumes the migration the record shows under way (a new driver,
// a new token) and the replacement a members record shows under way.
// The crash fault picks the placement leader's machine one time in
// four (in this mode only), so failovers are frequent.
//
// Its own members (session 44). A member of #placement down longer than
// DeadAfter (the dead fault) is replaced as live (node/placer.go
// decidePlacementGroup, since 45aef5c): the placement leader asks
// shard.DecideGroupReplace (the live machine outside #placement hosting
// the fewest replicas of all groups, never a former member) and carries
// it out with a data group's steps (shards_members.go: mark, join, add,
// remove, record) on the members record mem/#placement in #placement
// itself; a replacement cut short (a deposed leader) is resumed by the
// next leader from that record before any other decision. The leader
// changes its own group's membership through the group's log, a member
// throughout. Decision (the world's, not the node's): the world runs one
// change at a time, so #placement's replacement waits for a data group's
// and the other way round (live they run side by side); it runs beside a
// migration, as live. The majority, one-chain and healed invariants
// (shards_members.go) cover #placement as they cover the data groups.
//
// Invariants (besides the world's):
//
//   - Placement log agreement: every replica of #placement applies the
//     same record write at each position of the placement log (no split
//     brain of the placement service).
//   - Epochs: along the placement log, each slot map written has the
//     epoch of the one before plus one (one map per epoch), and every
//     slot is owned by exactly one group in it (shard.Check).
//   - Driver tokens: along the placement log, the migration record's
//     (ID, Token) never goes back: a deposed placement leader's driver
//     never overwrites its successor's record.
//
// Broken variant place-no-guard: the record writes of the migration
// driver (saves and flips) and the placer's new migration records are
// sent without their version guards (TestShardsSimPlaceGroup shows it
// caught by the token or epoch invariant).
//
// The members records' view (session 47, plmem47; node/replace.go
// writeMembers since plmem46). A members record is rebuilt whole by its
// writer, so the placement leader derives each one it writes (a
// replacement's mark and record steps, shards_members.go) from its own
// view of the record, not from the log's state: the text and KV version
// its machine last read (after a refused write) or wrote, in this term or
// an earlier one as placement leader; a record its machine never read is
// seen as the group's bootstrap members at version 0 (a restarted live
// leader's cluster-file lists). So a new placement leader decides on an
// old members record whenever another machine's leader wrote since (the
// stale view plive45 found live), and a deposed leader's members write,
// still in flight or resent by its machine (lingerSend), may land after
// the successor's writes. Every members write is "guard mem/<group>
// version <the view's version>", set, version, as live; refused, the
// record is read again into the view, the change driver stops and the
// placer decides again (a replacement under way is resumed from the
// record). Decision (the world's): the view is not read again at a
// take-over or before each decision (live reads it before each pass
// since plmem46): the guard alone must keep stale views out of the log,
// and the runs show it does (ShardsStats.MembersRefused counts the
// refused writes).
//
// Invariant "members records": each members write carries the version
// of the record it was derived from (the field base=<v> in its value);
// along the placement log, that base equals the key's version before the
// write: no members write derived from an older view than the record it
// replaces lands (it would drop what the newer one added: a member, a
// former member, a joining node). Broken variant members-no-guard: the
// members writes go without their guard (as the world wrote them before
// session 47) and the view is not read again;
// TestShardsSimCatchesMembersNoGuard shows it caught, with the seed and
// the replay command.

// placeKeySeq numbers the placement log's record writes.
const placeKeySeq = "seq"

type shPlaceGroup struct {
	g     *shGroup
	rng   *rand.Rand
	mach  int    // the machine the placement leader runs on (-1: none)
	term  uint64 // its replica's term when it took over
	gen   uint64 // placement leader generation (its calls carry it)
	ready bool   // it has read through the placement log
	id    uint64 // its request ids' client
	seq   uint64
	calls map[uint64]*shPgCall
	// lingering: deposed leaders' members writes still being resent.
	lingering map[uint64]*shPgCall
	// The placement log's record writes, by position, as first applied,
	// and each record key's KV version there.
	log []string
	ver map[string]int64
	had bool // a placement leader ran before (a new one is a failover)
	// view: the placement leader's view of the members records (key
	// mem/<group>): the text and KV version its machine read after a
	// refused write or wrote itself, in any of its terms as placement
	// leader (views, by machine). Its members writes are derived from it
	// (see "The members records' view" above).
	view  map[string]shMemView
	views map[int]map[string]shMemView
}

// shMemView is one members record as the placement leader last read or
// wrote it ("" and 0: never written).
type shMemView struct {
	text string
	ver  int64
}

type shPgCall struct {
	seq  uint64
	ops  []service.Op
	gen  uint64
	att  int
	done func([]service.Result)
	// The placement leader's request id client and machine; linger: a
	// members write, resent by its machine after a deposition (lingerSend).
	client uint64
	mach   int
	linger bool
}

// lingerSends bounds a deposed placement leader's resends of a members
// write (every 300ms while its machine is up).
const lingerSends = 6

// placeMode: the placement records are the #placement group's.
func (w *shWorld) placeMode() bool { return w.pg != nil }

// placeReady: the placement leader may act (always in register mode).
func (w *shWorld) placeReady() bool {
	return w.pg == nil || w.pg.mach >= 0 && w.pg.ready
}

// newPlaceGroup builds #placement's replicas (booted with the others).
func (w *shWorld) newPlaceGroup() {
	n := w.cfg.PlaceReplicas
	g := &shGroup{idx: len(w.groups), name: "#placement", hint: -1, place: true}
	for i := 0; i < n; i++ {
		m := w.machines[i*len(w.machines)/n]
		g.ids = append(g.ids, m.id)
		r := &shReplica{w: w, g: g, m: m, durable: map[string][]byte{}, taken: map[int]string{}}
		r.rel = release.New(release.Config{Self: m.id, Known: g.known})
		g.reps = append(g.reps, r)
		m.reps = append(m.reps, r)
	}
	g.boot = slices.Clone(g.ids)
	g.ever = slices.Clone(g.ids)
	g.members = slices.Clone(g.ids)
	g.chain = [][]automaton.NodeID{sortedIDs(g.ids)}
	w.pg = &shPlaceGroup{g: g, rng: rand.New(rand.NewSource(w.cfg.Seed ^ 0x706c616365)), mach: -1, calls: map[uint64]*shPgCall{}, lingering: map[uint64]*shPgCall{}, ver: map[string]int64{}, views: map[int]map[string]shMemView{}}
}

// want is the replica count g's placement promises.
func (w *shWorld) want(g *shGroup) int {
	if g.place {
		return w.cfg.PlaceReplicas
	}
	return w.cfg.Replicas
}

// ---- the placement leader ----

// leads: r's replica leads #placement, by its own account, with its term.
func leads(r *shReplica) (uint64, bool) {
	if r.a == nil || !r.m.up || r.m.paused {
		return 0, false
	}
	lr, ok := r.a.(automaton.LeaderReporter)
	if !ok || lr.Leader() != r.m.id {
		return 0, false
	}
	var t uint64
	if tr, ok := r.a.(automaton.TermReporter); ok {
		t = tr.Term()
	}
	return t, true
}

// placeLeaderCheck deposes a placement leader whose replica no longer
// leads (or leads with a lower term than another's), and starts one on a
// replica that leads.
func (w *shWorld) placeLeaderCheck() {
	p := w.pg
	var best *shReplica
	var bestTerm uint64
	for _, r := range p.g.reps {
		if t, ok := leads(r); ok && (best == nil || t > bestTerm) {
			best, bestTerm = r, t
		}
	}
	if p.mach >= 0 {
		r := w.replicaOn(w.machines[p.mach], p.g.idx)
		t, ok := leads(r)
		if ok && t >= bestTerm {
			return
		}
		w.deposePlacement(fmt.Sprintf("its replica on %s no longer leads #placement", w.machines[p.mach].id))
	}
	if best != nil {
		w.takeOverPlacement(best.m, bestTerm)
	}
}

// placeMachineDown: m crashed or paused; a placement leader on it stops.
func (w *shWorld) placeMachineDown(m *shMachine) {
	if w.pg != nil && w.pg.mach == m.idx {
		w.deposePlacement(string(m.id) + " is down")
	}
}

// deposePlacement stops the placement leader with its drivers; its calls
// in flight are dropped (their requests may still reach the log).
func (w *shWorld) deposePlacement(why string) {
	p := w.pg
	w.tracef("placement leader on %s deposed: %s", w.machines[p.mach].id, why)
	for _, c := range p.calls {
		if c.linger {
			p.lingering[c.seq] = c
		}
	}
	for _, seq := range slices.Sorted(maps.Keys(p.lingering)) {
		if c := p.lingering[seq]; c.gen == p.gen && c.att < lingerSends {
			w.lingerSend(c)
		}
	}
	p.mach, p.ready = -1, false
	p.gen++
	clear(p.calls)
	if w.drv != nil {
		w.drv = nil
	}
	w.chg = nil
	if w.placer != nil {
		w.placer.last = ""
		w.placer.beginning, w.placer.creating = false, false
	}
}

// takeOverPlacement starts the placement leader on m: it reads through
// the placement log, then resumes what the records show under way.
func (w *shWorld) takeOverPlacement(m *shMachine, term uint64) {
	p := w.pg
	p.mach, p.term, p.ready = m.idx, term, false
	p.gen++
	for p.id == 0 || w.byID[p.id] != nil {
		p.id = p.rng.Uint64()
	}
	w.stats.PlaceLeaders++
	if p.had {
		w.stats.PlaceFailovers++
	}
	p.had = true
	w.tracef("placement leader starts on %s (term %d): reading the placement log", m.id, term)
	if p.views[m.idx] == nil {
		p.views[m.idx] = map[string]shMemView{}
	}
	p.view = p.views[m.idx] // its machine's, possibly old: see "The members records' view"
	w.pgCall([]service.Op{{Kind: "get", Key: placeKeySeq}}, func([]service.Result) {
		p.ready = true
		w.tracef("placement leader on %s ready", m.id)
		w.retireRemoved()
		if w.mig.active && w.drv == nil {
			w.stats.PlaceResumed++
			w.newDriver()
		}
		for _, g := range w.allGroups() {
			if g.joining != "" && w.chg == nil {
				w.stats.PlaceResumed++
				w.resumeChange()
			}
		}
	})
}

// placeResume: at every tick, a ready placement leader drives the
// migration its log shows under way and resumes the replacement a members
// record shows under way, when nothing of its own does (a deposed
// leader's record write may land after its successor read the log).
func (w *shWorld) placeResume() {
	if !w.placeReady() || w.placer != nil && w.placer.beginning {
		return
	}
	if w.mig.active && w.drv == nil {
		w.newDriver()
	}
	if w.chg == nil {
		w.retireRemoved()
		w.resumeChange()
	}
}

// retireRemoved stops the replicas of members a members record in the
// log no longer names (and that are not joining): a replacement whose
// record was written but whose removed member's replica was not stopped,
// because the leader was deposed or the change driver died while the
// record's write was in flight (it lands without its callback). Live, the
// removed node stops its replica itself when it reads the record
// (node/groups.go retireGroups). Session 44: before, only a new placement
// leader did this, at its take-over, and a write landing after its read
// left the replica running (the healed check caught it: seed 6 of
// --machines 5, a replica balance move whose driver died).
func (w *shWorld) retireRemoved() {
	for _, g := range w.allGroups() {
		for _, id := range slices.Clone(g.ids) {
			if !slices.Contains(g.members, id) && id != g.joining {
				w.dropReplica(g, id)
			}
		}
	}
}

// ---- record writes through the placement log ----

// pgCall runs ops as one atomic group in the placement log, sent by the
// placement leader to its own replica (which forwards when it does not
// lead) under one request id until answered; done gets the results,
// unless the placement leader was deposed meanwhile.
func (w *shWorld) pgCall(ops []service.Op, done func([]service.Result)) *shPgCall {
	p := w.pg
	p.seq++
	c := &shPgCall{seq: p.seq, ops: ops, gen: p.gen, done: done, client: p.id, mach: p.mach}
	p.calls[c.seq] = c
	w.pgSend(c)
	return c
}

// lingerSend resends c, a members write of a deposed placement leader,
// from its machine's replica of #placement under its id (as live: the
// deposed leader's replacement goroutine runs on, its writes go through
// its node's replica, which forwards them to the new leader). Its answer
// goes nowhere; the write lands or its guard refuses it.
func (w *shWorld) lingerSend(c *shPgCall) {
	p := w.pg
	c.att++
	if c.att > lingerSends || c.mach < 0 {
		delete(p.lingering, c.seq)
		return
	}
	if r := w.replicaOn(w.machines[c.mach], p.g.idx); r != nil && r.m.up {
		w.tracef("placement: a deposed leader's members write resent by %s (%d)", r.m.id, c.att)
		req := automaton.Request{ID: automaton.RequestID{Client: c.client, Seq: c.seq}, Ops: c.ops}
		w.after(0, &shEvent{kind: shClientReq, mach: r.m.idx, group: p.g.idx, inc: r.m.inc, client: -1, req: req, fwd: -1})
	}
	w.after(300*time.Millisecond, &shEvent{kind: shPlaceCallTimeout, gen: c.gen, attempt: c.att, cseq: c.seq})
}

func (w *shWorld) pgSend(c *shPgCall) {
	p := w.pg
	if p.gen != c.gen || p.calls[c.seq] != c {
		return
	}
	c.att++
	if p.mach >= 0 {
		if r := w.replicaOn(w.machines[p.mach], p.g.idx); r != nil && r.m.up {
			req := automaton.Request{ID: automaton.RequestID{Client: p.id, Seq: c.seq}, Ops: c.ops}
			w.after(0, &shEvent{kind: shClientReq, mach: r.m.idx, group: p.g.idx, inc: r.m.inc, client: -1, req: req, fwd: -1})
		}
	}
	w.after(300*time.Millisecond, &shEvent{kind: shPlaceCallTimeout, gen: c.gen, attempt: c.att, cseq: c.seq})
}

// onPlaceCall: an answer to a placement call, or a timeout.
func (w *shWorld) onPlaceCall(e *shEvent) {
	p := w.pg
	if e.kind == shPlaceCallTimeout {
		if c := p.lingering[e.cseq]; c != nil && c.gen == e.gen && c.att == e.attempt {
			w.lingerSend(c)
			return
		}
		if c := p.calls[e.cseq]; c != nil && c.gen == e.gen && c.att == e.attempt {
			w.pgSend(c)
		}
		return
	}
	c := p.calls[e.resp.ID.Seq]
	if c == nil || e.resp.ID.Client != p.id {
		return
	}
	if res := e.resp.Result; res.IsErr() && res.AsError().Kind != synoderr.TryAgain {
		w.fail("placement call %d refused: %s", c.seq, res.Err)
		return
	}
	if e.resp.Result.IsErr() || len(e.resp.Results) < len(c.ops) {
		// No leader yet, or not a member: again, same id.
		c.att++
		w.after(20*time.Millisecond, &shEvent{kind: shPlaceCallTimeout, gen: c.gen, attempt: c.att, cseq: c.seq})
		return
	}
	delete(p.calls, c.seq)
	w.stats.PlaceWrites++
	c.done(e.resp.Results)
}

// recordOps is the atomic group writing value to record key: behind a
// version guard unless guard is false, then the set, the new version
// and the log position.
func (w *shWorld) recordOps(key, value string, guard bool) []service.Op {
	var ops []service.Op
	if guard {
		ops = append(ops, kvOpOf(service.GuardKind, key, "version", fmt.Sprint(w.pg.ver[key])))
	}
	return append(ops, kvOpOf("set", key, value), kvOpOf("version", key), kvOpOf("incr", placeKeySeq, "1"))
}

func kvOpOf(kind, key string, args ...string) service.Op {
	op := service.Op{Kind: kind, Key: key}
	for _, a := range args {
		op.Args = append(op.Args, []byte(a))
	}
	return op
}

// guarded: the world's writers put their version guards on (not the
// broken place-no-guard).
func (w *shWorld) guarded() bool { return w.cfg.Broken != "place-no-guard" }

// ---- the members record ----

func encodeMembers(g *shGroup, members []automaton.NodeID, joining, leaving automaton.NodeID, former []string) string {
	return fmt.Sprintf("members=%s;joining=%s;leaving=%s;former=%s", joinIDs(members), joining, leaving, strings.Join(former, " "))
}

func (w *shWorld) applyMembers(g *shGroup, v string) {
	r, boot := parseMemRec(v)
	g.members, g.joining, g.leaving, g.former = r.members, r.joining, r.leaving, r.former
	if len(g.boot) == 0 && len(boot) > 0 {
		w.found(g, boot)
	}
}

// parseMemRec parses a members record's text (encodeMembers; a created
// group's also names its bootstrap members, boot).
func parseMemRec(text string) (r shMemRec, boot []automaton.NodeID) {
	ids := func(x string) []automaton.NodeID {
		var out []automaton.NodeID
		for _, id := range strings.Fields(x) {
			out = append(out, automaton.NodeID(id))
		}
		return out
	}
	for _, f := range strings.Split(text, ";") {
		k, x, _ := strings.Cut(f, "=")
		switch k {
		case "members":
			r.members = ids(x)
		case "joining":
			r.joining = automaton.NodeID(x)
		case "leaving":
			r.leaving = automaton.NodeID(x)
		case "former":
			r.former = strings.Fields(x)
		case "boot":
			boot = ids(x)
		}
	}
	return r, boot
}

// shMemRec is a members record's fields, and the KV version of the
// record they were read from.
type shMemRec struct {
	members          []automaton.NodeID
	joining, leaving automaton.NodeID
	former           []string
	ver              int64
}

// memView returns g's members record as the placement leader sees it
// (in register mode, the world's: there is one writer and no log).
func (w *shWorld) memView(g *shGroup) shMemRec {
	if !w.placeMode() {
		return shMemRec{members: slices.Clone(g.members), joining: g.joining, leaving: g.leaving, former: slices.Clone(g.former)}
	}
	key := "mem/" + g.name
	v := w.pg.view[key]
	if v.text == "" {
		// Never read here: the group's bootstrap members (the cluster
		// file's, or a created group's founders), version 0.
		return shMemRec{members: slices.Clone(g.boot)}
	}
	r, _ := parseMemRec(v.text)
	r.ver = v.ver
	return r
}

// noteMemView puts a read of g's members record (get, version) in the
// placement leader's view.
func (w *shWorld) noteMemView(g *shGroup, get, ver service.Result) {
	w.pg.view["mem/"+g.name] = shMemView{text: string(get.Bytes), ver: ver.Int}
}

// membersGuarded: members writes carry their version guard (not the
// broken members-no-guard).
func (w *shWorld) membersGuarded() bool { return w.cfg.Broken != "members-no-guard" }

// writeMembers writes g's members record, derived from base (memView), in
// register mode at once, then calls then. In placement mode the write is
// guarded by base's version; refused, the placement leader reads the
// record again and its change driver stops (the placer decides again),
// and then is not called.
func (w *shWorld) writeMembers(g *shGroup, base shMemRec, members []automaton.NodeID, joining, leaving automaton.NodeID, former []string, then func()) {
	if !w.placeMode() {
		g.members, g.joining, g.leaving, g.former = members, joining, leaving, former
		then()
		return
	}
	key := "mem/" + g.name
	text := encodeMembers(g, members, joining, leaving, former) + fmt.Sprintf(";base=%d", base.ver)
	ops := w.recordOps(key, text, false)
	if w.membersGuarded() {
		ops = append([]service.Op{kvOpOf(service.GuardKind, key, "version", fmt.Sprint(base.ver))}, ops...)
	}
	gen := w.pg.gen
	c := w.pgCall(ops, func(rs []service.Result) {
		if w.pg.gen != gen {
			return
		}
		if w.membersGuarded() && service.IsGuardFailure(rs[0]) {
			w.stats.MembersRefused++
			w.tracef("placement: the members record of %s changed since version %d: read again, decide again", g.name, base.ver)
			w.chg = nil
			if w.placer != nil {
				w.placer.last = ""
			}
			w.pgCall([]service.Op{kvOpOf("get", key), kvOpOf("version", key)}, func(rs []service.Result) {
				if w.pg.gen == gen {
					w.noteMemView(g, rs[0], rs[1])
				}
			})
			return
		}
		w.pg.view[key] = shMemView{text: text, ver: rs[len(rs)-2].Int}
		then()
	})
	c.linger = true
}

// ---- the placement replicas' service: the world's window on the log ----

// pgService is KV as a replica of #placement applies it: every numbered
// record write is checked against the placement log and, the first time
// a replica applies it, taken as the placement state.
type pgService struct{ r *shReplica }

func (s pgService) Name() string                 { return ServiceName }
func (s pgService) Validate(op service.Op) error { return s.r.w.kv.Validate(op) }
func (s pgService) IsRead(op service.Op) bool    { return s.r.w.kv.IsRead(op) }
func (s pgService) NewState() service.State      { return &pgState{st: s.r.w.kv.NewState(), r: s.r} }
func (s pgService) Nondeterministic() bool       { return false }

type pgState struct {
	st  service.State
	r   *shReplica
	ops []string // the record write being applied: its sets and versions
}

func (s *pgState) Snapshot() []byte                   { return s.st.Snapshot() }
func (s *pgState) Restore(b []byte) error             { return s.st.Restore(b) }
func (s *pgState) Apply(op service.Op) service.Result { return s.ApplyEnv(op, service.Env{}) }

func (s *pgState) ApplyEnv(op service.Op, env service.Env) service.Result {
	res := service.ApplyEnv(s.st, op, env)
	switch {
	case op.Kind == "set":
		s.ops = append(s.ops, "set\x00"+op.Key+"\x00"+string(op.Args[0]))
	case op.Kind == "version" && res.Type == service.ResultInt && len(s.ops) > 0 && strings.HasPrefix(s.ops[len(s.ops)-1], "set\x00"+op.Key+"\x00"):
		// A write's new version (a read's, the take-over's, is no write).
		s.ops = append(s.ops, fmt.Sprintf("version\x00%s\x00%d", op.Key, res.Int))
	case op.Kind == "incr" && op.Key == placeKeySeq && res.Type == service.ResultInt:
		ops := s.ops
		s.ops = nil
		s.r.w.onPlaceWrite(s.r, res.Int, ops)
	}
	return res
}

// onPlaceWrite: replica r applied the record write at position n of the
// placement log.
func (w *shWorld) onPlaceWrite(r *shReplica, n int64, ops []string) {
	p := w.pg
	text := strings.Join(ops, "\x01")
	switch {
	case n <= int64(len(p.log)):
		if p.log[n-1] != text {
			w.violation("placement log agreement: the replica of #placement on %s applied %q at position %d, where another applied %q", r.m.id, shortRecord(text), n, shortRecord(p.log[n-1]))
		}
		return
	case n > int64(len(p.log))+1:
		w.fail("the replica of #placement on %s applied position %d of the placement log before position %d was applied anywhere", r.m.id, n, len(p.log)+1)
		return
	}
	p.log = append(p.log, text)
	for _, o := range ops {
		f := strings.SplitN(o, "\x00", 3)
		if f[0] == "version" {
			var v int64
			fmt.Sscan(f[2], &v)
			p.ver[f[1]] = v
			continue
		}
		w.takeRecord(f[1], f[2])
	}
}

func shortRecord(s string) string {
	s = strings.NewReplacer("\x00", " ", "\x01", "; ").Replace(s)
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

// takeRecord makes a record chosen in the placement log the world's
// placement state, checking the epoch and token invariants.
func (w *shWorld) takeRecord(key, value string) {
	switch {
	case key == "map":
		q, err := shard.ParsePlacement(value, len(w.groups))
		if err != nil {
			w.fail("placement log: slot map: %v", err)
			return
		}
		if q.Epoch != w.place.Epoch+1 {
			w.violation("epochs: the placement log holds slot map epoch %d after epoch %d (each map is its predecessor's epoch plus one)", q.Epoch, w.place.Epoch)
		}
		w.place = q
		w.placeMap = shard.Build(w.place.Groups)
		w.stats.Flips++
		w.tracef("slot map epoch %d (placement log)", w.place.Epoch)
		if err := w.checkMap(); err != "" {
			w.violation("%s", err)
		}
	case key == "mig":
		rec, err := shard.ParseMigration(value)
		if err != nil {
			w.fail("placement log: migration record: %v", err)
			return
		}
		old := w.mig.rec
		if w.mig.ver > 0 && (rec.ID < old.ID || rec.ID == old.ID && rec.Token < old.Token) {
			w.violation("driver tokens: the placement log holds migration %d token %d after migration %d token %d (a deposed driver's record overwrote its successor's)", rec.ID, rec.Token, old.ID, old.Token)
		}
		was := w.mig.active
		w.mig.rec = rec
		w.mig.ver++
		w.mig.active = !rec.Phase.Finished()
		switch {
		case !was && w.mig.active:
			w.migSpans = append(w.migSpans, [2]time.Duration{w.now, -1})
		case was && !w.mig.active:
			w.migSpans[len(w.migSpans)-1][1] = w.now
			w.stats.Migrations++
			w.migsLeft--
			w.tracef("migration %d %s (placement log)", rec.ID, rec.Phase)
		}
	case strings.HasPrefix(key, "mem/"):
		if i := strings.LastIndex(value, ";base="); i >= 0 {
			var base int64
			fmt.Sscan(value[i+len(";base="):], &base)
			if cur := w.pg.ver[key]; base != cur {
				w.violation("members records: the placement log holds a write of %s derived from version %d over version %d (a members write from a stale view)", key, base, cur)
			}
		}
		for _, g := range w.allGroups() {
			if "mem/"+g.name == key {
				w.applyMembers(g, value)
			}
		}
	}
}

// ---- the drivers' record writes (shards_driver.go) ----

// beginLogged writes a new migration record through the placement log
// (behind the version of the record the placer read), then starts its
// driver.
func (w *shWorld) beginLogged(rec shard.Migration) {
	if p := w.placer; p != nil {
		p.beginning = true
	}
	rec.ID = w.mig.rec.ID + 1
	if prev := w.mig.rec; prev.ID > 0 {
		rec.Token = prev.Token
	}
	gen := w.pg.gen
	w.tracef("migration %d: %s -> %s slots %s (writing its record)", rec.ID, rec.FromName, rec.ToName, shard.FormatSlots(rec.Slots))
	w.pgCall(w.recordOps("mig", rec.Encode(), w.guarded()), func(rs []service.Result) {
		if w.placer != nil {
			w.placer.beginning = false
		}
		if w.pg.gen != gen {
			return
		}
		if w.guarded() && service.IsGuardFailure(rs[0]) {
			w.tracef("migration record changed meanwhile: decide again")
			if w.placer != nil {
				w.placer.last = ""
			}
			return
		}
		if w.mig.active && w.drv == nil {
			w.newDriver()
		}
	})
}

// driverSave saves d's record through the placement log, behind the
// version d saved or read last.
func (w *shWorld) driverSave(d *shDriver, rec shard.Migration) {
	d.wait, d.tries = true, 0 // no timeout or answer of a group request matches now
	d.seq++
	ops := w.recordOps("mig", rec.Encode(), w.guarded())
	if w.guarded() {
		ops[0] = kvOpOf(service.GuardKind, "mig", "version", fmt.Sprint(d.ver))
	}
	w.pgCall(ops, func(rs []service.Result) {
		if w.drv != d {
			return
		}
		d.wait = false
		if w.guarded() && service.IsGuardFailure(rs[0]) {
			d.out.Err = "the migration record changed (another driver)"
		} else {
			d.ver = uint64(rs[len(rs)-2].Int)
		}
		w.after(time.Millisecond, &shEvent{kind: shDriverEv, gen: d.gen})
	})
}

// driverFlip records the flip in the placement log (node/migrate.go flip):
// the slot map with the slots moved, at the next epoch, behind the
// version of the map read (nothing when the slots are there already).
func (w *shWorld) driverFlip(d *shDriver, a shard.Action) {
	if w.place.Owns(a.Group, a.Slots) {
		w.after(time.Millisecond, &shEvent{kind: shDriverEv, gen: d.gen})
		return
	}
	d.wait, d.tries = true, 0
	d.seq++
	q := w.place.Move(a.Slots, a.Group)
	w.pgCall(w.recordOps("map", q.Encode(), w.guarded()), func(rs []service.Result) {
		if w.drv != d {
			return
		}
		d.wait = false
		if w.guarded() && service.IsGuardFailure(rs[0]) {
			d.out.Err = "the slot map changed meanwhile"
		}
		w.after(time.Millisecond, &shEvent{kind: shDriverEv, gen: d.gen})
	})
}
