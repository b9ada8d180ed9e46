package node

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
)

// The placement service's decisions at run time (issue 33 item 2; the
// decision logic is the pure shard.Decide, placer.go there; the thresholds
// are the namespace's `placement:` block, config/placement.go).
//
// For each sharded namespace with a placement block:
//
//   - Every node counts the client requests it routes to each group
//     (routeOnce) and, once a second when they changed, writes its counts
//     to the placement namespace: hash load/<ns>, field <node id>, value
//     "c0 c1 ..." (cumulative since the node started); and per slot, its
//     busiest slots' rates (slotload.go: hash slotload/<ns>), by which the
//     leader cuts a split by load (PlaceInput.SlotOps).
//   - The placement leader, once a second, reads those counts and turns
//     them into each group's requests per second (the sum of the nodes'
//     increments over the elapsed time, smoothed: each second's rate
//     weighs placeSmooth); asks each group its keys and bytes (KV
//     slotstats, per slot near a size threshold (slotsize.go: by which
//     the leader cuts a split by size), one read in the group's log, every placeSizeEvery, and
//     every tick while a migration runs and the tick after); knows each group's leader
//     (leader gossip) and each node's liveness (its peer connection: a node
//     is down from the first tick its connection is down, counted from
//     when this node started leading); and calls shard.Decide.
//   - A decision that differs from the last one logged is appended to the
//     list dec/<ns> in the placement namespace (the last placeLogLen kept),
//     as "<seq> <unix ms> <decision> action=<what was done>" (seq: the
//     counter decseq/<ns>, so it runs on across leaders), counted in
//     synod_placement_decisions_total{namespace,kind}, and shown by CLUSTER
//     MIGRATION STATUS and `synod cluster status`.
//   - A split or a merge starts a slot migration (migrate.go) at the
//     block's rate, as an operator's CLUSTER MIGRATE would. A replacement
//     is carried out in steps by its own goroutine (replace.go: the new
//     node starts the group at run time, is added, the dead one removed,
//     the members recorded), no other decision being taken meanwhile; a
//     leader move is a leadership transfer the group's leader carries out
//     (replace.go transferLeader; paxos transfer.go).
//
// Decisions (no seed covers placement; CockroachDB and TiKV are the
// models): reports are polled by the leader rather than pushed to it, as
// the slot map is (slotmap.go), one write per node per second at most;
// the leader's figures are its own, recomputed by a new leader from
// scratch (its first rates are a second late, its liveness clock starts
// when it starts leading: a dead node is replaced at the earliest
// DeadAfter after a leader change, never sooner).

const (
	placeEvery  = time.Second
	placeSmooth = 0.5
	placeLogLen = 50
	// placeSizeEvery is how often the leader reads each group's size (KV
	// slotstats walks the group's keys: O(keys) in its loop).
	placeSizeEvery = 10 * time.Second
)

type groupSize struct {
	keys, bytes int64
	ok          bool
	at          time.Time
	slots       []slotSize // per slot, when read so (slotsize.go)
}

// placerState is the placement loop's state on this node.
type placerState struct {
	once      sync.Once
	decisions *prometheus.CounterVec
	groupOps  *prometheus.GaugeVec
	groupKeys *prometheus.GaugeVec
	// replaceSteps counts the steps of replacements carried out (replace.go).
	replaceSteps *prometheus.CounterVec
	// created counts groups created by splits (createSplit).
	created *prometheus.CounterVec

	mu   sync.Mutex
	byNS map[string]*nsPlacer
}

