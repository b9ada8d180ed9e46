package node

import (
	"strconv"
	"strings"
	"time"

	"github.com/synod-dev/synod/service"
)

// Requests spanning two groups, used by the placement (issue 33 item 2;
// session 49). Session 48 counted them per node (crossgroup.go: INFO
// crossgroup) but only showed them. Now:
//
//   - every node appends its pair counts to its load report (placer.go
//     reportLoad: hash load/<ns>, field <node id>): after the per-group
//     counts, "x<i>+<j>:<n>" for each pair of group indexes i < j it has
//     routed a request spanning (cumulative since it started; a node
//     that counted none appends nothing, so the report is as before). A
//     leader of an older version reads the extra fields past its groups
//     and ignores them;
//   - the placement leader turns them into requests per second per pair
//     as it does the groups' (the sum of the nodes' increments over the
//     elapsed time, smoothed by placeSmooth; a count that went down is a
//     node that restarted: its count is the increment) and passes them to
//     shard.Decide (PlaceInput.Pairs);
//   - Decide's merge prefers, as the colder group's partner, the cold
//     group it shares the most such requests with (then an adjacent one,
//     as before), and says so in the decision's reason.
//
// Decision (no seed covers it; CockroachDB and TiKV do not place by
// co-access): the pairs choose only among merges that are due anyway
// (both groups cold for merge_delay, their sum under half of each split
// threshold). Merged, a pair's requests are one group's atomic requests
// (no prepare and commit in two logs), so the choice only removes
// two-phase commits. Not done, and why: merging groups *because* they
// are used together (they are not cold) would undo splits made for load
// or size; and moving two groups' leaders onto one node does not make
// their two-phase commit local (the routing node coordinates it, and each
// group still logs its prepare and decision), so it would save no message
// on the commit path while constraining leader balance. A split's cut
// cannot use the pairs: they name groups, not slots.
type pairRates struct {
	prev   map[string]map[int]uint64 // per node, its pair counts at prevAt
	prevAt time.Time
	rate   []float64 // smoothed requests/s per pair index i*groups+j
}

// crossReport is the pair counts appended to this node's load report of
// s: " x<i>+<j>:<n>" per pair with a count ("" when none).
func (s *shardedNS) crossReport() string {
	c := s.cross
	if c == nil {
		return ""
	}
	ng := len(s.groups)
	var b strings.Builder
	for i := range ng {
		for j := i + 1; j < ng; j++ {
			if v := c.pairs[i*ng+j].Load(); v > 0 {
				b.WriteString(" x" + strconv.Itoa(i) + "+" + strconv.Itoa(j) + ":" + strconv.FormatUint(v, 10))
			}
		}
	}
	return b.String()
}

// parseLoad reads load/<ns>'s hash (HGETALL's answer): per node its group
// counts and its pair counts (by pair index i*groups+j).
func parseLoad(elems []service.Result, groups int) (map[string][]uint64, map[string]map[int]uint64) {
	cur := map[string][]uint64{}
	pairs := map[string]map[int]uint64{}
	for i := 0; i+1 < len(elems); i += 2 {
		id := string(elems[i].Bytes)
		var cs []uint64
		for _, f := range strings.Fields(string(elems[i+1].Bytes)) {
			if p, ok := strings.CutPrefix(f, "x"); ok {
				a, rest, ok1 := strings.Cut(p, "+")
				b, n, ok2 := strings.Cut(rest, ":")
				gi, e1 := strconv.Atoi(a)
				gj, e2 := strconv.Atoi(b)
				c, e3 := strconv.ParseUint(n, 10, 64)
				if ok1 && ok2 && e1 == nil && e2 == nil && e3 == nil && 0 <= gi && gi < gj && gj < groups {
					if pairs[id] == nil {
						pairs[id] = map[int]uint64{}
					}
					pairs[id][gi*groups+gj] = c
				}
				continue
			}
			c, _ := strconv.ParseUint(f, 10, 64)
			cs = append(cs, c)
		}
		cur[id] = cs
	}
	return cur, pairs
}

// update takes the nodes' pair counts read at now and returns the smoothed
// rates (nil until two reads were made, or when no pair was ever counted).
func (r *pairRates) update(cur map[string]map[int]uint64, now time.Time, groups int) []float64 {
	if len(r.rate) != groups*groups {
		r.rate, r.prev = make([]float64, groups*groups), nil
	}
	if r.prev != nil {
		dt := now.Sub(r.prevAt).Seconds()
		if dt <= 0 {
			return r.rates()
		}
		rate := make([]float64, len(r.rate))
		for id, cs := range cur {
			old := r.prev[id]
			for k, c := range cs {
				if was := old[k]; c >= was {
					rate[k] += float64(c-was) / dt
				} else {
					rate[k] += float64(c) / dt // the node restarted
				}
			}
		}
		for k := range r.rate {
			r.rate[k] = placeSmooth*rate[k] + (1-placeSmooth)*r.rate[k]
		}
	}
	r.prev, r.prevAt = cur, now
	return r.rates()
}

// rates is the smoothed rates, nil when all are zero.
func (r *pairRates) rates() []float64 {
	for _, x := range r.rate {
		if x > 0 {
			return r.rate
		}
	}
	return nil
}
