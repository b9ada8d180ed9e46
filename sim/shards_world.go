package sim

import (
	"container/heap"
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/check"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/release"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
)

// The sharded world's machinery: machines, replicas, network, disk and
// processor (shards.go describes the model).

// RunShards runs one sharded simulation.
func RunShards(cfg ShardsConfig) (*ShardsResult, error) {
	w, err := newShWorld(cfg)
	if err != nil {
		return nil, err
	}
	w.run()
	res := &ShardsResult{Seed: cfg.Seed, Stats: w.stats, Invariant: w.inv}
	res.Stats.Epoch = int(w.place.Epoch)
	res.Decisions = w.placer.summary()
	res.Done, res.MigSpans, res.StopAt = w.done, w.migSpans, w.stopAt
	if w.err != "" {
		return res, fmt.Errorf("sim seed %d: %s", cfg.Seed, w.err)
	}
	span := w.lastReply - w.cfg.Warmup
	if w.warmedUp && span > 0 {
		res.Elapsed = span
		res.Throughput = float64(w.measured) / span.Seconds()
		for i, m := range w.machines {
			res.Util = append(res.Util, float64(m.busyTime-w.busyAtW[i])/float64(span))
		}
	}
	if len(w.bank) > 0 {
		res.TxnOps = len(w.bank)
		if !cfg.NoCheck && w.inv == "" {
			rep, err := check.StrictSerializable(&history.History{Ops: w.bank}, check.Options{MaxStates: txnMaxStates})
			if err != nil {
				return res, fmt.Errorf("sim seed %d: bank check: %v", cfg.Seed, err)
			}
			res.TxnCheck = rep.Result
			if rep.Result != check.Ok {
				res.TxnDetail = rep.String()
			}
		}
	}
	h := w.rec.History()
	res.Ops = len(h.Ops)
	if !cfg.NoCheck && w.inv == "" {
		rep, err := check.Linearizable(h, check.Options{Timeout: DefaultCheckTimeout})
		if err != nil {
			return res, fmt.Errorf("sim seed %d: check: %v", cfg.Seed, err)
		}
		res.Check = rep.Result
		if rep.Result != check.Ok {
			res.Detail = rep.String()
		}
	}
	return res, nil
}