// nsPlacer is one namespace's placement state on this node.
type nsPlacer struct {
	reported string // the counts last written

	leading bool
	prev    map[string][]uint64 // node -> its counts at prevAt
	prevAt  time.Time
	ops     []float64   // smoothed requests per second per group
	coldAt  []time.Time // since when each group has been cold (zero: it is not)
	sizes   []groupSize // each group\'s last size read
	upAt    map[string]time.Time
	last    string    // the last decision logged (its identity)
	moveAt  time.Time // a split or merge started or ended (zero: none)
	wasMig  bool
	pairs   pairRates // requests spanning two groups, per second (placer_pairs.go)
	// replacing: a replacement is being carried out (replace.go); no
	// decision is taken meanwhile.
	replacing atomic.Bool
	redo      atomic.Bool // the last replacement failed: decide it again
	// passes counts the passes that reached a decision (shard.Decide or a
	// resumed replacement) on a members view just read (tests wait on it).
	passes atomic.Uint64
}

// countOps counts a client request routed to group gi of s (routeOnce).
func (s *shardedNS) countOps(gi int) {
	if s.ops != nil {
		s.ops[gi].Add(1)
	}
}

func (n *Node) placerFor(ns string) *nsPlacer {
	n.placer.mu.Lock()
	defer n.placer.mu.Unlock()
	if n.placer.byNS == nil {
		n.placer.byNS = map[string]*nsPlacer{}
	}
	p := n.placer.byNS[ns]
	if p == nil {
		p = &nsPlacer{}
		n.placer.byNS[ns] = p
	}
	return p
}

// placed lists the sharded namespaces with a placement block.
func (n *Node) placed() []*shardedNS {
	var out []*shardedNS
	for _, s := range n.shards {
		if s.ns.Placement != nil && s.ns.Name != config.PlacementName {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ns.Name < out[j].ns.Name })
	return out
}

// initPlacer makes the request counters of placed namespaces; called from
// initShards' caller before anything routes.
func (n *Node) initPlacer() {
	for _, s := range n.placed() {
		s.ops = make([]atomic.Uint64, len(s.groups))
		s.sl = &slotLoad{lastAt: time.Now().UnixNano()} // its first report counts from here
	}
}

// runPlacer is the placement loop: reports on every node, decisions on
// the placement leader.
func (n *Node) runPlacer() {
	defer n.bg.Done()
	ss := n.placed()
	if len(ss) == 0 {
		return
	}
	n.placer.once.Do(func() {
		lab := []string{"namespace", "kind"}
		cl := prometheus.Labels{"node": string(n.id)}
		n.placer.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "synod", Name: "placement_decisions_total",
			Help: "Placement decisions logged by this node as the placement leader, by kind (split, split-new-group, merge, replace, balance, leader, none with a reason)", ConstLabels: cl}, lab)
		g := []string{"namespace", "group"}
		n.placer.groupOps = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "synod", Name: "placement_group_ops",
			Help: "Client requests per second of each group, as the placement leader computes them (smoothed)", ConstLabels: cl}, g)
		n.placer.groupKeys = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "synod", Name: "placement_group_keys",
			Help: "Keys of each group, as the placement leader last read them", ConstLabels: cl}, g)
		n.placer.replaceSteps = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "synod", Name: "placement_replace_steps_total",
			Help: "Steps of replica replacements this node carried out as the placement leader (joining, added, removed, recorded, failed)", ConstLabels: cl}, []string{"namespace", "step"})
		n.placer.created = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "synod", Name: "placement_groups_created_total",
			Help: "Replica groups this node created as the placement leader, splitting a group into an unplaced shard", ConstLabels: cl}, []string{"namespace"})
		n.m.reg.MustRegister(n.placer.decisions, n.placer.groupOps, n.placer.groupKeys, n.placer.replaceSteps, n.placer.created)
	})
	t := time.NewTicker(placeEvery)
	defer t.Stop()
	for {
		select {
		case <-n.stopping:
			return
		case <-t.C:
		}
		for _, s := range ss {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			n.reportLoad(ctx, s)
			if n.leadsPlacement() {
				n.decide(ctx, s)
			} else {
				n.placerFor(s.ns.Name).leading = false
			}
			cancel()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		if n.leadsPlacement() {
			n.decidePlacementGroup(ctx, ss)
		} else {
			n.placerFor(config.PlacementName).leading = false
		}
		cancel()
	}
}

