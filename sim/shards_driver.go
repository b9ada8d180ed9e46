package sim

import (
	"slices"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
)

// The migration driver of the sharded world: shard.Machine, its actions
// carried out as node/migrate.go carries them out (the same atomic groups
// in the groups' logs), the placement record and slot map as one
// register. A driver dies with the crash fault; the next starts from the
// saved record after 50–300ms, and the dead one's requests still in
// flight reach the logs (its token fences them).

type shDriver struct {
	m     *shard.Machine
	act   shard.Action
	id    uint64
	gen   uint64
	ver   uint64 // the record's version this driver saved last
	seq   uint64
	group int
	ops   []service.Op
	tries int
	stage int // ActTake: 0 reading the sets, 1 moving dirty to taken
	keys  []string
	out   shard.Outcome
	wait  bool // a group request is outstanding
}

// migration state in the world: the saved record and its version.
type shMig struct {
	rec    shard.Migration
	ver    uint64
	id     uint64
	gen    uint64
	active bool // a migration has started and not ended
}

// startMigration plans the next split, merge or move in turn (Plan
// "rotation") and starts a driver for it.
func (w *shWorld) startMigration() {
	if w.stopping || w.migsLeft <= 0 || w.drv != nil {
		return
	}
	from, to, slots := w.plan()
	if from < 0 {
		w.migsLeft = 0
		return
	}
	w.beginMigration(from, to, slots)
}

// beginMigration saves a new migration record (slots from group from to
// group to) and starts a driver for it.
func (w *shWorld) beginMigration(from, to int, slots []shard.Range) {
	w.mig.id++
	rec := shard.Migration{ID: w.mig.id, From: from, To: to, FromName: w.groups[from].name, ToName: w.groups[to].name, Slots: slots}
	if w.placeMode() {
		w.beginLogged(rec)
		return
	}
	w.mig.rec = rec
	w.mig.ver++
	w.mig.active = true
	w.migSpans = append(w.migSpans, [2]time.Duration{w.now, -1})
	w.tracef("migration %d: %s -> %s slots %s", w.mig.id, w.groups[from].name, w.groups[to].name, shard.FormatSlots(slots))
	w.newDriver()
}

// plan picks the next migration in turn: a split (the upper half of the
// largest group's slots to an empty group, or to the smallest), a merge
// (every slot of the smallest group into the next smallest), a move (up
// to 64 slots of a random group to another).
func (w *shWorld) plan() (from, to int, slots []shard.Range) {
	n := len(w.groups)
	if n < 2 {
		return -1, -1, nil
	}
	count := func(g int) int {
		c := 0
		for _, r := range w.place.Groups[g] {
			c += r.Last - r.First + 1
		}
		return c
	}
	list := func(g int) []int {
		var out []int
		for _, r := range w.place.Groups[g] {
			for s := r.First; s <= r.Last; s++ {
				out = append(out, s)
			}
		}
		return out
	}
	toRanges := func(sl []int) []shard.Range {
		var out []shard.Range
		for _, s := range sl {
			if k := len(out); k > 0 && out[k-1].Last == s-1 {
				out[k-1].Last = s
			} else {
				out = append(out, shard.Range{First: s, Last: s})
			}
		}
		return out
	}
	largest, smallest := 0, -1
	for g := 0; g < n; g++ {
		if count(g) > count(largest) {
			largest = g
		}
		if c := count(g); c > 0 && (smallest < 0 || c < count(smallest)) {
			smallest = g
		}
	}
	kind := w.migTurn % 3
	w.migTurn++
	owners := 0
	for g := 0; g < n; g++ {
		if count(g) > 0 {
			owners++
		}
	}
	if kind == 1 && owners < 2 {
		kind = 0
	}
	switch kind {
	case 0: // split
		to = -1
		for g := 0; g < n; g++ {
			if g != largest && (to < 0 || count(g) < count(to)) {
				to = g
			}
		}
		sl := list(largest)
		return largest, to, toRanges(sl[len(sl)/2:])
	case 1: // merge
		to = -1
		for g := 0; g < n; g++ {
			if g != smallest && count(g) > 0 && (to < 0 || count(g) < count(to)) {
				to = g
			}
		}
		return smallest, to, w.place.Groups[smallest]
	}
	from = largest
	to = (from + 1 + w.rngDrv.Intn(n-1)) % n
	sl := list(from)
	k := 1 + w.rngDrv.Intn(min(64, len(sl)))
	i := w.rngDrv.Intn(len(sl) - k + 1)
	return from, to, toRanges(sl[i : i+k])
}