func (c ShardsConfig) withDefaults() (ShardsConfig, error) {
	if c.Protocol == "" {
		c.Protocol = "paxos"
	}
	if c.Replicas == 0 {
		c.Replicas = 3
	}
	if c.Keys == 0 {
		c.Keys = 32
	}
	if c.Machines == 0 {
		c.Machines = c.Replicas * (c.Shards + c.Spares)
	}
	for _, d := range []struct {
		p *string
		v string
	}{{&c.Latency, DefaultLatency}, {&c.ClientLatency, DefaultClientLatency}, {&c.Fsync, DefaultFsync}, {&c.Think, DefaultThink}} {
		if *d.p == "" {
			*d.p = d.v
		}
	}
	if c.MaxTime == 0 {
		c.MaxTime = DefaultMaxTime
	}
	if c.Plan == "" {
		c.Plan = "decide"
	}
	if c.Place == (shard.PlaceParams{}) {
		c.Place = SimPlaceParams
	}
	if c.HotKeys == 0 {
		c.HotKeys = 1
	}
	if c.PlaceReplicas == 0 && c.Plan == "decide" {
		c.PlaceReplicas = DefaultPlaceReplicas
	}
	if c.HotPhase == 0 {
		c.HotPhase = 2 * time.Second
	}
	switch {
	case c.NewGroups < 0 || c.NewGroups > 0 && c.Plan != "decide":
		return c, fmt.Errorf("sim: --new-groups needs --plan decide")
	case c.Incarnations && (c.NewGroups == 0 || c.PlaceReplicas > 0):
		return c, fmt.Errorf("sim: --incarnations needs --new-groups, without --place-replicas")
	case c.Broken == "reuse-name" && !c.Incarnations:
		return c, fmt.Errorf("sim: reuse-name needs --incarnations")
	case c.Broken == "split-publish-early" && c.NewGroups == 0:
		return c, fmt.Errorf("sim: split-publish-early needs --new-groups")
	case c.Shards < 1 || c.Spares < 0:
		return c, fmt.Errorf("sim: need at least 1 shard (and no negative spares)")
	case c.Replicas < 1 || c.Machines < c.Replicas:
		return c, fmt.Errorf("sim: %d machines cannot host groups of %d distinct replicas", c.Machines, c.Replicas)
	case c.Clients < 1 || c.Ops < 0 || c.Keys < 1:
		return c, fmt.Errorf("sim: need clients, keys and a non-negative op count")
	case c.PlainFrac < 0 || c.PlainFrac > 1:
		return c, fmt.Errorf("sim: plain fraction must be within [0, 1]")
	case c.Plan != "decide" && c.Plan != "rotation":
		return c, fmt.Errorf("sim: unknown plan %q (want decide or rotation)", c.Plan)
	case c.Hot < 0 || c.Hot > 1 || c.HotKeys < 1 || c.HotKeys > c.Keys:
		return c, fmt.Errorf("sim: hot fraction must be within [0, 1], hot keys within [1, keys]")
	case c.Broken != "" && c.Broken != "keep-accepting" && c.Broken != "placer-overreach" && c.Broken != "txn-no-dirty" && c.Broken != "place-no-guard" && c.Broken != "members-no-guard" && c.Broken != "split-publish-early" && c.Broken != "reuse-name" && !strings.HasPrefix(c.Broken, "txn:") && !slices.Contains(memberVariants, c.Broken):
		return c, fmt.Errorf("sim: unknown broken variant %q (want keep-accepting, placer-overreach, txn-no-dirty, place-no-guard, members-no-guard, split-publish-early, reuse-name, %s or txn:<a shard/txn Coordinator variant>)", c.Broken, strings.Join(memberVariants, ", "))
	case slices.Contains(memberVariants, c.Broken) && c.Plan != "decide":
		return c, fmt.Errorf("sim: %s needs --plan decide", c.Broken)
	case (strings.HasPrefix(c.Broken, "txn:") || c.Broken == "txn-no-dirty") && c.TxnClients == 0:
		return c, fmt.Errorf("sim: %s needs --txn-clients", c.Broken)
	case c.Broken == "placer-overreach" && c.Plan != "decide":
		return c, fmt.Errorf("sim: placer-overreach needs --plan decide")
	case c.PlaceReplicas < -1 || c.PlaceReplicas > c.Machines:
		return c, fmt.Errorf("sim: %d machines cannot host %d placement replicas", c.Machines, c.PlaceReplicas)
	case c.PlaceReplicas > 0 && c.Plan != "decide":
		return c, fmt.Errorf("sim: --place-replicas needs --plan decide")
	case c.Broken == "place-no-guard" && c.PlaceReplicas <= 0:
		return c, fmt.Errorf("sim: place-no-guard needs --place-replicas")
	case c.Broken == "members-no-guard" && c.PlaceReplicas <= 0:
		return c, fmt.Errorf("sim: members-no-guard needs --place-replicas")
	}
	return c, nil
}

