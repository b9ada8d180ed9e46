package shard

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// The placement service's decisions (issue 33 item 2), as a pure function:
// Decide takes what the placement leader knows (the slot map, each group's
// members, leader, size and load, each node's liveness, whether a
// migration runs) and returns the one next thing to do, with its reason
// and the figures it was decided from. node/placer.go gathers the inputs
// on the placement leader, logs every decision in the placement namespace
// (dec/<ns>) and carries out splits and merges as slot migrations
// (Machine); the simulation test (placer_sim_test.go) drives the same
// function against model groups.
//
// Decisions, in the order Decide considers them (the first that applies is
// the answer):
//
//  1. Nothing while a migration runs: one migration at a time per
//     namespace, and the reports of the groups it moves between are in
//     flux.
//  2. Replace: a node down for more than DeadAfter seconds that is a member
//     of a group. Its replica is to be rebuilt on a live node that is in
//     no more groups than any other candidate and not in the group. First
//     because a group that lost a replica is one failure from losing its
//     quorum.
//  3. Split: a group over any split threshold (keys, bytes, ops/s) that
//     owns more than one slot. The upper half of its slots (by count, cut
//     at the median slot) moves to a spare group: one that owns no slots
//     (the cluster file may declare spare shards; a merge leaves one).
//     Decision: split into an existing spare group rather than create a
//     group: a node starts the groups the cluster file names at start, and
//     cannot yet start a replica group on chosen nodes at run time. Without
//     a spare group, the split is not made and the decision says so.
//     Slots are hashed, so half the slots is about half the keys and half
//     the uniform load; a single hot slot cannot be split (Redis Cluster's
//     limit too).
//  4. Merge: two groups both under every merge threshold for MergeDelay
//     seconds (ColdFor: a fresh cluster, empty, does not merge at once, nor
//     a group just split off; CockroachDB's by_load_merge_delay), whose sum stays
//     under half of each split threshold (so a merge never invites a
//     split back), while more than MinShards groups own slots. The colder
//     group's slots all move to the other (preferring one whose slots are
//     adjacent, so ranges stay few); the colder group becomes a spare.
//  5. Leader balance: a node leading at least two more groups than a live
//     member of one of them that leads fewer. Advice only: paxos has no
//     leadership transfer on request (protocol/paxos, doc), so the runtime
//     logs it and does not carry it out.
//
// After a split or a merge the runtime waits Cooldown seconds before the
// next one, so that the reports describe the new map.

// PlaceParams are the placement thresholds (node/placer.go: the namespace
// parameters placement.*; docs/SHARDING.md "Placement decisions").
type PlaceParams struct {
	SplitKeys  int64   // split a group holding more keys than this
	SplitBytes int64   // ... or more bytes (the keys' serialized values)
	SplitOps   float64 // ... or serving more requests per second
	MergeKeys  int64   // merge groups each under all three of these
	MergeBytes int64
	MergeOps   float64
	MinShards  int     // never merge below this many groups owning slots
	MergeDelay float64 // seconds both groups must have been cold before they merge
	DeadAfter  float64 // seconds a node may be down before its replicas are replaced
	Cooldown   float64 // seconds between a split or merge and the next
}

// DefaultPlaceParams are the defaults, with their reasons:
//   - SplitOps 2,500: CockroachDB's kv.range_split.load_qps_threshold.
//   - SplitBytes 512 MiB: CockroachDB's range_max_bytes; a group holds its
//     data in memory on each member, so the bound is a machine's share.
//   - SplitKeys 4,000,000: about what 512 MiB holds at ~128 bytes a key.
//   - Merge thresholds an eighth of the split ones (CockroachDB merges
//     below range_min_bytes, a quarter of its max; an eighth leaves more
//     room, since a merge here moves a whole group).
//   - MergeDelay 300 s: CockroachDB's kv.range_split.by_load_merge_delay
//     (5 minutes), so a load that pauses does not undo its split.
//   - DeadAfter 60 s: CockroachDB waits 5 minutes (server.time_until_store
//     _dead); a minute is long against a restart of a killed process and
//     short against an operator's reaction.
//   - Cooldown 30 s: several reports (every second) of the new map.
var DefaultPlaceParams = PlaceParams{
	SplitKeys: 4_000_000, SplitBytes: 512 << 20, SplitOps: 2500,
	MergeKeys: 500_000, MergeBytes: 64 << 20, MergeOps: 300,
	MinShards: 1, MergeDelay: 300, DeadAfter: 60, Cooldown: 30,
}

