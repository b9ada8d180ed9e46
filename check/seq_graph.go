package check

import (
	"fmt"
	"strings"

	"github.com/synod-dev/synod/history"
)

// The constraint graph of the sequential-consistency search (see the
// algorithm in sequential.go's package comment, "Constraint graph").
//
// Nodes are the operations that take effect in every valid order: every
// operation that is not floating, and every floating SET whose value some
// read returns (the value is written by one operation only, so a valid order
// must apply it). Edges are orders that every valid total order obeys:
//
//   - program order between consecutive non-floating operations of a
//     process, and from a floating SET's predecessor to it;
//   - reads-from: the only writer of a value before every read returning it;
//   - coherence, derived to a fixpoint over the transitive closure: for a
//     read r of key x returning w's value and another landing write w' of x,
//     w' before r implies w' before w, and w before w' implies r before w'
//     (nothing may overwrite x between w and r).
//
// A cycle proves the history is not sequentially consistent. Otherwise the
// search places an operation only once all its predecessors are placed,
// which cuts every branch that would violate an edge before it is explored.

// scMaxGraph bounds the operations the constraint graph is built for: its
// transitive closure takes n²/8 bytes (32 MiB at the bound). Larger
// histories are searched without it.
const scMaxGraph = 16384

type bitset []uint64

func (b bitset) has(i int) bool { return b[i>>6]&(1<<(uint(i)&63)) != 0 }
func (b bitset) add(i int)      { b[i>>6] |= 1 << (uint(i) & 63) }

// scRead is a read whose value has exactly one writer.
type scRead struct{ r, w int }

// buildGraph builds the constraint graph over s.procs (register operations
// only: s.prune). It returns a description of a violation when the
// constraints alone prove the history not sequentially consistent.
func (s *scSearch) buildGraph(h *history.History) (violation string) {
	if !s.prune || s.total > scMaxGraph {
		return ""
	}
	all := s.all // by id (intern)
	n := len(all)
	// Writers of each read value (real values: abstractUnread leaves read
	// ones alone).
	writers := map[string][]int{}
	for _, o := range all {
		if o.in.kind == "set" {
			if len(o.in.args) != 1 {
				return "" // SET NX/XX may not write: no graph
			}
			writers[pair(o.key, o.in.args[0])] = append(writers[pair(o.key, o.in.args[0])], o.id)
		}
	}
	node := make([]bool, n)
	var reads []scRead
	for _, o := range all {
		if o.in.kind == "get" && o.res.Type == "bytes" {
			ws := writers[pair(o.key, o.res.Bytes)]
			switch len(ws) {
			case 0:
				return fmt.Sprintf("%s returns a value that no operation of the history writes",
					s.describe(h, o))
			case 1:
				reads = append(reads, scRead{r: o.id, w: ws[0]})
				node[ws[0]] = true // a floating writer must land
			}
		}
		if !o.float {
			node[o.id] = true
		}
	}
	succ := make([][]int32, n)
	edge := func(a, b int) { succ[a] = append(succ[a], int32(b)) }
	for pi := range s.procs {
		prev := -1
		for j := range s.procs[pi] {
			o := &s.procs[pi][j]
			if prev >= 0 && node[o.id] {
				edge(prev, o.id)
			}
			if !o.float {
				prev = o.id
			}
		}
	}
	for _, rd := range reads {
		edge(rd.w, rd.r)
	}
	// Landing writes of each key, for coherence; every set and delete
	// (landing or maybe), and the reads of absence and presence.
	keyWrites, sets, dels := map[string][]int{}, map[string][]int{}, map[string][]int{}
	var absentReads, presentReads []int
	for _, o := range all {
		switch o.in.kind {
		case "set":
			sets[o.key] = append(sets[o.key], o.id)
		case "del":
			dels[o.key] = append(dels[o.key], o.id)
		case "get":
			if o.res.Type == "nil" {
				absentReads = append(absentReads, o.id)
			}
		case "exists":
			if o.res.Int == 0 {
				absentReads = append(absentReads, o.id)
			} else {
				presentReads = append(presentReads, o.id)
			}
		}
		if node[o.id] && (o.in.kind == "set" || o.in.kind == "del") {
			keyWrites[o.key] = append(keyWrites[o.key], o.id)
		}
	}
	words := (n + 63) / 64
	reach := make([]bitset, n)
	buf := make([]uint64, n*words)
	for i := range reach {
		reach[i] = buf[i*words : (i+1)*words]
	}
	for {
		order, cyc := topoOrder(succ, node)
		if cyc != nil {
			var b strings.Builder
			b.WriteString("the operations ")
			for i, id := range cyc {
				if i > 0 {
					b.WriteString(" → ")
				}
				b.WriteString(s.describe(h, all[id]))
			}
			b.WriteString(" must each precede the next (program order, reads-from and coherence) and the last the first: a cycle")
			return b.String()
		}
		clear(buf)
		for i := len(order) - 1; i >= 0; i-- {
			v := order[i]
			for _, t := range succ[v] {
				reach[v].add(int(t))
				for w, x := range reach[t] {
					reach[v][w] |= x
				}
			}
		}
		added := false
		for _, rd := range reads {
			x := all[rd.r].key
			for _, w2 := range keyWrites[x] {
				if w2 == rd.w {
					continue
				}
				if reach[w2].has(rd.r) && !reach[w2].has(rd.w) {
					edge(w2, rd.w)
					reach[w2].add(rd.w) // enough to avoid duplicates this round
					added = true
				}
				if reach[rd.w].has(w2) && !reach[rd.r].has(w2) {
					edge(rd.r, w2)
					reach[rd.r].add(w2)
					added = true
				}
			}
		}
		// A read of absence r after a landing set w needs a delete
		// between them; a read of presence after a landing delete needs
		// a set between them. When only one landing candidate remains,
		// it is ordered between the two; when none remains, r cannot be.
		between := func(r int, before, fill map[string][]int) string {
			x := all[r].key
			for _, w := range before[x] {
				if !node[w] || !reach[w].has(r) {
					continue
				}
				only, count := -1, 0
				for _, d := range fill[x] {
					if !reach[d].has(w) && !reach[r].has(d) {
						only = d
						count++
					}
				}
				switch {
				case count == 0:
					return fmt.Sprintf("%s must follow %s, and no operation that could come between them undoes it",
						s.describe(h, all[r]), s.describe(h, all[w]))
				case count == 1 && node[only]:
					if !reach[w].has(only) {
						edge(w, only)
						reach[w].add(only)
						added = true
					}
					if !reach[only].has(r) {
						edge(only, r)
						reach[only].add(r)
						added = true
					}
				}
			}
			return ""
		}
		for _, r := range absentReads {
			if v := between(r, sets, dels); v != "" {
				return v
			}
		}
		for _, r := range presentReads {
			if v := between(r, dels, sets); v != "" {
				return v
			}
		}
		if !added {
			break
		}
	}
	// Deadlines: an operation must take effect before any operation that
	// must follow it returns (search order only).
	order, _ := topoOrder(succ, node)
	for i := len(order) - 1; i >= 0; i-- {
		v := order[i]
		for _, t := range succ[v] {
			all[v].due = min(all[v].due, all[t].due)
		}
	}
	s.gsucc = succ
	s.gpred = make([]int32, n)
	for _, ts := range succ {
		for _, t := range ts {
			s.gpred[t]++
		}
	}
	s.gnode = node
	s.reach = reach
	s.graph = true
	return ""
}