func newShWorld(cfg ShardsConfig) (*shWorld, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	w := &shWorld{cfg: cfg, byID: map[uint64]*shClient{}, calls: map[uint64]*shCall{}}
	if w.proto, err = automaton.LookupAny(cfg.Protocol); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if !automaton.TransactionsOf(cfg.Protocol).Atomic {
		return nil, fmt.Errorf("sim: protocol %s has no atomic groups: its slots cannot carry guards, so they cannot migrate", cfg.Protocol)
	}
	if w.kv, err = service.Lookup(ServiceName); err != nil {
		return nil, err
	}
	if w.faults, err = ParseFaultKinds(cfg.Faults, ShardFaultKinds); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	w.reorderDelay = MustParseDist(DefaultReorderDelay)
	for _, d := range []struct {
		src string
		dst *Dist
		has *bool
	}{
		{cfg.Latency, &w.lat, nil}, {cfg.ClientLatency, &w.clientLat, nil}, {cfg.Fsync, &w.fsyncLat, nil}, {cfg.Think, &w.think, nil},
		{cfg.OpCost, &w.opCost, &w.hasOp}, {cfg.MsgCost, &w.msgCost, &w.hasMsg}, {cfg.ApplyCost, &w.applyCost, &w.hasApply}, {cfg.FwdCost, &w.fwdCost, &w.hasFwd},
	} {
		if d.src == "" {
			continue
		}
		if *d.dst, err = ParseDist(d.src); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		if d.has != nil {
			*d.has = true
		}
	}
	w.cpuOn = w.hasOp || w.hasMsg || w.hasApply || w.hasFwd
	master := rand.New(rand.NewSource(cfg.Seed))
	sub := func() *rand.Rand { return rand.New(rand.NewSource(master.Int63())) }
	w.rngNet, w.rngDisk, w.rngClient, w.rngFault, w.rngNode, w.rngCPU, w.rngDrv = sub(), sub(), sub(), sub(), sub(), sub(), sub()
	// Membership changes draw from a stream of their own, so that the
	// other streams' draws are those of a run without them.
	w.rngChg = rand.New(rand.NewSource(cfg.Seed ^ 0x6368616e6765))
	w.rec = history.NewRecorder(func() int64 { return int64(w.now) })

	for i := 0; i < cfg.Machines; i++ {
		w.machines = append(w.machines, &shMachine{idx: i, id: automaton.NodeID("m" + strconv.Itoa(i+1)), up: true})
	}
	n := cfg.Shards + cfg.Spares + cfg.NewGroups
	w.place = shard.Placement{Epoch: 1, Groups: make([][]shard.Range, n)}
	for i, r := range shard.Even(cfg.Shards) {
		w.place.Groups[i] = []shard.Range{r}
	}
	for gi := 0; gi < n; gi++ {
		g := &shGroup{idx: gi, name: "s" + strconv.Itoa(gi), hint: -1, broke: cfg.Broken == "keep-accepting"}
		if gi >= cfg.Shards+cfg.Spares {
			g.born = true // unplaced until a split creates it (shards_place.go)
			w.groups = append(w.groups, g)
			continue
		}
		for i := 0; i < cfg.Replicas; i++ {
			m := w.machines[(cfg.Replicas*gi+i)%cfg.Machines]
			g.ids = append(g.ids, m.id)
			r := &shReplica{w: w, g: g, m: m, durable: map[string][]byte{}, taken: map[int]string{}}
			r.rel = release.New(release.Config{Self: m.id, Known: g.known})
			g.reps = append(g.reps, r)
			m.reps = append(m.reps, r)
		}
		g.boot = append([]automaton.NodeID(nil), g.ids...)
		g.ever = append([]automaton.NodeID(nil), g.ids...)
		g.members = append([]automaton.NodeID(nil), g.ids...)
		g.chain = [][]automaton.NodeID{sortedIDs(g.ids)}
		w.groups = append(w.groups, g)
	}
	w.placeMap = shard.Build(w.place.Groups)
	if err := w.checkMap(); err != "" {
		return nil, fmt.Errorf("sim: %s", err)
	}
	if cfg.PlaceReplicas > 0 {
		w.newPlaceGroup()
	}
	w.migsLeft = cfg.Migrations
	for i := 0; i < cfg.Clients; i++ {
		c := &shClient{idx: i, plain: float64(i) < cfg.PlainFrac*float64(cfg.Clients), cache: w.placeMap}
		for c.id == 0 || w.byID[c.id] != nil {
			c.id = w.rngClient.Uint64()
		}
		w.clients = append(w.clients, c)
		w.byID[c.id] = c
	}
	return w, nil
}

func (g *shGroup) member(id automaton.NodeID) bool { return g.index(id) >= 0 }

// groupAt is the group of index idx: a data group, or #placement
// (shards_placegroup.go), whose index follows theirs.
func (w *shWorld) groupAt(idx int) *shGroup {
	if w.pg != nil && idx == w.pg.g.idx {
		return w.pg.g
	}
	return w.groups[idx]
}

// allGroups are the data groups and, replicated, #placement: the groups
// whose membership the placement leader changes (shards_members.go).
func (w *shWorld) allGroups() []*shGroup {
	if w.pg == nil {
		return w.groups
	}
	return append(slices.Clone(w.groups), w.pg.g)
}

// known: id hosted a replica of g once (a removed member's messages are
// dropped, not refused).
func (g *shGroup) known(id automaton.NodeID) bool { return slices.Contains(g.ever, id) }

func (g *shGroup) index(id automaton.NodeID) int {
	for i, x := range g.ids {
		if x == id {
			return i
		}
	}
	return -1
}

