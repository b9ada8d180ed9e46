package node

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/synod-dev/synod/shard"
)

// Per-slot load (issue 33 item 2; split46, session 46), so that a live
// split by load cuts where the load divides (shard.Decide's cut by
// PlaceInput.SlotOps) rather than at the median slot.
//
//   - Every node counts the client requests it routes (routeOnce) per hash
//     slot, one at each key's slot (a multi-key request's keys are all in
//     one group; split47: session 46 counted only the first key's), the
//     slots noted as route hashes the keys (slotBuf, on the stack), at
//     most slotCountKeys counters per request (a request with more keys
//     spreads its count over its first slotCountKeys keys' slots), in
//     16,384 counters per placed namespace (128 KiB: an atomic add per
//     key beside the per-group one per request). A cross-group request
//     (txn.go) is counted at neither, as before.
//   - Once a second (runPlacer's tick) it turns them into smoothed rates
//     per slot (each second's count weighs placeSmooth) and, while any rate
//     is not zero, writes a bounded summary to the placement namespace:
//     hash slotload/<ns>, field <node id>, value "<seq> <slot>:<rate> ...",
//     its slotLoadTop busiest slots (rates in requests/s, two decimals; a
//     rate under slotLoadMin is left out), seq counting its writes, then
//     "g<group>:<rate> ..." for each group (by its index in the map this
//     node routes by) the summed rate of its other slots, where not zero.
//   - The placement leader reads the hash once a second (one request
//     beside load/<ns>'s) and builds each slot's weight: the sum of the
//     nodes' reported rates; a group's reported rest is spread evenly over
//     its slots no node named. (The rest is the node's own, from the same
//     smoothed rates: a first version took it as the group's requests/s
//     from load/<ns> less the named slots' sum, two figures smoothed in
//     different windows, and the excess spread over the group's cold
//     slots moved the cut off the load's middle, 2 runs in 140 of
//     TestPlacementSplitCutsByLoad.) A report whose seq has not changed for
//     slotLoadStale ticks of the leader is left out (its node is down or
//     idle: a node that stops writing leaves its last summary in the hash).
//     With no report at all the weights are nil and the cut is the median.
//
// Why a top-k rather than every slot or a histogram: 16,384 rates per node
// per second (about 150 KiB written into the placement log per node per
// second, times the nodes, times the namespaces) would make the placement
// namespace's log the cluster's busiest; a histogram over fixed slot
// ranges mixes groups whenever a group owns fewer slots than a bucket
// (1,000 groups own 16 slots each), so it cannot say where a group's load
// divides. A skew worth a cut by load is a few hot slots (keys are hashed,
// so a load spread over many keys spreads over many slots); the top 128
// name them exactly, and a load spread evenly is cut at about the median by
// the evenly spread remainder, as before. Bounded: slotLoadTop*16 bytes
// per node per namespace per second, plus one figure per group whose load
// on the node is not all in its top slots (with 1,000 groups all loaded,
// about 16 KiB: still an eighth of every slot's). Where it is coarse: a load over more than slotLoadTop
// slots of one group, unevenly; its remainder is spread as if even.
const (
	slotLoadTop   = 128
	slotLoadMin   = 0.05
	slotLoadStale = 5
)

// slotLoad is a placed namespace's per-slot counting (every node) and the
// leader's view of the reports.
type slotLoad struct {
	count [shard.Slots]atomic.Uint64 // requests routed, cumulative

	// This node's reporting state (the placement loop's goroutine only).
	last     [shard.Slots]uint64
	rate     [shard.Slots]float64
	seq      uint64
	reported string
	lastAt   int64 // unix nanos of the last rates update (0: none; initPlacer sets it, so the first report has rates)

	// The leader's view (the placement loop's goroutine only): per node,
	// its last seq and the ticks it has been unchanged.
	seen map[string]*slotSeen
}

type slotSeen struct {
	seq   string
	still int
}

// slotCountKeys bounds the keys of one request counted one by one: a
// request with more has its count spread over the slots of its first
// slotCountKeys keys.
const slotCountKeys = 32

// slotBuf is the slots of a request's keys as route saw them (routeOnce's
// stack): the first slotCountKeys, and how many keys there were.
type slotBuf struct {
	n    int
	slot [slotCountKeys]uint16
}

// note adds a key's slot (nothing on a nil slotBuf).
func (b *slotBuf) note(slot int) {
	if b == nil {
		return
	}
	if b.n < slotCountKeys {
		b.slot[b.n] = uint16(slot)
	}
	b.n++
}

// countSlots counts a routed request at each of its keys' slots
// (routeOnce, with countOps): n keys add n in all, one at each key's slot
// for up to slotCountKeys keys; past that, n spread over the first
// slotCountKeys keys' slots (split47: before, only the first key's slot
// counted, so an MSET or MULTI over several slots of one group weighed
// one slot, once).
func (s *shardedNS) countSlots(b *slotBuf) {
	if s.sl == nil || b.n == 0 {
		return
	}
	m := min(b.n, slotCountKeys)
	each, extra := b.n/m, b.n%m
	for i, sl := range b.slot[:m] {
		c := uint64(each)
		if i < extra {
			c++
		}
		s.sl.count[sl].Add(c)
	}
}