// reportLoad writes this node's request counts of s, when they changed.
func (n *Node) reportLoad(ctx context.Context, s *shardedNS) {
	n.reportSlotLoad(ctx, s, time.Now().UnixNano()) // slotload.go
	p := n.placerFor(s.ns.Name)
	cs := make([]string, len(s.ops))
	for i := range s.ops {
		cs[i] = strconv.FormatUint(s.ops[i].Load(), 10)
	}
	v := strings.Join(cs, " ") + s.crossReport() // placer_pairs.go
	if v == p.reported {
		return
	}
	if _, err := n.placementDo(ctx, kvOp("hset", "load/"+s.ns.Name, string(n.id), v)); err == nil {
		p.reported = v
	}
}

// decide gathers the inputs of shard.Decide for s, logs a new decision
// and carries it out.
func (n *Node) decide(ctx context.Context, s *shardedNS) {
	p := n.placerFor(s.ns.Name)
	now := time.Now()
	params, err := s.ns.Placement.Params()
	if err != nil {
		return // refused by validation
	}
	if !p.leading {
		// Starting to lead: liveness and rates from scratch.
		p.leading, p.prev, p.ops, p.upAt = true, nil, make([]float64, len(s.groups)), map[string]time.Time{}
		p.coldAt = make([]time.Time, len(s.groups))
	}
	nodes := n.liveness(p, now)
	// Load.
	rs, err := n.placementDo(ctx, kvOp("hgetall", "load/"+s.ns.Name))
	if err != nil {
		return
	}
	cur, pairCounts := parseLoad(rs[0].Elems, len(s.groups)) // placer_pairs.go
	if p.prev != nil {
		dt := now.Sub(p.prevAt).Seconds()
		rate := make([]float64, len(s.groups))
		for id, cs := range cur {
			old := p.prev[id]
			for gi := range rate {
				if gi >= len(cs) {
					break
				}
				var was uint64
				if gi < len(old) {
					was = old[gi]
				}
				if cs[gi] >= was {
					rate[gi] += float64(cs[gi]-was) / dt
				} else {
					rate[gi] += float64(cs[gi]) / dt // the node restarted
				}
			}
		}
		for gi := range rate {
			p.ops[gi] = placeSmooth*rate[gi] + (1-placeSmooth)*p.ops[gi]
		}
	}
	p.prev, p.prevAt = cur, now
	// Members: read again now, and decide on that read or not at all
	// (session 46, plmem46). Until its first successful placement read a
	// node's view of the groups' members is the cluster file's or its
	// stored copy (placemembers.go), and a decision taken on it (a balance
	// move at the first tick, when every node counts as up; a replacement
	// when the reads fail for dead_after) would write a members record
	// rebuilt from that stale view over a newer one. The writes are also
	// conditional on the version read (writeMembers).
	if err := n.pollPlacement(ctx, s); err != nil {
		n.log.Debug("placement decision skipped: the placement read failed", "namespace", s.ns.Name, "err", err)
		return
	}
	// Size, leader, members.
	view := s.view()
	if !view.memRead {
		return
	}
	in := shard.PlaceInput{Map: shard.Placement{Epoch: view.epoch, Groups: view.groups}, Nodes: nodes, Migrating: view.active(), SinceMove: -1}
	in.Pairs = p.pairs.update(pairCounts, now, len(s.groups)) // placer_pairs.go
	for gi, g := range s.groups {
		gr := shard.GroupReport{Name: g.Namespace.Name, Ops: p.ops[gi], Bytes: -1}
		for _, id := range s.membersIn(view, gi) {
			gr.Members = append(gr.Members, string(id))
		}
		if view.former != nil {
			for _, id := range view.former[gi] {
				gr.Former = append(gr.Former, string(id))
			}
		}
		// A group a split created, at its incarnation (placer_retire.go).
		gr.Name, gr.Created = s.nameIn(view, gi), len(g.Nodes) == 0
		if view.inc != nil {
			gr.Inc = view.inc[gi]
		}
		gr.Leader = string(n.hintOf(gr.Name))
		if l := n.loop(gr.Name); l != nil {
			if ld := l.leader.Load(); ld != nil {
				gr.Leader = string(*ld)
			}
		}
		if p.sizes == nil {
			p.sizes = make([]groupSize, len(s.groups))
		}
		if sz := &p.sizes[gi]; len(gr.Members) > 0 && (now.Sub(sz.at) >= placeSizeEvery || in.Migrating || p.wasMig) {
			// slotstats walks the group's keys: every placeSizeEvery, and
			// every tick around a migration (sizes change fast then).
			// Per slot for a group near a split by size (slotsize.go).
			sz.ok = false
			n.readSize(ctx, s, gi, sz, params, now)
		}
		gr.Keys, gr.Bytes, gr.Known = p.sizes[gi].keys, p.sizes[gi].bytes, p.sizes[gi].ok
		if gr.Known && shard.Cold(gr, params) && !in.Migrating {
			if p.coldAt[gi].IsZero() {
				p.coldAt[gi] = now
			}
			gr.ColdFor = now.Sub(p.coldAt[gi]).Seconds()
		} else {
			p.coldAt[gi] = time.Time{}
		}
		in.Groups = append(in.Groups, gr)
		n.placer.groupOps.WithLabelValues(s.ns.Name, g.Namespace.Name).Set(gr.Ops)
		if gr.Known {
			n.placer.groupKeys.WithLabelValues(s.ns.Name, g.Namespace.Name).Set(float64(gr.Keys))
		}
	}
	in.SlotOps = n.slotWeights(ctx, s, view.groups)                     // slotload.go
	in.SlotKeys, in.SlotBytes = slotSizeWeights(p.sizes, &view.m.Owner) // slotsize.go
	if p.wasMig && !in.Migrating {
		p.moveAt = now // the split or merge ended: cool down from here
	}
	p.wasMig = in.Migrating
	if !p.moveAt.IsZero() {
		in.SinceMove = now.Sub(p.moveAt).Seconds()
	}
	if p.replacing.Load() {
		return // one step at a time: the replacement's goroutine logs its steps
	}
	if p.redo.Swap(false) {
		p.last = ""
	}
	p.passes.Add(1)
	d, resume := resumeReplace(view) // replace.go
	if !resume {
		d = shard.Decide(in, params)
	}
	if d.Kind == shard.DecNone && (d.Reason == "" || in.Migrating) {
		p.last = ""
		return
	}
	id := fmt.Sprintf("%v %d %d %s %s %s", d.Kind, d.From, d.To, shard.FormatSlots(d.Slots), d.Node, d.With)
	if d.Kind == shard.DecNone {
		id += " " + firstWords(d.Reason, 2)
	}
	if id == p.last {
		return
	}
	p.last = id
	action := "none"
	switch d.Kind {
	case shard.DecSplit, shard.DecMerge:
		action = "migration started"
		if len(d.Create) > 0 {
			// A split into a new group: created, then migrated into, by
			// its own goroutine (createSplit); no decision meanwhile.
			action = "group creation started"
			p.moveAt = now
			p.replacing.Store(true)
			n.bg.Add(1)
			go n.createSplit(s, d, params)
			break
		}
		if err := n.startPlaced(ctx, s, d, params); err != nil {
			action = "refused: " + err.Error()
			p.last = "" // decide it again next time
		} else {
			p.moveAt = now
		}
	case shard.DecReplace, shard.DecBalance:
		action = "replacement started"
		p.replacing.Store(true)
		n.bg.Add(1)
		go n.replace(s, d, view) // replace.go
	case shard.DecRetire:
		action = "retired"
		if err := n.retireGroup(ctx, s, d, view); err != nil { // placer_retire.go
			action = "refused: " + err.Error()
			p.last = "" // decide it again next time
		}
	case shard.DecLeader:
		action = "leadership transfer requested"
		if err := n.transferLeader(ctx, s, d); err != nil {
			action = "refused: " + err.Error()
			p.last = "" // decide it again next time
		}
	}
	n.logDecision(ctx, s, p, d, action, now)
}