func (w *shWorld) tracef(format string, a ...any) {
	if w.cfg.Trace != nil {
		fmt.Fprintf(w.cfg.Trace, "%12v %s\n", w.now, fmt.Sprintf(format, a...))
	}
}

func (w *shWorld) fail(format string, a ...any) {
	if w.err == "" {
		w.err = fmt.Sprintf("at %v: %s", w.now, fmt.Sprintf(format, a...))
	}
}

func (w *shWorld) violation(format string, a ...any) {
	if w.inv == "" && !w.cfg.NoInvariants {
		w.inv = fmt.Sprintf("at %v: %s", w.now, fmt.Sprintf(format, a...))
	}
}

func (w *shWorld) after(d time.Duration, e *shEvent) {
	e.at = w.now + max(d, 0)
	w.seq++
	e.seq = w.seq
	heap.Push(&w.q, e)
}

func (w *shWorld) run() {
	for _, m := range w.machines {
		for _, r := range m.reps {
			w.boot(r)
		}
	}
	for _, c := range w.clients {
		w.after(w.think.Sample(w.rngClient), &shEvent{kind: shClientNext, client: c.idx})
	}
	if w.cfg.TxnClients > 0 {
		w.initBank()
	}
	if len(w.faults) > 0 {
		w.after(w.nemesisGap(), &shEvent{kind: shNemesis})
	}
	if w.migsLeft > 0 {
		if w.cfg.Plan == "decide" {
			w.newPlacer()
		} else {
			w.after(orDuration(w.cfg.MigrateAt, 100*time.Millisecond), &shEvent{kind: shStartMigration})
		}
	}
	if w.cfg.Ops == 0 {
		w.stopIssuing()
	}
	for len(w.q) > 0 && !w.finished && w.err == "" && w.inv == "" {
		if w.stopping && w.busyClients == 0 && !w.mig.active && w.chg == nil {
			break
		}
		e := heap.Pop(&w.q).(*shEvent)
		w.now = e.at
		w.stats.Events++
		if w.stats.Events > DefaultMaxEvents {
			w.fail("more than %d events", DefaultMaxEvents)
			break
		}
		if w.now >= w.cfg.MaxTime && !w.stopping {
			w.stopIssuing()
		}
		if !w.warmedUp && w.now >= w.cfg.Warmup {
			w.warmedUp = true
			for _, m := range w.machines {
				w.busyAtW = append(w.busyAtW, m.busyTime)
			}
		}
		w.handle(e)
	}
	for _, c := range w.clients {
		if c.busy {
			c.pending.Unknown()
			w.stats.Unknown++
		}
	}
	for _, c := range w.txc {
		if c.busy {
			e := *c.entry
			e.Return, e.Outcome = int64(w.now), history.Unknown
			w.bank = append(w.bank, e)
		}
	}
	// Liveness: with every fault healed, the migration under way ends
	// (done or canceled) within the drain.
	if w.mig.active && w.err == "" {
		w.violation("migration %d (%s -> %s, slots %s) did not end within %v of the final heal", w.mig.rec.ID, w.mig.rec.FromName, w.mig.rec.ToName, shard.FormatSlots(w.mig.rec.Slots), DefaultDrainTime)
	}
	if w.err == "" {
		w.checkHealed()
	}
}

