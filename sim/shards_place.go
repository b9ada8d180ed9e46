package sim

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
)

// The placement leader of the sharded world (ShardsConfig.Plan "decide",
// the default): every PlaceTick it gathers what node/placer.go gathers on
// the placement leader and asks shard.Decide, the placement policy, what
// to do; a split or a merge starts a migration (the real shard.Machine,
// shards_driver.go). The inputs, as the node computes them:
//
//   - Ops: client requests each group's replicas received (every replica,
//     as the node's per-node load counters sum), as a rate over the tick,
//     smoothed by placeSmooth (node/placer.go's 0.5).
//   - Keys and Bytes: the answer of a "slotstats" request sent through the
//     group's log (the node's groupDo of slotstats) every fifth tick, and
//     every tick around a migration, as the node does; until one is
//     answered the group's figures are not Known and no decision uses
//     them. A group near a size threshold (shard.SizeNear, by its last
//     answer; a plain answer that finds it near is asked again at once)
//     is asked "slotstats slots", and Decide cuts a split by size where
//     its keys (or bytes) halve (PlaceInput.SlotKeys, SlotBytes:
//     shard.SlotSizeWeights over the current map), as node/slotsize.go
//     does since split47 (session 48; before, the simulator's split by
//     size cut at the median slot).
//   - ColdFor: how long a group has been cold (shard.Cold) without a
//     break; SinceMove: time since the last split or merge ended;
//     Migrating: a migration's record is active; a machine down is a node
//     down for as long.
//
// Replacements, leader moves and replica balance are carried out by
// shards_members.go (protocols with membership changes; counted only for
// the others). The thresholds (ShardsConfig.Place, SimPlaceParams by
// default) are scaled to the simulated load; DeadAfter (1.2s) is longer
// than any crash's downtime (at most 1s) and shorter than the dead
// fault's (2.5–4s), so replacements are decided for dead machines only.
//
// The workload moves its load (ShardsConfig.Hot): a fraction of the
// operations go to HotKeys keys that change every HotPhase, so a group
// turns hot (a split), then cold (a merge) as the hot spot moves on.

// PlaceTick is how often the simulated placement leader decides (the
// node's tick is a second; the simulated runs are seconds long).
const PlaceTick = 100 * time.Millisecond

// sizeEvery: ticks between two size reads outside migrations.
const sizeEvery = 5

// SimPlaceParams are the sharded world's placement thresholds, by load: a
// group serving more than 90 requests/s (the hot spot's share at the
// test's load) splits; two groups both under 35 requests/s for 0.5 s
// merge; 0.3 s cool-down; a machine down for 1.2 s is dead. Size thresholds are off by default (a few dozen
// keys); ShardsConfig.Place sets them (the size test splits by keys).
var SimPlaceParams = shard.PlaceParams{
	SplitKeys: 1 << 40, SplitBytes: 1 << 40, SplitOps: 90,
	MergeKeys: 1 << 40, MergeBytes: 1 << 40, MergeOps: 35,
	MinShards: 1, MergeDelay: 0.5, DeadAfter: 1.2, Cooldown: 0.3,
}

type shPlacer struct {
	params shard.PlaceParams
	reqs   []uint64 // client requests each group's replicas received
	prev   []uint64
	ops    []float64
	keys   []int64
	bytes  []int64
	known  []bool
	coldAt []time.Duration // -1: not cold
	moveAt time.Duration   // -1: no move yet
	wasMig bool
	id     uint64
	seq    uint64
	asked  map[uint64]int // slotstats request seq -> group
	// slots: each group's last per-slot answer (nil: read plainly).
	slots [][]shard.SlotSize
	// Decisions by kind; carried: splits and merges started.
	decisions map[string]int
	carried   int
	refused   int
	ticks     int
	last      string
	// beginning: a new migration's record is being written through the
	// placement log (shards_placegroup.go): no decision meanwhile;
	// creating: a new group's members record likewise (createGroup).
	beginning, creating bool
	// slotOps: client requests per slot, halved every tick (the per-slot
	// load Decide cuts a split by, with CutByLoad).
	slotOps []float64
	slotNew []float64
	// early: the broken split-publish-early's migration, started after
	// the cool-down that follows the map naming the new owner.
	early func()
}