// topoOrder orders the graph's nodes (Kahn), or returns a cycle.
func topoOrder(succ [][]int32, node []bool) (order []int, cycle []int) {
	n := len(succ)
	in := make([]int, n)
	for _, ts := range succ {
		for _, t := range ts {
			in[t]++
		}
	}
	var queue []int
	for v := 0; v < n; v++ {
		if node[v] && in[v] == 0 {
			queue = append(queue, v)
		}
	}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		order = append(order, v)
		for _, t := range succ[v] {
			if in[t]--; in[t] == 0 {
				queue = append(queue, int(t))
			}
		}
	}
	count := 0
	for v := range node {
		if node[v] {
			count++
		}
	}
	if len(order) == count {
		return order, nil
	}
	// Walk back along remaining edges from a node on or behind a cycle.
	pred := make([]int, n)
	for v := range pred {
		pred[v] = -1
	}
	start := -1
	for v := 0; v < n; v++ {
		if in[v] > 0 {
			for _, t := range succ[v] {
				if in[t] > 0 {
					pred[t] = v
				}
			}
			if start < 0 {
				start = v
			}
		}
	}
	// Every remaining node has a remaining predecessor: walk n steps to
	// land on the cycle, then collect it.
	v := start
	for i := 0; i < n; i++ {
		v = pred[v]
	}
	cycle = []int{v}
	for u := pred[v]; u != v; u = pred[u] {
		cycle = append(cycle, u)
	}
	for i, j := 0, len(cycle)-1; i < j; i, j = i+1, j-1 {
		cycle[i], cycle[j] = cycle[j], cycle[i]
	}
	return nil, cycle
}

// ready reports whether every constraint-graph predecessor of o is placed.
func (s *scSearch) ready(o *scOp) bool { return !s.graph || !s.gnode[o.id] || s.gpred[o.id] == 0 }

// placed marks o placed (d = -1) or unplaced (d = +1) in the graph.
func (s *scSearch) mark(o *scOp, d int32) {
	if !s.graph || !s.gnode[o.id] {
		return
	}
	for _, t := range s.gsucc[o.id] {
		s.gpred[t] += d
	}
}

// describe renders one operation of the search with its process and times.
func (s *scSearch) describe(h *history.History, o *scOp) string {
	op := h.Ops[o.orig]
	in := o.in
	in.args = op.Args
	ret := fmt.Sprint(op.Return)
	if o.float {
		ret = "?"
	}
	return fmt.Sprintf("process %d's op %d [%d..%s] %s", s.ids[o.proc], o.orig, op.Call, ret,
		describeOp(in, output{res: o.res, unknown: o.float}, s.opt))
}