func (w *shWorld) handle(e *shEvent) {
	switch e.kind {
	case shPeer, shClientReq, shTimer:
		w.deliver(e)
	case shForward:
		w.onForward(e)
	case shCPUDone:
		if m := w.machines[e.mach]; m.inc == e.inc {
			if m.paused {
				m.cpuHeld = true // the step finishes when the process resumes
				return
			}
			w.onCPUDone(m)
		}
	case shFsync:
		w.onFsync(e)
	case shClientResp:
		w.onClientResp(e)
	case shClientNext:
		w.onClientNext(w.clients[e.client])
	case shClientTimeout:
		w.onClientTimeout(e)
	case shClientResend:
		w.onClientResend(e)
	case shDriverEv, shDriverTimeout:
		w.onDriver(e)
	case shStartMigration:
		if e.attempt == -1 { // a driver takes over the migration under way
			if w.drv == nil && w.mig.active && w.placeReady() {
				w.newDriver()
			}
			return
		}
		if w.cfg.Plan == "rotation" {
			w.startMigration()
		}
	case shPlaceTick:
		w.onPlaceTick()
	case shPlaceAnswer:
		w.placerAnswer(e.resp)
	case shTxNext:
		w.onTxNext(w.txc[e.client])
	case shTxRetry:
		if c := w.txc[e.client]; c.busy && uint64(c.gen) == e.gen {
			w.txAttempt(c)
		}
	case shCallTimeout:
		w.onCallTimeout(e)
	case shCallResp:
		w.onCallResp(e)
	case shResolve:
		w.onResolve()
	case shNemesis:
		w.onNemesis()
	case shRestart:
		w.restart(w.machines[e.mach], e.inc)
	case shHeal:
		w.onHeal(e)
	case shResume:
		w.resume(w.machines[e.mach], e.inc)
	case shWindowEnd:
		w.onWindowEnd(e)
	case shChangeEv, shChangeTimeout:
		w.onChange(e)
	case shChangeResume:
		w.resumeChange()
	case shPlaceCallTimeout, shPlaceCallAnswer:
		w.onPlaceCall(e)
	case shDrainEnd:
		w.finished = true
	case shRetireStale:
		w.retireStale(w.machines[e.mach], e.inc) // shards_inc.go
	}
}

func (w *shWorld) stopIssuing() {
	if w.stopping {
		return
	}
	w.stopping = true
	w.stopAt = w.now
	w.tracef("workload over: healing every fault")
	w.healAll()
	w.after(DefaultDrainTime, &shEvent{kind: shDrainEnd})
}

// ---- replicas ----

type shIO struct{ r *shReplica }

func (io shIO) Persist(seq uint64, o automaton.Persist) {
	p := automaton.Persist{Key: o.Key, Delete: o.Delete}
	if !o.Delete {
		p.Value = append([]byte{}, o.Value...)
	}
	io.r.buf = append(io.r.buf, bufRec{seq: seq, p: p})
}

func (io shIO) Release(o automaton.Output) {
	r, w := io.r, io.r.w
	switch o := o.(type) {
	case automaton.Send:
		w.send(r, o)
	case automaton.Respond:
		w.respond(r, o.Resp)
	}
}

func (io shIO) SetTimer(o automaton.SetTimer) {
	r := io.r
	r.timerGen++
	r.timers[o.ID] = r.timerGen
	r.w.after(o.After, &shEvent{kind: shTimer, mach: r.m.idx, group: r.g.idx, inc: r.m.inc, ginc: r.incarn, timer: o.ID, gen: r.timerGen})
}

func (io shIO) CancelTimer(id automaton.TimerID) { delete(io.r.timers, id) }
func (io shIO) Members(o automaton.Members)      { io.r.w.observeConf(io.r, o) }

func (w *shWorld) boot(r *shReplica) {
	r.timers = map[automaton.TimerID]uint64{}
	r.taken = map[int]string{}
	r.confAt = 0
	nodes, params := w.bootConfig(r)
	var svc service.Service = shService{r}
	if r.g.place {
		svc = pgService{r}
	}
	a, err := w.proto.New(automaton.Config{
		Self: r.m.id, Nodes: nodes, Params: params, Namespace: r.g.name,
		Service: svc, Rand: rand.New(rand.NewSource(w.rngNode.Int63())),
	})
	if err != nil {
		w.fail("creating %s replica of %s on %s: %v", w.cfg.Protocol, r.g.name, r.m.id, err)
		return
	}
	r.a = a
	recs := make(map[string][]byte, len(r.durable))
	for k, v := range r.durable {
		recs[k] = append([]byte(nil), v...)
	}
	w.carryOut(r, r.a.Step(automaton.Start{Records: recs}))
}