// logDecision appends decision d of s, and what was done, to the decision
// log dec/<ns> (under the next sequence number decseq/<ns>), and counts it;
// a decision not logged is decided again (p.last).
func (n *Node) logDecision(ctx context.Context, s *shardedNS, p *nsPlacer, d shard.Decision, action string, now time.Time) {
	rs, err := n.placementDo(ctx, kvOp("incr", "decseq/"+s.ns.Name, "1"))
	if err != nil {
		n.log.Debug("placement decision not logged", "namespace", s.ns.Name, "err", err)
		p.last = ""
		return
	}
	entry := fmt.Sprintf("%d %d %s action=%q", rs[0].Int, now.UnixMilli(), d, action)
	if _, err := n.placementDo(ctx, kvOp("rpush", "dec/"+s.ns.Name, entry), kvOp("ltrim", "dec/"+s.ns.Name, strconv.Itoa(-placeLogLen), "-1")); err != nil {
		p.last = ""
		return
	}
	kind := d.Kind.String()
	if len(d.Create) > 0 {
		kind = "split-new-group"
	}
	n.placer.decisions.WithLabelValues(s.ns.Name, kind).Inc()
	n.log.Info("placement decision", "namespace", s.ns.Name, "decision", d.String(), "action", action)
}

// liveness is each cluster node's time down as this node, leading the
// placement namespace, sees it: a node is down from the first tick its
// peer connection is down, counted in p from when p began leading.
func (n *Node) liveness(p *nsPlacer, now time.Time) []shard.NodeReport {
	st := map[automaton.NodeID]bool{}
	if n.tr != nil {
		for id, ps := range n.tr.Stats() {
			st[id] = ps.Connected
		}
	}
	var nodes []shard.NodeReport
	for _, m := range n.cfg.Nodes {
		id := automaton.NodeID(m.ID)
		if up, known := st[id]; id == n.id || !known || up {
			p.upAt[m.ID] = now
		} else if _, ok := p.upAt[m.ID]; !ok {
			p.upAt[m.ID] = now
		}
		nodes = append(nodes, shard.NodeReport{ID: m.ID, DownFor: now.Sub(p.upAt[m.ID]).Seconds()})
	}
	return nodes
}