func (w *shWorld) newDriver() {
	w.mig.gen++
	d := &shDriver{m: shard.NewMachine(w.mig.rec), gen: w.mig.gen, ver: w.mig.ver}
	if w.placeMode() {
		d.ver = uint64(w.pg.ver["mig"])
	}
	d.m.Batch = 16
	d.m.FreezeAt = 4
	for d.id == 0 || w.byID[d.id] != nil {
		d.id = w.rngDrv.Uint64()
	}
	w.drv = d
	w.driverNext(d)
}

// driverNext does the machine's next action.
func (w *shWorld) driverNext(d *shDriver) {
	if w.drv != d {
		return
	}
	a := d.m.Next(shard.Control{})
	d.out = shard.Outcome{}
	later := func(delay time.Duration) {
		w.after(delay, &shEvent{kind: shDriverEv, gen: d.gen})
	}
	switch a.Kind {
	case shard.ActStop:
		w.drv = nil
		if d.m.Rec.Phase.Finished() && w.placeMode() {
			// The placement log's record ended the migration
			// (takeRecord).
			w.tracef("migration %d %s: its driver stops", d.m.Rec.ID, d.m.Rec.Phase)
			return
		}
		if d.m.Rec.Phase.Finished() {
			w.mig.active = false
			w.migSpans[len(w.migSpans)-1][1] = w.now
			w.stats.Migrations++
			w.migsLeft--
			w.tracef("migration %d %s", d.m.Rec.ID, d.m.Rec.Phase)
			w.after(100*time.Millisecond+time.Duration(w.rngDrv.Int63n(int64(200*time.Millisecond))), &shEvent{kind: shStartMigration})
			return
		}
		w.tracef("driver stopped (%s): a new one takes over", a.Reason)
		w.after(50*time.Millisecond, &shEvent{kind: shStartMigration, attempt: -1})
	case shard.ActSave:
		if w.placeMode() {
			w.driverSave(d, a.Rec)
			return
		}
		if w.mig.ver != d.ver {
			d.out.Err = "the migration record changed (another driver)"
		} else {
			w.mig.rec = a.Rec
			w.mig.ver++
			d.ver = w.mig.ver
		}
		later(time.Millisecond)
	case shard.ActFlip:
		if w.placeMode() {
			w.driverFlip(d, a)
			return
		}
		if !w.place.Owns(a.Group, a.Slots) {
			w.place = w.place.Move(a.Slots, a.Group)
			w.placeMap = shard.Build(w.place.Groups)
			w.stats.Flips++
			w.tracef("slot map epoch %d: %s to %s", w.place.Epoch, shard.FormatSlots(a.Slots), w.groups[a.Group].name)
			if err := w.checkMap(); err != "" {
				w.violation("%s", err)
			}
		}
		later(time.Millisecond)
	case shard.ActWait:
		later(time.Duration(min(a.Wait, 1) * float64(time.Second)))
	default:
		d.act, d.group, d.ops, d.stage = a, a.Group, service.MigrationOps(a), 0
		d.seq++
		d.tries = 0
		w.driverSend(d)
	}
}

func (w *shWorld) driverSend(d *shDriver) {
	if d.tries >= shMaxTries {
		d.out.Err = "no answer from " + w.groups[d.group].name
		d.wait = false
		w.after(0, &shEvent{kind: shDriverEv, gen: d.gen})
		return
	}
	d.tries++
	d.wait = true
	g := w.groups[d.group]
	if r := w.pickReplica(g, w.rngDrv, false); r != nil {
		req := automaton.Request{ID: automaton.RequestID{Client: d.id, Seq: d.seq}, Ops: d.ops}
		w.after(w.clientLat.Sample(w.rngNet), &shEvent{kind: shClientReq, mach: r.m.idx, group: g.idx, inc: r.m.inc, client: -1, req: req, fwd: -1})
	}
	w.after(shTimeout, &shEvent{kind: shDriverTimeout, gen: d.gen, attempt: d.tries})
}

// onDriver: an answer to the driver's request (attempt 1), a timeout,
// or the outcome of an action done at once.
func (w *shWorld) onDriver(e *shEvent) {
	d := w.drv
	if d == nil || e.gen != d.gen {
		return
	}
	switch {
	case e.kind == shDriverTimeout:
		if d.wait && e.attempt == d.tries {
			w.driverSend(d)
		}
		return
	case e.attempt == 1: // an answer
		if !d.wait || e.resp.ID.Seq != d.seq {
			return
		}
		if e.resp.Result.IsErr() || len(e.resp.Results) < len(d.ops) {
			w.after(10*time.Millisecond, &shEvent{kind: shDriverTimeout, gen: d.gen, attempt: d.tries})
			return
		}
		d.wait = false
		if w.driverAnswer(d, e.resp.Results) {
			return // a second request is under way (take)
		}
	}
	if d.wait {
		return
	}
	d.m.Apply(d.out)
	w.driverNext(d)
}