// GroupReport is what the placement leader knows of one group.
type GroupReport struct {
	Name    string
	Members []string // the group's nodes
	// Former members, removed by a replacement: never chosen to replace
	// one of this group's members (their old replica's state is stale,
	// and a protocol's member numbers are not reused).
	Former  []string
	Leader  string  // "" when unknown
	Keys    int64   // keys held (its leader's count)
	Bytes   int64   // bytes held (-1: unknown)
	Ops     float64 // client requests per second, over the last window
	Known   bool    // Keys/Bytes/Ops were reported (false: no decision uses them)
	ColdFor float64 // seconds it has been Cold without a break (the runtime keeps it)
}

// NodeReport is one node's liveness as the placement leader sees it.
type NodeReport struct {
	ID      string
	DownFor float64 // seconds since it was last reachable (0: up)
}

// PlaceInput is Decide's input.
type PlaceInput struct {
	Map       Placement
	Groups    []GroupReport // in the map's group order
	Nodes     []NodeReport
	Migrating bool    // a migration is under way
	SinceMove float64 // seconds since the last split or merge finished (<0: none yet)
}

// DecisionKind is the kind of a placement decision.
type DecisionKind int

// Decision kinds.
const (
	DecNone    DecisionKind = iota // nothing to do (Reason says why, when something was close)
	DecSplit                       // move Slots from group From to spare group To
	DecMerge                       // move all of From's Slots to To
	DecReplace                     // replace Node's replica of group From by one on With
	DecLeader                      // move group From's leadership from Node to With (a leadership transfer)
	DecBalance                     // move live Node's replica of group From to With (replica balance), as a replacement
)

var decNames = []string{"none", "split", "merge", "replace", "leader", "balance"}

func (k DecisionKind) String() string { return decNames[k] }

// Decision is Decide's answer.
type Decision struct {
	Kind       DecisionKind
	From, To   int // group indexes (To: split and merge)
	Slots      []Range
	Node, With string
	Reason     string // why, in words
	Inputs     string // the figures it was decided from
}

// String is the decision in one line (the decision log's form, less the
// time and the sequence).
func (d Decision) String() string {
	var b strings.Builder
	b.WriteString(d.Kind.String())
	switch d.Kind {
	case DecSplit, DecMerge:
		fmt.Fprintf(&b, " from=%d to=%d slots=%s", d.From, d.To, FormatSlots(d.Slots))
	case DecReplace, DecLeader, DecBalance:
		fmt.Fprintf(&b, " group=%d node=%s with=%s", d.From, d.Node, d.With)
	}
	fmt.Fprintf(&b, " reason=%q inputs=%q", d.Reason, d.Inputs)
	return b.String()
}

// brokenSplitCut is the broken variant the tests show caught: the split's
// slots run one past the cut group's last slot (an off-by-one), so the
// split moves a slot of another group.
var brokenSplitCut = false

// Decide returns the next placement decision.
func Decide(in PlaceInput, p PlaceParams) Decision {
	if in.Migrating {
		return Decision{Kind: DecNone, Reason: "a migration is under way"}
	}
	if d, ok := decideReplace(in, p); ok {
		return d
	}
	cool := in.SinceMove >= 0 && in.SinceMove < p.Cooldown
	if d, ok := decideSplit(in, p); ok {
		if cool {
			return Decision{Kind: DecNone, Reason: fmt.Sprintf("cooling down (%.0f s of %.0f since the last move) before: %s", in.SinceMove, p.Cooldown, d.Reason), Inputs: d.Inputs}
		}
		return d
	}
	if d, ok := decideMerge(in, p); ok && !cool {
		return d
	}
	if d, ok := decideBalance(in); ok {
		return d
	}
	if d, ok := decideLeader(in); ok {
		return d
	}
	return Decision{Kind: DecNone}
}