func (w *shWorld) newPlacer() {
	p := &shPlacer{params: w.cfg.Place, moveAt: -1, asked: map[uint64]int{}, decisions: map[string]int{}}
	n := len(w.groups)
	p.reqs, p.prev, p.ops = make([]uint64, n), make([]uint64, n), make([]float64, n)
	p.keys, p.bytes, p.known = make([]int64, n), make([]int64, n), make([]bool, n)
	p.slots = make([][]shard.SlotSize, n)
	p.coldAt = make([]time.Duration, n)
	p.slotOps, p.slotNew = make([]float64, shard.Slots), make([]float64, shard.Slots)
	for i := range p.coldAt {
		p.coldAt[i] = -1
	}
	for p.id == 0 || w.byID[p.id] != nil {
		p.id = w.rngDrv.Uint64()
	}
	w.placer = p
	w.after(PlaceTick, &shEvent{kind: shPlaceTick})
}

// countRequest notes a client request reaching a replica of group g, and
// its slot (the first key its operations name).
func (w *shWorld) countRequest(g int, req automaton.Request) {
	if w.placer == nil {
		return
	}
	w.placer.reqs[g]++
	ops := req.Ops
	if len(ops) == 0 {
		ops = []service.Op{req.Op}
	}
	for _, op := range ops {
		if op.Key != "" && !shard.Reserved(op.Key) && op.Kind != service.GuardKind {
			w.placer.slotNew[shard.KeySlot(op.Key)]++
			return
		}
	}
}

