package node

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/synod-dev/synod/shard"
	"github.com/synod-dev/synod/shard/txn"
)

// Requests spanning groups (issue 33; session 48). A client request of a
// sharded namespace whose keys fall in two or more groups runs as a
// cross-shard transaction (txn.go: MULTI/EXEC, WATCH + MULTI/EXEC, the
// multi-key commands MSET, MGET, DEL... sent as one atomic group, a
// command such as RENAME or SMOVE over two groups (computed), an
// interactive transaction's COMMIT). Before session 48 such a request was
// counted nowhere but INFO transactions (by outcome, not by group): not in
// the placement's load per group or per slot, not by the groups it joined.
//
// Now the node that routes one (routeOnce) counts it:
//   - once in its namespace (crossCounts.requests; .computed for a
//     computed one), once at every group it spans (.byGroup) and once at
//     every pair of those groups (.pairs: which groups' keys are used
//     together, the co-location a merge or a hash tag would give);
//   - in the placement's load (placer.go countOps, slotload.go
//     countSlots) once at every group it spans and once at each of its
//     keys' slots, as a request of one group is: each participant runs
//     its prepare and its commit, so it is load there.
//
// Decided: counted per routing, as countOps counts a one-group request (a
// request routed again after a MOVED, or whose redirect the node follows,
// counts again); counted before its outcome is known (an attempt refused
// by a migration counts too; INFO transactions has the outcomes).
//
// Shown by INFO crossgroup (one line per namespace: requests, computed,
// and <g>+<h>=<n> per pair), INFO shards (cross=<n> per group), metrics
// synod_cross_group_requests_total{namespace,kind} and
// synod_cross_group_participations_total{namespace,group}, and `synod
// cluster status` (the CROSS column of the group table and a line per
// namespace, summed over the nodes).
type crossCounts struct {
	requests, computed atomic.Uint64
	byGroup            []atomic.Uint64 // per group index
	pairs              []atomic.Uint64 // [i*len(groups)+j], i < j
}

func newCrossCounts(groups int) *crossCounts {
	return &crossCounts{byGroup: make([]atomic.Uint64, groups), pairs: make([]atomic.Uint64, groups*groups)}
}

// countCross counts a request routed as a cross-shard transaction over
// parts (routeOnce): see the file comment.
// comp is a computed transaction's keys (nil: parts' operations name
// them).
func (s *shardedNS) countCross(parts []txn.Part, comp *computed) {
	c := s.cross
	c.requests.Add(1)
	if comp != nil {
		c.computed.Add(1)
	}
	var gs []int
	var sb slotBuf
	for i, p := range parts {
		if !containsInt(gs, p.Group) {
			gs = append(gs, p.Group)
		}
		if comp != nil {
			// A computed part's operations are guards and reads (DUMP,
			// PTTL) of its keys: count the keys once each.
			for _, k := range comp.keys[i] {
				sb.note(shard.KeySlot(k))
			}
			continue
		}
		for _, op := range p.Ops {
			for _, k := range opKeys(s.svc, op) {
				sb.note(shard.KeySlot(k))
			}
		}
	}
	sort.Ints(gs)
	ng := len(c.byGroup)
	for i, g := range gs {
		c.byGroup[g].Add(1)
		s.countOps(g) // placer.go
		for _, h := range gs[i+1:] {
			c.pairs[g*ng+h].Add(1)
		}
	}
	s.countSlots(&sb) // slotload.go
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// crossInfo is INFO crossgroup: per sharded namespace,
// "requests=N,computed=M,<g>+<h>=<n>..." (pairs with a count only).
func (n *Node) crossInfo() map[string]string {
	out := map[string]string{}
	for _, s := range n.shards {
		if s.cross == nil || len(s.groups) < 2 {
			continue
		}
		c := s.cross
		f := []string{fmt.Sprintf("requests=%d", c.requests.Load()), fmt.Sprintf("computed=%d", c.computed.Load())}
		ng := len(s.groups)
		for i := range ng {
			for j := i + 1; j < ng; j++ {
				if v := c.pairs[i*ng+j].Load(); v > 0 {
					f = append(f, fmt.Sprintf("%s+%s=%d", shardName(s, i), shardName(s, j), v))
				}
			}
		}
		out[s.ns.Name] = strings.Join(f, ",")
	}
	return out
}

// shardName is group gi's shard name (s0 of default#s0).
func shardName(s *shardedNS, gi int) string {
	name := s.groups[gi].Namespace.Name
	if _, sh, ok := strings.Cut(name, "#"); ok {
		return sh
	}
	return name
}

// registerCross exports the counts as metrics read at scrape time.
func (n *Node) registerCross() {
	for _, s := range n.shards {
		if s.cross == nil || len(s.groups) < 2 {
			continue
		}
		c := s.cross
		for kind, v := range map[string]*atomic.Uint64{"all": &c.requests, "computed": &c.computed} {
			l := prometheus.Labels{"node": string(n.id), "namespace": s.ns.Name, "kind": kind}
			n.m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "synod", Name: "cross_group_requests_total",
				Help: "Client requests of a sharded namespace this node routed as cross-shard transactions (keys in two or more groups), " +
					"all of them and those computed (one command over two groups)", ConstLabels: l}, func() float64 { return float64(v.Load()) }))
		}
		for gi := range s.groups {
			l := prometheus.Labels{"node": string(n.id), "namespace": s.ns.Name, "group": shardName(s, gi)}
			v := &c.byGroup[gi]
			n.m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "synod", Name: "cross_group_participations_total",
				Help: "Cross-shard transactions this node routed that had a part in the group", ConstLabels: l}, func() float64 { return float64(v.Load()) }))
		}
	}
}