func owned(rs []Range) int {
	n := 0
	for _, r := range rs {
		n += r.Last - r.First + 1
	}
	return n
}

func (g GroupReport) figures() string {
	return fmt.Sprintf("%s keys=%d bytes=%d ops=%.0f", g.Name, g.Keys, g.Bytes, g.Ops)
}

// decideReplace finds a group member down longer than DeadAfter.
func decideReplace(in PlaceInput, p PlaceParams) (Decision, bool) {
	down := map[string]float64{}
	for _, n := range in.Nodes {
		down[n.ID] = n.DownFor
	}
	count := map[string]int{} // groups per node
	for _, g := range in.Groups {
		for _, m := range g.Members {
			count[m]++
		}
	}
	for gi, g := range in.Groups {
		if d, ok := replaceDead(gi, g, in.Nodes, down, count, p); ok {
			return d, true
		}
	}
	return Decision{}, false
}

// DecideGroupReplace is decideReplace for one group outside the slot map,
// the placement namespace itself (node/placer.go): a member of g down
// longer than DeadAfter is replaced by the live node outside g (never a
// former member) hosting the fewest replicas of all groups (g and others,
// every sharded namespace's). From and To are 0.
func DecideGroupReplace(g GroupReport, others []GroupReport, nodes []NodeReport, p PlaceParams) (Decision, bool) {
	down := map[string]float64{}
	for _, n := range nodes {
		down[n.ID] = n.DownFor
	}
	count := map[string]int{}
	for _, o := range append([]GroupReport{g}, others...) {
		for _, m := range o.Members {
			count[m]++
		}
	}
	return replaceDead(0, g, nodes, down, count, p)
}

// replaceDead is the replacement of group gi's first member down longer
// than DeadAfter, if any: by the live node outside the group, never a
// former member, in the fewest groups (count), the first by id on a tie.
func replaceDead(gi int, g GroupReport, nodes []NodeReport, down map[string]float64, count map[string]int, p PlaceParams) (Decision, bool) {
	for _, m := range g.Members {
		if down[m] <= p.DeadAfter {
			continue
		}
		d := Decision{Kind: DecReplace, From: gi, To: gi, Node: m,
			Inputs: fmt.Sprintf("%s down %.0f s (dead after %.0f s); %s members %s", m, down[m], p.DeadAfter, g.Name, strings.Join(g.Members, ","))}
		best := ""
		for _, n := range nodes {
			if n.DownFor > 0 || contains(g.Members, n.ID) || contains(g.Former, n.ID) {
				continue
			}
			if best == "" || count[n.ID] < count[best] || count[n.ID] == count[best] && n.ID < best {
				best = n.ID
			}
		}
		if best == "" {
			d.Kind = DecNone
			d.Reason = fmt.Sprintf("%s's replica on dead node %s cannot be replaced: every live node is already in the group", g.Name, m)
			return d, true
		}
		d.With = best
		d.Reason = fmt.Sprintf("node %s is down longer than %.0f s: its replica of %s is rebuilt on %s (in %d groups)", m, p.DeadAfter, g.Name, best, count[best])
		return d, true
	}
	return Decision{}, false
}