func (w *shWorld) onPlaceTick() {
	p := w.placer
	if w.placeMode() {
		// The placement leader is #placement's leader; it keeps being
		// checked (and replaced) through the drain, where it resumes
		// what was cut short.
		if !w.finished {
			w.after(PlaceTick, &shEvent{kind: shPlaceTick})
		}
		w.placeLeaderCheck()
		w.placeResume()
		if w.stopping {
			return
		}
	} else {
		if w.stopping {
			return
		}
		w.after(PlaceTick, &shEvent{kind: shPlaceTick})
	}
	const smooth = 0.5 // node/placer.go placeSmooth
	for g := range p.ops {
		rate := float64(p.reqs[g]-p.prev[g]) / PlaceTick.Seconds()
		p.ops[g] = smooth*rate + (1-smooth)*p.ops[g]
		p.prev[g] = p.reqs[g]
	}
	for s := range p.slotOps {
		p.slotOps[s] = smooth*p.slotNew[s] + (1-smooth)*p.slotOps[s]
		p.slotNew[s] = 0
	}
	mig := w.mig.active
	// Sizes: one slotstats through each group's log, answered by the
	// next ticks: every sizeEvery ticks, and every tick around a
	// migration (node/placer.go's placeSizeEvery rule).
	if p.ticks++; p.ticks%sizeEvery == 1 || mig || p.wasMig {
		for g := range w.groups {
			w.placerAsk(g)
		}
	}
	in := shard.PlaceInput{Map: w.place, Migrating: mig, SinceMove: -1, Replicas: w.cfg.Replicas}
	if w.cfg.CutByLoad {
		in.SlotOps = p.slotOps
	}
	for _, sz := range p.slots {
		if sz != nil { // a group read per slot: weigh each slot for its owner now
			in.SlotKeys, in.SlotBytes = shard.SlotSizeWeights(p.slots, &shard.Build(w.place.Groups).Owner)
			break
		}
	}
	for _, m := range w.machines {
		nr := shard.NodeReport{ID: string(m.id)}
		if !m.up {
			nr.DownFor = (w.now - m.downAt).Seconds()
		}
		in.Nodes = append(in.Nodes, nr)
	}
	for gi, g := range w.groups {
		gr := shard.GroupReport{Name: g.name, Ops: p.ops[gi], Keys: p.keys[gi], Bytes: p.bytes[gi], Known: p.known[gi], Former: g.former}
		if w.cfg.Incarnations && g.born {
			gr.Created, gr.Inc = true, g.incarn // shards_inc.go
			gr.Name = g.incName()
		}
		for _, id := range g.members {
			gr.Members = append(gr.Members, string(id))
		}
		if g.hint >= 0 {
			gr.Leader = string(g.ids[g.hint])
		}
		if gr.Known && shard.Cold(gr, p.params) && !mig {
			if p.coldAt[gi] < 0 {
				p.coldAt[gi] = w.now
			}
			gr.ColdFor = (w.now - p.coldAt[gi]).Seconds()
		} else {
			p.coldAt[gi] = -1
		}
		in.Groups = append(in.Groups, gr)
	}
	if p.wasMig && !mig {
		p.moveAt = w.now
	}
	p.wasMig = mig
	if p.moveAt >= 0 {
		in.SinceMove = (w.now - p.moveAt).Seconds()
	}
	if f := p.early; f != nil && w.placeReady() && !p.creating && (w.now-p.moveAt).Seconds() >= p.params.Cooldown {
		p.early = nil
		f()
		return
	}
	if w.chg != nil || !w.placeReady() || p.beginning || p.creating {
		return // one change at a time, and no other decision meanwhile (node/placer.go)
	}
	for _, g := range w.allGroups() {
		if g.joining != "" {
			// A replacement cut short (its driver died) is resumed from
			// the members record before any new decision, as the node's
			// resumeReplace does: deciding anew could pick another node
			// while the first one's add is still in flight.
			w.resumeChange()
			return
		}
	}
	if d, ok := w.decidePlaceGroup(in, p.params); ok {
		// #placement's own dead member first (node/placer.go
		// decidePlacementGroup): the service the others rely on.
		id := fmt.Sprintf("%v placement %s %s", d.Kind, d.Node, d.With)
		if id != p.last {
			p.last = id
			p.decisions["placement-"+d.Kind.String()]++
			w.tracef("placement group decision: %s", d)
			p.carried++
			w.startChange(d)
		}
		return
	}
	d := shard.Decide(in, p.params)
	if d.Kind == shard.DecNone {
		return
	}
	id := fmt.Sprintf("%v %d %d %s %s %s", d.Kind, d.From, d.To, shard.FormatSlots(d.Slots), d.Node, d.With)
	if id == p.last {
		return // the same advice again: logged once, as the node does
	}
	p.last = id
	p.decisions[d.Kind.String()]++
	w.tracef("placement decision: %s", d)
	if d.Kind == shard.DecRetire {
		p.carried++
		w.retireGroup(w.groups[d.From], d.Inc) // shards_inc.go
		return
	}
	if (d.Kind == shard.DecSplit || d.Kind == shard.DecMerge) && w.migsLeft > 0 && w.drv == nil && !w.mig.active {
		slots := d.Slots
		if w.cfg.Broken == "placer-overreach" {
			slots = overreach(slots)
		}
		// The decision invariant: a split or merge moves only slots its
		// source owns in the current map. The node refuses such a start
		// (node/migrate.go startMigration) and logs the refusal; here it
		// is a violation, and refused as the node refuses it.
		if !w.place.Owns(d.From, slots) {
			w.violation("placement decision %s: group %s does not own every slot of %s (epoch %d)", d.Kind, w.groups[d.From].name, shard.FormatSlots(slots), w.place.Epoch)
			p.refused++
			p.last = ""
			return
		}
		p.carried++
		if d.Kind == shard.DecSplit {
			w.stats.Splits++
		} else {
			w.stats.Merges++
		}
		p.moveAt = w.now
		if len(d.Create) > 0 {
			w.createGroup(d, slots)
			return
		}
		if d.Kind == shard.DecSplit && w.groups[d.To].born {
			w.stats.Reused++ // a created group, emptied by a merge (or never migrated into): a spare
		}
		w.beginMigration(d.From, d.To, slots)
	}
	if (d.Kind == shard.DecReplace || d.Kind == shard.DecBalance || d.Kind == shard.DecLeader) && w.membersOn() && w.drv == nil && !w.mig.active {
		p.carried++
		w.startChange(d)
	}
}

// overreach is the broken placer's off-by-one: the decided slots run one
// slot past their last range, into whatever group owns the next slot
// (shard's own brokenSplitCut, here in the world's placer).
func overreach(rs []shard.Range) []shard.Range {
	out := append([]shard.Range(nil), rs...)
	if k := len(out) - 1; k >= 0 && out[k].Last < shard.Slots-1 {
		out[k].Last++
	}
	return out
}