// decidePlacementGroup replaces a dead member of the placement namespace
// itself (its leader, once a tick): a member down longer than the first
// placed namespace's dead_after is replaced by the live node outside it
// hosting the fewest replicas (shard.DecideGroupReplace), carried out with
// a data group's steps (replace.go: joining, added, removed, recorded, on
// the members record mem/#placement, which every node reads with its
// placement poll: slotmap.go pollPlacementMembers), and a replacement cut
// short is resumed first. The decisions and steps go to the log
// dec/#placement (CLUSTER MIGRATION STATUS shows its last entries). The
// leader adding and removing members of its own group is paxos's ordinary
// reconfiguration: the change is logged by the group it changes, and the
// leader, a member throughout (only the dead node leaves), keeps leading.
func (n *Node) decidePlacementGroup(ctx context.Context, ss []*shardedNS) {
	ps := n.shards[config.PlacementName]
	if ps == nil || len(ss) == 0 || !automaton.SupportsMembership(ps.ns.Protocol) {
		return
	}
	params, err := ss[0].ns.Placement.Params()
	if err != nil {
		return
	}
	p := n.placerFor(config.PlacementName)
	now := time.Now()
	if !p.leading {
		p.leading, p.upAt = true, map[string]time.Time{}
	}
	nodes := n.liveness(p, now)
	if p.replacing.Load() {
		return
	}
	// The members read again, as decide does.
	if err := n.pollPlacementMembers(ctx, ps); err != nil {
		return
	}
	v := ps.view()
	if !v.memRead {
		return
	}
	if p.redo.Swap(false) {
		p.last = ""
	}
	p.passes.Add(1)
	d, ok := resumeReplace(v) // replace.go
	if !ok {
		g := shard.GroupReport{Name: ps.ns.Name}
		for _, id := range ps.membersIn(v, 0) {
			g.Members = append(g.Members, string(id))
		}
		if v.former != nil {
			for _, id := range v.former[0] {
				g.Former = append(g.Former, string(id))
			}
		}
		var others []shard.GroupReport
		for _, s := range n.shards {
			if s == ps {
				continue
			}
			for gi := range s.groups {
				var o shard.GroupReport
				for _, id := range s.members(gi) {
					o.Members = append(o.Members, string(id))
				}
				others = append(others, o)
			}
		}
		d, ok = shard.DecideGroupReplace(g, others, nodes, params)
	}
	if !ok {
		p.last = ""
		return
	}
	id := fmt.Sprintf("%v %s %s %s", d.Kind, d.Node, d.With, firstWords(d.Reason, 2))
	if id == p.last {
		return
	}
	p.last = id
	action := "none"
	if d.Kind == shard.DecReplace {
		action = "replacement started"
		p.replacing.Store(true)
		n.bg.Add(1)
		go n.replace(ps, d, v) // replace.go
	}
	n.logDecision(ctx, ps, p, d, action, now)
}