// slotSummary updates the smoothed per-slot rates with the counts since
// the last call (dt seconds ago; 0: the first call, which only takes the
// counts) and returns the summary to report ("" when every rate is zero).
func (sl *slotLoad) slotSummary(dt float64, owner *[shard.Slots]int16) string {
	type hot struct {
		slot int
		r    float64
	}
	var top []hot
	for i := range sl.count {
		c := sl.count[i].Load()
		if dt > 0 {
			r := placeSmooth*float64(c-sl.last[i])/dt + (1-placeSmooth)*sl.rate[i]
			if r < slotLoadMin/10 {
				r = 0
			}
			sl.rate[i] = r
		}
		sl.last[i] = c
		if sl.rate[i] >= slotLoadMin {
			top = append(top, hot{i, sl.rate[i]})
		}
	}
	if len(top) == 0 {
		return ""
	}
	sort.Slice(top, func(i, j int) bool {
		if top[i].r != top[j].r {
			return top[i].r > top[j].r
		}
		return top[i].slot < top[j].slot
	})
	rest := map[int]float64{} // group -> the rate of its slots past the top
	if len(top) > slotLoadTop {
		for _, h := range top[slotLoadTop:] {
			if g := owner[h.slot]; g >= 0 {
				rest[int(g)] += h.r
			}
		}
		top = top[:slotLoadTop]
	}
	sort.Slice(top, func(i, j int) bool { return top[i].slot < top[j].slot })
	var b strings.Builder
	for _, h := range top {
		fmt.Fprintf(&b, " %d:%.2f", h.slot, h.r)
	}
	gs := make([]int, 0, len(rest))
	for g := range rest {
		gs = append(gs, g)
	}
	sort.Ints(gs)
	for _, g := range gs {
		fmt.Fprintf(&b, " g%d:%.2f", g, rest[g])
	}
	return b.String()
}

// reportSlotLoad writes this node's per-slot summary of s (reportLoad's
// tick), while it has load and once when it falls to none.
func (n *Node) reportSlotLoad(ctx context.Context, s *shardedNS, nowNanos int64) {
	sl := s.sl
	if sl == nil {
		return
	}
	dt := 0.0
	if sl.lastAt != 0 {
		dt = float64(nowNanos-sl.lastAt) / 1e9
	}
	sl.lastAt = nowNanos
	sum := sl.slotSummary(dt, &s.view().m.Owner)
	if sum == "" && sl.reported == "" {
		return
	}
	sl.seq++
	if _, err := n.placementDo(ctx, kvOp("hset", "slotload/"+s.ns.Name, string(n.id), strconv.FormatUint(sl.seq, 10)+sum)); err == nil {
		sl.reported = sum
	}
}

// slotWeights reads the nodes' summaries of s (the placement leader, once
// a tick) and returns each slot's weight for shard.Decide's cut
// (PlaceInput.SlotOps), given the map's groups and each group's smoothed
// requests/s; nil when no node reported a slot.
func (n *Node) slotWeights(ctx context.Context, s *shardedNS, groups [][]shard.Range) []float64 {
	sl := s.sl
	if sl == nil {
		return nil
	}
	rs, err := n.placementDo(ctx, kvOp("hgetall", "slotload/"+s.ns.Name))
	if err != nil {
		return nil
	}
	if sl.seen == nil {
		sl.seen = map[string]*slotSeen{}
	}
	var reports []string
	for i := 0; i+1 < len(rs[0].Elems); i += 2 {
		id, v := string(rs[0].Elems[i].Bytes), string(rs[0].Elems[i+1].Bytes)
		seq, rest, _ := strings.Cut(v, " ")
		st := sl.seen[id]
		if st == nil {
			st = &slotSeen{seq: seq}
			sl.seen[id] = st
		} else if st.seq == seq {
			st.still++
		} else {
			st.seq, st.still = seq, 0
		}
		if st.still < slotLoadStale {
			reports = append(reports, rest)
		}
	}
	return combineSlotLoad(reports, groups)
}

// combineSlotLoad is slotWeights' arithmetic: the sum of the reports'
// rates per slot, and each group's reported rest spread evenly over its
// slots no report names; nil when no report names a slot.
func combineSlotLoad(reports []string, groups [][]shard.Range) []float64 {
	w := make([]float64, shard.Slots)
	named := make([]bool, shard.Slots)
	rests := make([]float64, len(groups))
	found := false
	for _, r := range reports {
		for _, f := range strings.Fields(r) {
			a, b, ok := strings.Cut(f, ":")
			if !ok {
				continue
			}
			rate, err := strconv.ParseFloat(b, 64)
			if err != nil || rate < 0 {
				continue
			}
			if g, isRest := strings.CutPrefix(a, "g"); isRest {
				if gi, err := strconv.Atoi(g); err == nil && gi >= 0 && gi < len(rests) {
					rests[gi] += rate
				}
				continue
			}
			slot, err := strconv.Atoi(a)
			if err != nil || slot < 0 || slot >= shard.Slots {
				continue
			}
			w[slot] += rate
			named[slot], found = true, true
		}
	}
	if !found {
		return nil
	}
	for gi, g := range groups {
		unnamed := 0
		for _, r := range g {
			for sl := r.First; sl <= r.Last; sl++ {
				if !named[sl] {
					unnamed++
				}
			}
		}
		if left := rests[gi]; left > 0 && unnamed > 0 {
			each := left / float64(unnamed)
			for _, r := range g {
				for sl := r.First; sl <= r.Last; sl++ {
					if !named[sl] {
						w[sl] = each
					}
				}
			}
		}
	}
	return w
}