// driverAnswer turns a group's results into the action's outcome, as
// node/migrate.go does; true when it sent a second request instead (a
// take moving the dirty keys it read into the taken set).
func (w *shWorld) driverAnswer(d *shDriver, rs []service.Result) bool {
	for _, r := range rs {
		if service.IsGuardFailure(r) {
			d.out.Err = r.Err
			return false
		}
	}
	if d.stage == 1 {
		return false // the take's second group: the outcome is the first's
	}
	out, next := service.MigrationOutcome(d.act, rs)
	d.out = out
	if next != nil && out.Err == "" {
		d.stage, d.ops = 1, next
		d.seq++
		d.tries = 0
		w.driverSend(d)
		return true
	}
	return false
}

// ---- faults ----

func (w *shWorld) nemesisGap() time.Duration {
	return 20*time.Millisecond + time.Duration(w.rngFault.Int63n(int64(180*time.Millisecond)))
}

func (w *shWorld) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(w.rngFault.Int63n(int64(hi-lo)))
}

// Window kinds of the sharded world.
const (
	winShLoss = iota
	winShDup
	winShReorder
	winShSlowDisk
	winShSpike
	winKinds
)

func (w *shWorld) onNemesis() {
	if w.stopping {
		return
	}
	var kinds []string
	for _, k := range ShardFaultKinds {
		if !w.faults[k] || (k == "power" && w.powerUsed > 0) {
			continue
		}
		kinds = append(kinds, k)
		if k == "crash" {
			kinds = append(kinds, "driver")
		}
	}
	if len(kinds) == 0 {
		return // power only, and it was used
	}
	pick := kinds[w.rngFault.Intn(len(kinds))]
	switch pick {
	case "crash", "pause":
		var can []*shMachine
		for _, m := range w.machines {
			if m.up && !m.paused && w.mayTake(m) {
				can = append(can, m)
			}
		}
		if len(can) == 0 {
			break
		}
		m := can[w.rngFault.Intn(len(can))]
		if p := w.pg; p != nil && p.mach >= 0 && w.rngFault.Intn(4) == 0 && slices.Contains(can, w.machines[p.mach]) {
			m = w.machines[p.mach] // the placement leader's machine
		}
		if pick == "crash" {
			w.crash(m)
			w.after(w.between(20*time.Millisecond, time.Second), &shEvent{kind: shRestart, mach: m.idx, inc: m.inc})
		} else {
			w.pause(m)
			w.after(pauseDist.Sample(w.rngFault), &shEvent{kind: shResume, mach: m.idx, inc: m.inc})
		}
		w.checkMajority(string(m.id) + "'s " + pick)
	case "dead":
		w.deadFault()
	case "driver":
		if w.drv != nil {
			w.tracef("the migration driver dies")
			w.stats.DriverDeaths++
			w.drv = nil
			w.after(w.between(50*time.Millisecond, 300*time.Millisecond), &shEvent{kind: shStartMigration, attempt: -1})
		}
		w.killChange()
	case "power":
		w.powerUsed++
		w.stats.PowerLosses++
		w.tracef("power loss: every machine")
		for _, m := range w.machines {
			if m.up {
				w.crash(m)
				m.powered = true
			}
			w.after(w.between(50*time.Millisecond, 500*time.Millisecond), &shEvent{kind: shRestart, mach: m.idx, inc: m.inc})
		}
	case "partition":
		w.stats.Partitions++
		k := 1 + w.rngFault.Intn(max(1, len(w.machines)/4))
		for _, i := range w.rngFault.Perm(len(w.machines))[:k] {
			w.machines[i].side = 1
		}
		w.tracef("partition: %d machines cut off", k)
		w.after(w.between(50*time.Millisecond, time.Second), &shEvent{kind: shHeal})
	case "loss":
		w.openWindow(winShLoss, -1)
	case "dup":
		w.openWindow(winShDup, -1)
	case "reorder":
		w.openWindow(winShReorder, -1)
	case "slow":
		m := w.rngFault.Intn(len(w.machines))
		if w.rngFault.Intn(2) == 0 {
			w.openWindow(winShSlowDisk, m)
		} else {
			w.openWindow(winShSpike, m)
		}
	}
	w.after(w.nemesisGap(), &shEvent{kind: shNemesis})
}