func firstWords(s string, k int) string {
	f := strings.Fields(s)
	if len(f) > k {
		f = f[:k]
	}
	return strings.Join(f, " ")
}

// startPlaced starts the migration a split or merge decided.
func (n *Node) startPlaced(ctx context.Context, s *shardedNS, d shard.Decision, params shard.PlaceParams) error {
	rec, ver, err := n.readMigration(ctx, s)
	if err != nil {
		return err
	}
	rate := s.ns.Placement.Rate
	if rate <= 0 {
		rate = config.DefaultPlacementRate
	}
	short := func(gi int) string {
		_, sh, _ := strings.Cut(s.groups[gi].Namespace.Name, config.GroupSep)
		return sh
	}
	_, err = n.startMigration(ctx, s, rec, ver, []string{short(d.From), short(d.To), shard.FormatSlots(d.Slots), "rate", strconv.FormatFloat(rate, 'f', -1, 64)})
	return err
}

// placementLog is the decision log's last entries, for CLUSTER MIGRATION
// STATUS: one "decision: ..." line each, oldest first.
func (n *Node) placementLog(ctx context.Context, s *shardedNS, last int) string {
	if s.ns.Placement == nil {
		return ""
	}
	rs, err := n.placementDo(ctx, kvOp("lrange", "dec/"+s.ns.Name, strconv.Itoa(-last), "-1"))
	if err != nil {
		return fmt.Sprintf("decisions: unknown (%v)\n", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "placement: on\n")
	for _, e := range rs[0].Elems {
		fmt.Fprintf(&b, "decision: %s\n", e.Bytes)
	}
	// The placement namespace's own replacements (decidePlacementGroup).
	if rs, err := n.placementDo(ctx, kvOp("lrange", "dec/"+config.PlacementName, strconv.Itoa(-last), "-1")); err == nil {
		for _, e := range rs[0].Elems {
			fmt.Fprintf(&b, "placement group decision: %s\n", e.Bytes)
		}
	}
	return b.String()
}

// createWait bounds a new group's creation: its nodes read the members
// record at their next placement poll (placementPoll), start the group
// and elect a leader.
const createWait = 30 * time.Second

// createSplit carries out a split into a new group (shard.Decide's
// Decision.Create; its own goroutine, no other decision meanwhile), in
// steps logged as "step <name> group=G ..." in dec/<ns> and counted in
// synod_placement_replace_steps_total{namespace,step}:
//
//  1. created: the members record mem/<ns> names the chosen nodes as the
//     unplaced group's members and bootstrap configuration ("^"); each of
//     them starts the group at its next placement poll (groups.go
//     hostGroups: a fresh paxos group of those nodes, or from its own
//     records after a restart). The group owns no slot yet: no routing
//     names it, and the slot map is not touched.
//  2. ready: the group answers a read through its log (slotstats).
//  3. the split's migration starts (startPlaced), like a split into a
//     spare: the map names the new group only at the migration's flip,
//     after the source froze the slots and handed them over.
//
// Cut short after step 1 (the placement leader died, a step failed), the
// group stays created, with members and no slots, until the next decision
// retires it (session 49: a created group that owns nothing is retired,
// placer_retire.go) and a later split creates its next incarnation. A
// record naming members for the group already is not overwritten. The
// group is created at the record's incarnation for it (groups.go).
func (n *Node) createSplit(s *shardedNS, d shard.Decision, params shard.PlaceParams) {
	defer n.bg.Done()
	p := n.placerFor(s.ns.Name)
	defer p.replacing.Store(false)
	tctx, tcancel := context.WithTimeout(context.Background(), createWait+10*time.Second)
	defer tcancel()
	ctx, cancel := n.untilStop(tctx)
	defer cancel()
	if err := n.createSteps(ctx, s, d, params); err != nil {
		n.replaceStep(ctx, s, d, "failed", err.Error())
		n.log.Warn("placement split into a new group failed; it will be decided again", "namespace", s.ns.Name, "decision", d.String(), "err", err)
		p.redo.Store(true)
	}
}

func (n *Node) createSteps(ctx context.Context, s *shardedNS, d shard.Decision, params shard.PlaceParams) error {
	gi := d.To
	name := s.groups[gi].Namespace.Name
	if err := n.pollPlacement(ctx, s); err != nil {
		return err
	}
	v := s.view()
	name = s.nameIn(v, gi) // its incarnation's name (groups.go)
	if !v.memRead {
		return fmt.Errorf("group %s: the members record was not read", name)
	}
	if len(s.membersIn(v, gi)) == 0 {
		var ids []automaton.NodeID
		for _, id := range d.Create {
			ids = append(ids, automaton.NodeID(id))
		}
		mem := make([][]automaton.NodeID, len(s.groups))
		boot := make([][]automaton.NodeID, len(s.groups))
		for i := range s.groups {
			mem[i] = slices.Clone(s.membersIn(v, i))
			if v.boot != nil {
				boot[i] = v.boot[i]
			}
		}
		mem[gi], boot[gi] = ids, ids
		var former [][]automaton.NodeID
		if v.former != nil {
			former = v.former
		}
		rec := formatMembersRecord(mem, nil, v.leaving, former, boot, v.inc)
		if _, err := n.writeMembers(ctx, s, v.memVer, rec); err != nil {
			return fmt.Errorf("recording group %s's members: %w", name, err)
		}
		n.nudgePlacement()
		n.placer.created.WithLabelValues(s.ns.Name).Inc()
		n.replaceStep(ctx, s, d, "created", fmt.Sprintf("group %s on %s (members %s)", name, strings.Join(d.Create, ","), rec))
	}
	// 2. ready: a read through the new group's log.
	for {
		_ = n.pollPlacement(ctx, s)
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		res, err := n.groupDo(rctx, s, gi, []service.Op{{Kind: "slotstats"}})
		rcancel()
		if err == nil && len(res) == 1 && !res[0].IsErr() {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("group %s did not answer after its creation: %v", name, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	n.replaceStep(ctx, s, d, "ready", fmt.Sprintf("group %s answers", name))
	// 3. the migration.
	if err := n.startPlaced(ctx, s, d, params); err != nil {
		return fmt.Errorf("starting the split's migration: %w", err)
	}
	n.replaceStep(ctx, s, d, "migrating", fmt.Sprintf("slots %s from %s to %s", shard.FormatSlots(d.Slots), s.groups[d.From].Namespace.Name, name))
	return nil
}