// placerAsk sends a slotstats request through group g's log, to the
// replica the group last named its leader, else a random live one.
func (w *shWorld) placerAsk(g int) {
	p := w.placer
	gr := w.groups[g]
	var live []*shReplica
	for _, r := range gr.reps {
		if r.m.up {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	r := live[w.rngDrv.Intn(len(live))]
	if h := gr.hint; h >= 0 && gr.reps[h].m.up {
		r = gr.reps[h]
	}
	p.seq++
	p.asked[p.seq] = g
	op := service.Op{Kind: "slotstats"}
	if shard.SizeNear(p.keys[g], p.bytes[g], p.params) {
		op.Args = [][]byte{[]byte("slots")}
	}
	req := automaton.Request{ID: automaton.RequestID{Client: p.id, Seq: p.seq}, Ops: []service.Op{op}}
	w.after(w.clientLat.Sample(w.rngNet), &shEvent{kind: shClientReq, mach: r.m.idx, group: g, inc: r.m.inc, client: -1, req: req, fwd: -1})
}

// placerAnswer takes a slotstats answer: keys and bytes, and per slot
// when asked so; a plain answer that finds the group near a split by size
// is asked again per slot (node/slotsize.go readSize).
func (w *shWorld) placerAnswer(resp automaton.Response) {
	p := w.placer
	g, ok := p.asked[resp.ID.Seq]
	if !ok {
		return
	}
	delete(p.asked, resp.ID.Seq)
	rs := resp.Results
	if len(rs) == 0 && !resp.Result.IsErr() {
		rs = []service.Result{resp.Result}
	}
	if len(rs) != 1 || len(rs[0].Elems) < 2 {
		return
	}
	p.keys[g], p.bytes[g], p.known[g] = rs[0].Elems[0].Int, rs[0].Elems[1].Int, true
	p.slots[g] = nil
	if len(rs[0].Elems) == 3 {
		p.slots[g] = shard.ParseSlotSizes(string(rs[0].Elems[2].Bytes))
	} else if shard.SizeNear(p.keys[g], p.bytes[g], p.params) {
		w.placerAsk(g)
	}
}

// ParsePlaceParams reads Decide's thresholds for the sharded world: a
// comma list of split_ops=, merge_ops=, split_keys=, merge_keys=,
// merge_delay=, cooldown=, dead_after=, balance_ops=, balance_margin=
// over SimPlaceParams.
func ParsePlaceParams(s string) (shard.PlaceParams, error) {
	p := SimPlaceParams
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil {
			return p, fmt.Errorf("--place %q: want name=number, not %q", s, kv)
		}
		switch k {
		case "split_ops":
			p.SplitOps = f
		case "merge_ops":
			p.MergeOps = f
		case "split_keys":
			p.SplitKeys = int64(f)
		case "merge_keys":
			p.MergeKeys = int64(f)
		case "merge_delay":
			p.MergeDelay = f
		case "cooldown":
			p.Cooldown = f
		case "dead_after":
			p.DeadAfter = f
		case "balance_ops":
			p.BalanceOps = f
		case "balance_margin":
			p.BalanceMargin = f
		default:
			return p, fmt.Errorf("--place %q: unknown threshold %q", s, k)
		}
	}
	return p, nil
}

// summary is the decisions a run's placer made, by kind, and how
// many splits and merges it carried out.
func (p *shPlacer) summary() string {
	if p == nil {
		return ""
	}
	var ks []string
	for k := range p.decisions {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	for _, k := range ks {
		fmt.Fprintf(&b, "%s=%d ", k, p.decisions[k])
	}
	fmt.Fprintf(&b, "carried=%d", p.carried)
	if p.refused > 0 {
		fmt.Fprintf(&b, " refused=%d", p.refused)
	}
	return b.String()
}

// decidePlaceGroup is the placement leader's decision on its own group's
// members (placement mode, a protocol with membership changes):
// shard.DecideGroupReplace, as node/placer.go decidePlacementGroup asks
// it, over #placement's members record and every data group's members.
// It is carried out like a data group's replacement (shards_members.go),
// on the members record mem/#placement in #placement itself: the leader
// adds the new member to its own group and removes the dead one through
// the group's log, a member throughout. Unlike the node, where the
// placement group's replacements run beside the data groups' decisions,
// the world runs one change at a time (w.chg); it runs beside a
// migration, as on the node.
func (w *shWorld) decidePlaceGroup(in shard.PlaceInput, params shard.PlaceParams) (shard.Decision, bool) {
	if !w.placeMode() || !w.membersOn() {
		return shard.Decision{}, false
	}
	pg := w.pg.g
	g := shard.GroupReport{Name: pg.name, Former: pg.former}
	for _, id := range pg.members {
		g.Members = append(g.Members, string(id))
	}
	var others []shard.GroupReport
	for _, og := range w.groups {
		var o shard.GroupReport
		for _, id := range og.members {
			o.Members = append(o.Members, string(id))
		}
		others = append(others, o)
	}
	d, ok := shard.DecideGroupReplace(g, others, in.Nodes, params)
	if !ok || d.Kind != shard.DecReplace {
		return shard.Decision{}, false
	}
	d.From, d.To = pg.idx, pg.idx
	return d, true
}

// ---- splits into new groups ----

// createGroup carries out a split into a new group (session 45;
// shard.Decide names the group, an unplaced NewGroups name, and its
// machines): the members record names the machines as the group's
// members and its bootstrap configuration (written through the placement
// log in placement mode, as node/placer.go writes mem/<ns>); the world
// starts the group's replicas when the record is in the log (found: the
// machines read it, as a node starts a group at its placement poll); then
// the slots migrate into it like any split's. A placement leader deposed
// (or a change driver dead) between the two leaves a group with members
// and no slots: a spare, which the next split takes. Nothing is published
// in the slot map before the migration's own flip, after its fence
// (the source's freeze); the broken variant split-publish-early
// publishes the new owner first.
func (w *shWorld) createGroup(d shard.Decision, slots []shard.Range) {
	p := w.placer
	g := w.groups[d.To]
	var ids []automaton.NodeID
	for _, id := range d.Create {
		ids = append(ids, automaton.NodeID(id))
	}
	p.creating = true
	gen := w.pgGen()
	w.tracef("placement: creating group %s on %s", g.name, joinIDs(ids))
	then := func() {
		p.creating = false
		if w.pgGen() != gen || w.drv != nil || w.mig.active || w.migsLeft <= 0 || !w.place.Owns(d.From, slots) {
			return // the group stays a spare
		}
		if w.cfg.Broken == "split-publish-early" {
			w.publishEarly(d.From, d.To, slots)
			return
		}
		w.beginMigration(d.From, d.To, slots)
	}
	text := fmt.Sprintf("members=%s;joining=;leaving=;former=;boot=%s;base=0", joinIDs(ids), joinIDs(ids))
	if !w.placeMode() {
		w.applyMembers(g, text)
		then()
		return
	}
	// Only a group with no record yet is created ("guard exists 0"): two
	// placement leaders deciding the same split (the first deposed with
	// its write in flight) do not found the group twice, on two sets of
	// machines.
	ops := append([]service.Op{kvOpOf(service.GuardKind, "mem/"+g.name, "exists", "0")}, w.recordOps("mem/"+g.name, text, false)...)
	w.pgCall(ops, func(rs []service.Result) {
		if service.IsGuardFailure(rs[0]) {
			p.creating, p.last = false, ""
			return
		}
		if w.pg.gen == gen {
			w.pg.view["mem/"+g.name] = shMemView{text: text, ver: rs[len(rs)-2].Int}
		}
		then()
	})
}

// pgGen is the placement leader's generation (0 without #placement).
func (w *shWorld) pgGen() uint64 {
	if w.pg == nil {
		return 0
	}
	return w.pg.gen
}

// found starts new group g's replicas on ids, its bootstrap configuration
// (each a founding member: a fresh group).
func (w *shWorld) found(g *shGroup, ids []automaton.NodeID) {
	g.boot = slices.Clone(ids)
	if len(g.members) == 0 {
		g.members = slices.Clone(ids)
	}
	g.chain = [][]automaton.NodeID{sortedIDs(ids)}
	w.stats.Created++
	if g.incarn > 0 {
		w.stats.Incarnated++
	}
	w.tracef("placement: group %s created on %s", g.incName(), joinIDs(ids))
	for _, id := range ids {
		w.addReplica(g, w.machineByID(id))
	}
}

// publishEarly is the broken variant split-publish-early: the creation
// step also writes the slot map naming the new group the slots' owner,
// before any migration fenced the source (froze the slots) or handed them
// over; the migration starts as the next move, after the cool-down (a
// split in two moves, the new group and its map first).
func (w *shWorld) publishEarly(from, to int, slots []shard.Range) {
	q := w.place.Move(slots, to)
	w.tracef("broken: slot map epoch %d names %s the owner of %s before the migration", q.Epoch, w.groups[to].name, shard.FormatSlots(slots))
	start := func() {
		if w.drv == nil && !w.mig.active && w.migsLeft > 0 {
			w.beginMigration(from, to, slots)
		}
	}
	if !w.placeMode() {
		w.place = q
		w.placeMap = shard.Build(w.place.Groups)
		w.stats.Flips++
		w.placer.early, w.placer.moveAt = start, w.now
		return
	}
	w.placer.creating = true
	w.pgCall(w.recordOps("map", q.Encode(), w.guarded()), func([]service.Result) {
		w.placer.creating = false
		w.placer.early, w.placer.moveAt = start, w.now
	})
}