// openWindow opens a window of kind k (on machine m for the per-machine
// kinds) for 50–500ms; a later window of the same kind replaces it.
func (w *shWorld) openWindow(k int, m int) {
	w.stats.Windows++
	switch k {
	case winShLoss:
		w.loss = 0.2
	case winShDup:
		w.dup = 0.2
	case winShReorder:
		w.stats.Reorders++
		w.reorder = 0.2
	case winShSlowDisk:
		w.machines[m].slow = float64(10 + w.rngFault.Intn(41))
	case winShSpike:
		w.machines[m].spike = spikeDist.Sample(w.rngFault)
	}
	w.winGen[k]++
	w.tracef("window %d opens (machine %d)", k, m)
	w.after(w.between(50*time.Millisecond, 500*time.Millisecond), &shEvent{kind: shWindowEnd, gen: w.winGen[k], attempt: k, mach: m})
}

func (w *shWorld) onWindowEnd(e *shEvent) {
	if w.winGen[e.attempt] != e.gen {
		return // replaced by a later window of its kind
	}
	switch e.attempt {
	case winShLoss:
		w.loss = 0
	case winShDup:
		w.dup = 0
	case winShReorder:
		w.reorder = 0
	case winShSlowDisk:
		w.machines[e.mach].slow = 0
	case winShSpike:
		w.machines[e.mach].spike = 0
	}
}

func (w *shWorld) onHeal(*shEvent) {
	for _, m := range w.machines {
		m.side = 0
	}
}

// mayTake: crashing or pausing m keeps every group it hosts within the
// placement's promise: at most (Replicas-1)/2 of the replicas the group's
// machines host down or paused (the intended replica count, not the
// hosted one: a change that shrinks a group below it is caught by the
// majority invariant, shards_members.go).
func (w *shWorld) mayTake(m *shMachine) bool {
	for _, r := range m.reps {
		down := 1
		for _, o := range r.g.reps {
			if !o.m.up || o.m.paused {
				down++
			}
		}
		if down > (w.want(r.g)-1)/2 {
			return false
		}
	}
	return true
}

func (w *shWorld) crash(m *shMachine) {
	w.tracef("%s crashes", m.id)
	w.stats.Crashes++
	m.up, m.downAt = false, w.now
	m.inc++
	m.busy, m.running, m.outs, m.q, m.fsyncing = false, nil, nil, nil, false
	m.paused, m.pausedQ, m.cpuHeld = false, nil, false
	for _, r := range m.reps {
		r.rel.Crash()
		r.a, r.buf, r.timers = nil, nil, nil
	}
	w.placeMachineDown(m)
}

func (w *shWorld) restart(m *shMachine, inc uint64) {
	if m.up || m.inc != inc {
		return
	}
	w.tracef("%s restarts", m.id)
	m.up, m.powered, m.deadUntil = true, false, 0
	for _, r := range m.reps {
		w.boot(r)
	}
	w.staleBooted(m) // shards_inc.go
}

// pause stops m's process (the pause fault).
func (w *shWorld) pause(m *shMachine) {
	w.tracef("%s pauses", m.id)
	w.stats.Pauses++
	m.paused = true
	w.placeMachineDown(m)
}

// resume restarts a paused m: held outputs whose fsync finished go out,
// the step it was running finishes, then the inputs that waited are
// delivered in arrival order.
func (w *shWorld) resume(m *shMachine, inc uint64) {
	if !m.up || !m.paused || m.inc != inc {
		return
	}
	w.tracef("%s resumes (%d queued inputs)", m.id, len(m.pausedQ))
	m.paused = false
	for _, r := range m.reps {
		if r.a != nil {
			r.rel.ReleaseReady(shIO{r})
		}
	}
	for _, r := range m.reps {
		if r.rel.Unsynced() && !m.fsyncing {
			w.startFsync(m)
		}
	}
	q := m.pausedQ
	m.pausedQ = nil
	for _, e := range q {
		w.after(0, e)
	}
	if m.cpuHeld {
		m.cpuHeld = false
		w.onCPUDone(m)
	}
}

func (w *shWorld) healAll() {
	w.loss, w.dup, w.reorder = 0, 0, 0
	for k := range w.winGen {
		w.winGen[k]++
	}
	for _, m := range w.machines {
		m.side, m.slow, m.spike = 0, 0, 0
		if !m.up {
			w.restart(m, m.inc)
		}
		if m.paused {
			w.resume(m, m.inc)
		}
	}
}