// deliver hands a peer message, client request or timer to its replica,
// through the machine's processor.
func (w *shWorld) deliver(e *shEvent) {
	m := w.machines[e.mach]
	if !m.up || m.inc != e.inc {
		if e.kind == shPeer {
			w.stats.Dropped++
		}
		return
	}
	if e.kind == shPeer && e.from >= 0 && !e.arrived && w.cut(e.from, e.mach) {
		w.stats.Dropped++
		return
	}
	if m.paused {
		e.arrived = true
		m.pausedQ = append(m.pausedQ, e)
		return
	}
	r := w.replicaOn(m, e.group)
	if e.kind == shPeer || e.kind == shTimer {
		if r = w.replicaFor(m, e); r == nil {
			return // its incarnation does not run here (shards_inc.go)
		}
	}
	if r == nil || r.a == nil {
		return
	}
	if e.kind == shTimer && r.timers[e.timer] != e.gen {
		return
	}
	if m.busy {
		e.arrived = true
		m.q = append(m.q, e)
		return
	}
	if e.kind == shClientReq && e.client >= 0 {
		w.countRequest(e.group, e.req)
	}
	var in automaton.Input
	var cost time.Duration
	switch e.kind {
	case shPeer:
		in = automaton.PeerMessage{From: w.machines[e.from].id, Msg: e.msg}
		if w.hasMsg {
			cost = w.msgCost.Sample(w.rngCPU)
		}
	case shClientReq:
		req := cloneRequest(e.req)
		req.Env = service.Env{Time: w.now.Nanoseconds(), Seed: w.rngNode.Uint64()}
		in = automaton.ClientRequest{Req: req}
		if w.hasOp {
			cost = w.opCost.Sample(w.rngCPU)
		}
	case shTimer:
		delete(r.timers, e.timer)
		in = automaton.TimerFired{ID: e.timer}
	}
	w.stats.Steps++
	r.applies = 0
	outs := r.a.Step(in)
	if w.hasApply {
		for i := 0; i < r.applies; i++ {
			cost += w.applyCost.Sample(w.rngCPU)
		}
	}
	w.charge(m, r, cost, outs)
}

// charge holds m's processor for cost, then carries out outs.
func (w *shWorld) charge(m *shMachine, r *shReplica, cost time.Duration, outs []automaton.Output) {
	if !w.cpuOn {
		w.carryOut(r, outs)
		return
	}
	m.busy, m.running, m.outs = true, r, outs
	m.busyTime += cost
	w.after(cost, &shEvent{kind: shCPUDone, mach: m.idx, inc: m.inc})
}

func (w *shWorld) onCPUDone(m *shMachine) {
	r, outs := m.running, m.outs
	m.busy, m.running, m.outs = false, nil, nil
	if r != nil && m.up && r.a != nil {
		w.carryOut(r, outs)
	}
	for !m.busy && len(m.q) > 0 && w.err == "" {
		e := m.q[0]
		m.q = m.q[1:]
		w.handle(e)
	}
}

// replicaOn is m's replica of group's current incarnation (nil: none).
func (w *shWorld) replicaOn(m *shMachine, group int) *shReplica {
	for _, r := range m.reps {
		if r.g.idx == group && r.incarn == r.g.incarn {
			return r
		}
	}
	return nil
}

func (w *shWorld) carryOut(r *shReplica, outs []automaton.Output) {
	io := shIO{r}
	for _, o := range outs {
		if err := r.rel.Output(o, io); err != nil {
			w.fail("%s on %s: %v", r.g.name, r.m.id, err)
			return
		}
	}
	if r.rel.Unsynced() && !r.m.fsyncing {
		w.startFsync(r.m)
	}
}

// ---- disk: one per machine, group commit across its replicas ----

func (w *shWorld) startFsync(m *shMachine) {
	m.fsyncing = true
	w.stats.Fsyncs++
	upto := make([]uint64, len(m.reps))
	for i, r := range m.reps {
		upto[i] = r.rel.Last()
	}
	reps := append([]*shReplica(nil), m.reps...)
	d := w.fsyncLat.Sample(w.rngDisk)
	if m.slow > 0 {
		d = durationTimes(d, m.slow)
	}
	w.after(d, &shEvent{kind: shFsync, mach: m.idx, inc: m.inc, upto: upto, reps: reps})
}