// decideBalance moves a replica from the live node hosting the most to
// the one hosting the fewest when they differ by 2 or more (TiKV's
// placement driver balances replica counts per store the same way; 2
// keeps a move from swinging the difference the other way). Only while
// every node is up: a down node's replicas are replacements' business. The
// replica moved is of the first group (in order) holding the busiest node
// and neither holding nor having removed the idlest.
func decideBalance(in PlaceInput) (Decision, bool) {
	count := map[string]int{}
	var ids []string
	for _, n := range in.Nodes {
		if n.DownFor > 0 {
			return Decision{}, false
		}
		count[n.ID] = 0
		ids = append(ids, n.ID)
	}
	for _, g := range in.Groups {
		for _, m := range g.Members {
			count[m]++
		}
	}
	if len(ids) == 0 {
		return Decision{}, false
	}
	sort.Strings(ids)
	most, least := ids[0], ids[0]
	for _, id := range ids {
		if count[id] > count[most] {
			most = id
		}
		if count[id] < count[least] {
			least = id
		}
	}
	if count[most] < count[least]+2 {
		return Decision{}, false
	}
	for gi, g := range in.Groups {
		if contains(g.Members, most) && !contains(g.Members, least) && !contains(g.Former, least) {
			return Decision{Kind: DecBalance, From: gi, To: gi, Node: most, With: least,
				Reason: fmt.Sprintf("%s hosts %d replicas, %s %d: %s's replica of %s moves to %s", most, count[most], least, count[least], most, g.Name, least),
				Inputs: fmt.Sprintf("replicas %s", leaderCounts(count))}, true
		}
	}
	return Decision{}, false
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// over says which split threshold g is over ("" when none), with the
// ratio by which the most exceeded one is exceeded.
func over(g GroupReport, p PlaceParams) (string, float64) {
	why, r := "", 0.0
	check := func(name string, v, lim float64) {
		if lim > 0 && v > lim && v/lim > r {
			why, r = fmt.Sprintf("%s %.0f over %.0f", name, v, lim), v/lim
		}
	}
	check("keys", float64(g.Keys), float64(p.SplitKeys))
	if g.Bytes >= 0 {
		check("bytes", float64(g.Bytes), float64(p.SplitBytes))
	}
	check("ops/s", g.Ops, p.SplitOps)
	return why, r
}

// upperHalf is the upper half of rs by slot count (the slots after its
// median slot).
func upperHalf(rs []Range) []Range {
	n := owned(rs)
	skip := n - n/2 // the lower half keeps the odd slot
	var out []Range
	for _, r := range rs {
		size := r.Last - r.First + 1
		if skip >= size {
			skip -= size
			continue
		}
		out = append(out, Range{r.First + skip, r.Last})
		skip = 0
	}
	if brokenSplitCut && len(out) > 0 && out[len(out)-1].Last < Slots-1 {
		out[len(out)-1].Last++
	}
	return out
}

func decideSplit(in PlaceInput, p PlaceParams) (Decision, bool) {
	hot, ratio, why := -1, 0.0, ""
	for gi, g := range in.Groups {
		if !g.Known || owned(in.Map.Groups[gi]) < 2 {
			continue
		}
		if w, r := over(g, p); w != "" && r > ratio {
			hot, ratio, why = gi, r, w
		}
	}
	if hot < 0 {
		return Decision{}, false
	}
	g := in.Groups[hot]
	d := Decision{Kind: DecSplit, From: hot, Inputs: g.figures()}
	spare := -1
	for gi := range in.Groups {
		if len(in.Map.Groups[gi]) == 0 && groupLive(in, gi) {
			spare = gi
			break
		}
	}
	if spare < 0 {
		d.Kind = DecNone
		d.Reason = fmt.Sprintf("%s should split (%s) but no spare group (one owning no slots, its members up) exists", g.Name, why)
		return d, true
	}
	d.To = spare
	d.Slots = upperHalf(in.Map.Groups[hot])
	d.Reason = fmt.Sprintf("%s: %s; the upper half of its slots moves to spare group %s", g.Name, why, in.Groups[spare].Name)
	return d, true
}

// groupLive reports whether every member of group gi is up.
func groupLive(in PlaceInput, gi int) bool {
	for _, n := range in.Nodes {
		if n.DownFor > 0 && contains(in.Groups[gi].Members, n.ID) {
			return false
		}
	}
	return true
}

// Cold reports whether g is under every merge threshold (now; merging
// also needs it to have been so for MergeDelay, GroupReport.ColdFor).
func Cold(g GroupReport, p PlaceParams) bool {
	return g.Known && g.Keys < p.MergeKeys && (g.Bytes < 0 || g.Bytes < p.MergeBytes) && g.Ops < p.MergeOps
}

func adjacent(a, b []Range) bool {
	for _, x := range a {
		for _, y := range b {
			if x.Last+1 == y.First || y.Last+1 == x.First {
				return true
			}
		}
	}
	return false
}

func decideMerge(in PlaceInput, p PlaceParams) (Decision, bool) {
	var owning []int
	for gi := range in.Groups {
		if len(in.Map.Groups[gi]) > 0 {
			owning = append(owning, gi)
		}
	}
	if len(owning) <= max(p.MinShards, 1) {
		return Decision{}, false
	}
	// The coldest group first (fewest ops/s, then keys); index breaks ties.
	order := append([]int(nil), owning...)
	sort.SliceStable(order, func(i, j int) bool {
		a, b := in.Groups[order[i]], in.Groups[order[j]]
		if a.Ops != b.Ops {
			return a.Ops < b.Ops
		}
		return a.Keys < b.Keys
	})
	for _, from := range order {
		f := in.Groups[from]
		if !Cold(f, p) || f.ColdFor < p.MergeDelay || !groupLive(in, from) {
			continue
		}
		to := -1
		for _, gi := range order {
			g := in.Groups[gi]
			if gi == from || !Cold(g, p) || g.ColdFor < p.MergeDelay || !groupLive(in, gi) {
				continue
			}
			sum := GroupReport{Keys: f.Keys + g.Keys, Bytes: f.Bytes + g.Bytes, Ops: f.Ops + g.Ops}
			if f.Bytes < 0 || g.Bytes < 0 {
				sum.Bytes = -1
			}
			if w, _ := over(sum, PlaceParams{SplitKeys: p.SplitKeys / 2, SplitBytes: p.SplitBytes / 2, SplitOps: p.SplitOps / 2}); w != "" {
				continue
			}
			if to < 0 || adjacent(in.Map.Groups[from], in.Map.Groups[gi]) && !adjacent(in.Map.Groups[from], in.Map.Groups[to]) {
				to = gi
			}
		}
		if to < 0 {
			continue
		}
		return Decision{Kind: DecMerge, From: from, To: to, Slots: append([]Range(nil), in.Map.Groups[from]...),
			Reason: fmt.Sprintf("%s and %s are both cold (under keys %d, bytes %d, ops/s %.0f): %s's slots move to %s, which becomes a spare", f.Name, in.Groups[to].Name, p.MergeKeys, p.MergeBytes, p.MergeOps, f.Name, in.Groups[to].Name),
			Inputs: f.figures() + "; " + in.Groups[to].figures()}, true
	}
	return Decision{}, false
}

func decideLeader(in PlaceInput) (Decision, bool) {
	leads := map[string]int{}
	up := map[string]bool{}
	for _, n := range in.Nodes {
		up[n.ID] = n.DownFor == 0
	}
	for _, g := range in.Groups {
		if g.Leader != "" {
			leads[g.Leader]++
		}
	}
	for gi, g := range in.Groups {
		if g.Leader == "" {
			continue
		}
		for _, m := range g.Members {
			if m != g.Leader && up[m] && leads[g.Leader] >= leads[m]+2 {
				return Decision{Kind: DecLeader, From: gi, To: gi, Node: g.Leader, With: m,
					Reason: fmt.Sprintf("%s leads %d groups, %s (a member of %s) %d: its leadership moves to %[3]s", g.Leader, leads[g.Leader], m, g.Name, leads[m]),
					Inputs: fmt.Sprintf("leaders %s", leaderCounts(leads))}, true
			}
		}
	}
	return Decision{}, false
}

func leaderCounts(m map[string]int) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	for i, k := range ks {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + ":" + strconv.Itoa(m[k]))
	}
	return b.String()
}