func (w *shWorld) onFsync(e *shEvent) {
	m := w.machines[e.mach]
	if !m.up || m.inc != e.inc {
		return
	}
	m.fsyncing = false
	again := false
	for i, r := range e.reps {
		if !slices.Contains(m.reps, r) {
			continue // a removed member's replica (its records go with it)
		}
		j := 0
		for ; j < len(r.buf) && r.buf[j].seq <= e.upto[i]; j++ {
			if p := r.buf[j].p; p.Delete {
				delete(r.durable, p.Key)
			} else {
				r.durable[p.Key] = p.Value
			}
		}
		r.buf = r.buf[j:]
		if m.paused {
			r.rel.Synced(e.upto[i]) // what waits leaves on resume
			continue
		}
		r.rel.Durable(e.upto[i], shIO{r})
		again = again || r.rel.Unsynced()
	}
	for _, r := range m.reps {
		again = again || !m.paused && r.a != nil && r.rel.Unsynced() // a replica added since the fsync began
	}
	if again && !m.fsyncing {
		w.startFsync(m)
	}
}

// ---- network ----

func (w *shWorld) send(r *shReplica, o automaton.Send) {
	to := r.g.index(o.To)
	if to < 0 {
		if r.g.known(o.To) {
			w.stats.Dropped++ // a removed member: its replica is gone
			return
		}
		w.fail("%s on %s sent to %s, not a member", r.g.name, r.m.id, o.To)
		return
	}
	w.stats.Msgs++
	dst := r.g.reps[to].m
	if w.cut(r.m.idx, dst.idx) || (w.loss > 0 && w.rngNet.Float64() < w.loss) {
		w.stats.Dropped++
		return
	}
	copies := 1
	if w.dup > 0 && w.rngNet.Float64() < w.dup {
		copies = 2
	}
	for i := 0; i < copies; i++ {
		d := w.lat.Sample(w.rngNet) + r.m.spike + dst.spike
		if w.reorder > 0 && w.rngNet.Float64() < w.reorder {
			d += w.reorderDelay.Sample(w.rngNet)
		}
		w.after(d, &shEvent{kind: shPeer, mach: dst.idx, from: r.m.idx, group: r.g.idx, inc: dst.inc, ginc: r.incarn, msg: append([]byte(nil), o.Msg...)})
	}
}

func (w *shWorld) cut(a, b int) bool { return w.machines[a].side != w.machines[b].side }

// ---- CPU-costed forwarding (plain clients) ----

// onForward: machine e.mach received a plain client's request for a group
// it hosts no replica of; it forwards it to a replica (a FwdCost step).
func (w *shWorld) onForward(e *shEvent) {
	m := w.machines[e.mach]
	if !m.up || m.inc != e.inc {
		return
	}
	if m.paused {
		m.pausedQ = append(m.pausedQ, e)
		return
	}
	if m.busy {
		m.q = append(m.q, e)
		return
	}
	w.stats.Forwarded++
	g := w.groupAt(e.group)
	dst := g.reps[w.rngNet.Intn(len(g.reps))].m
	if g.hint >= 0 {
		dst = g.reps[g.hint].m
	}
	next := &shEvent{kind: shClientReq, mach: dst.idx, group: g.idx, inc: dst.inc, client: e.client, attempt: e.attempt, req: e.req, fwd: m.idx}
	if !w.cpuOn || !w.hasFwd {
		w.after(w.lat.Sample(w.rngNet), next)
		return
	}
	cost := w.fwdCost.Sample(w.rngCPU)
	m.busy = true
	m.busyTime += cost
	w.after(cost, &shEvent{kind: shCPUDone, mach: m.idx, inc: m.inc})
	w.after(cost+w.lat.Sample(w.rngNet), next)
}

// ---- the service seen by each replica: the checks' window ----

// shService is KV as one replica applies it: every Apply passes the
// ownership invariant's check, and a broken group's guards admit what
// they should refuse.
type shService struct{ r *shReplica }

func (s shService) Name() string                      { return ServiceName }
func (s shService) Validate(op service.Op) error      { return s.r.w.kv.Validate(op) }
func (s shService) IsRead(op service.Op) bool         { return s.r.w.kv.IsRead(op) }
func (s shService) NewState() service.State           { return &shState{st: s.r.w.kv.NewState(), r: s.r} }
func (s shService) Nondeterministic() bool            { return false }
func (s *shState) Snapshot() []byte                   { return s.st.Snapshot() }
func (s *shState) Restore(b []byte) error             { return s.st.Restore(b) }
func (s *shState) Apply(op service.Op) service.Result { return s.ApplyEnv(op, service.Env{}) }

type shState struct {
	st service.State
	r  *shReplica
}

// allButImporting admits a slot in every state a source may have left it
// in: the broken variant's guard.
var allButImporting = []string{shard.StAbsent, shard.StOwned, shard.StMigrating, shard.StFrozen, shard.StHanded, shard.StGone}

func (s *shState) ApplyEnv(op service.Op, env service.Env) service.Result {
	r := s.r
	r.applies++
	orig := op
	if op.Kind == service.GuardKind && len(op.Args) == 2 && string(op.Args[0]) == "slot" && r.g.broke {
		switch string(op.Args[1]) {
		case shard.ModeRead, shard.ModeWrite:
			op = service.Op{Kind: op.Kind, Key: op.Key, Args: [][]byte{op.Args[0], []byte(shard.InMode(1<<62, allButImporting))}}
		}
	}
	if orig.Kind == service.GuardKind && len(orig.Args) == 2 && string(orig.Args[0]) == "slot" {
		// Every request of a group begins with its guards: a client's
		// (read, write, asking) or a driver's (in:, tok:).
		switch string(orig.Args[1]) {
		case shard.ModeRead, shard.ModeWrite, shard.ModeAsking:
			r.clientWrite = true
		default:
			r.clientWrite = false
		}
	}
	if r.g.born && r.clientWrite && clientWriteOp(r.w, orig) {
		// A group created by a split owns nothing at its birth: a client's
		// write must find its slot handed to it (owned) in its own log, or
		// being sent on from it (migrating).
		sl := shard.KeySlot(orig.Key)
		v := service.ApplyEnv(s.st, service.Op{Kind: "get", Key: shard.StateKey(sl)}, env)
		if st := shard.ParseState(v.Bytes).State; st != shard.StOwned && st != shard.StMigrating {
			r.w.violation("group %s (created by a split, owning nothing at its birth; replica on %s) applied a client's %s %s to slot %d, which its log holds %s: no slot was handed to it", r.g.name, r.m.id, orig.Kind, orig.Key, sl, st)
		}
	}
	res := service.ApplyEnv(s.st, op, env)
	r.w.observeApply(r, orig, res)
	return res
}

// clientWriteOp: op is a write of a client key (not a guard, not
// migration's own).
func clientWriteOp(w *shWorld, op service.Op) bool {
	return !shard.Reserved(op.Key) && op.Key != "" && !w.kv.IsRead(op) && op.Kind != "slotdirty" && op.Kind != "restore" && op.Kind != service.GuardKind
}

// observeApply is the invariant "no write accepted by a group that no
// longer owns its slot", checked at every Apply of every replica, in the
// replica's log order: once the replica has applied a state that takes
// the slot away from its group (frozen, handed, gone, importing), a
// client's write to a key of that slot must not follow, until a later
// state gives it back (owned, or migrating after a cancel).
func (w *shWorld) observeApply(r *shReplica, op service.Op, res service.Result) {
	if op.Kind == "set" && shard.Reserved(op.Key) && len(op.Args) > 0 {
		if sl, ok := slotOfStateKey(op.Key); ok {
			st := shard.ParseState(op.Args[0]).State
			switch st {
			case shard.StFrozen, shard.StHanded, shard.StGone, shard.StImporting:
				r.taken[sl] = st
			default:
				delete(r.taken, sl)
			}
		}
		return
	}
	if !clientWriteOp(w, op) || !r.clientWrite {
		return
	}
	sl := shard.KeySlot(op.Key)
	if st, ok := r.taken[sl]; ok {
		w.violation("group %s (replica on %s) applied a client's %s %s to slot %d after its log set the slot %s", r.g.name, r.m.id, op.Kind, op.Key, sl, st)
	}
}

func slotOfStateKey(k string) (int, bool) {
	rest, ok := cutPrefix(k, shard.ReservedPrefix+"slot:")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return s, false
}

// checkMap is the invariant "every slot owned by exactly one group in
// each configuration" of the current slot map.
func (w *shWorld) checkMap() string {
	if err := shard.Check(w.place.Groups); err != nil {
		return fmt.Sprintf("slot map epoch %d: %v", w.place.Epoch, err)
	}
	m := shard.Build(w.place.Groups)
	for sl, g := range m.Owner {
		if g < 0 || int(g) >= len(w.groups) {
			return fmt.Sprintf("slot map epoch %d: slot %d has no group", w.place.Epoch, sl)
		}
	}
	return ""
}
