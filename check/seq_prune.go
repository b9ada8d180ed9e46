package check

// Pruning of the sequential-consistency search (see "Pruning" in
// sequential.go's package comment), for histories of register operations
// (GET, EXISTS, SET, DEL): counters that tell, after a write, that the
// configuration cannot extend to a full order.

// The kinds of read that wait for a filler: a read of absence (GET -> nil,
// EXISTS -> 0, a counted DEL -> 0) needs a DEL that can delete, a read of
// presence (EXISTS -> 1, a counted DEL -> 1) a SET, between a write that
// changed the key and itself.
const (
	scNeedAbsent = iota + 1
	scNeedPresent
)

// counters sets up the pruning counters once the graph (if any) is built.
func (s *scSearch) counters() {
	defer func() { s.reach = nil }()
	if !s.prune {
		return
	}
	s.prodLeft, s.readsLeft = make([]int32, len(s.vals)), make([]int32, len(s.vals))
	s.need, s.helps = make([]int32, len(s.all)), make([][]int32, len(s.all))
	s.starved = make([]int32, 2*len(s.keys))
	fillers := make([][2][]*scOp, len(s.keys)) // by key: DELs, SETs
	for _, o := range s.all {
		switch o.kind {
		case scSet:
			s.prodLeft[o.v]++
			fillers[o.k][1] = append(fillers[o.k][1], o)
		case scDel:
			// A counted DEL -> 0 cannot delete (it needs the key absent),
			// and a counted DEL -> 1 needs it present.
			switch {
			case o.float || o.ok0 && o.ok1:
				fillers[o.k][0] = append(fillers[o.k][0], o)
			case o.ok1:
				fillers[o.k][0] = append(fillers[o.k][0], o)
				o.rk = scNeedPresent
			case o.ok0:
				o.rk = scNeedAbsent
			}
		case scGet:
			if o.v == 0 {
				o.rk = scNeedAbsent
			}
		case scExists:
			switch {
			case o.ok0:
				o.rk = scNeedAbsent
			case o.ok1:
				o.rk = scNeedPresent
			}
		}
	}
	for _, r := range s.all {
		if r.rk == 0 {
			continue
		}
		for _, f := range fillers[r.k][r.rk-1] {
			if !s.forcedAfter(r, f) {
				s.helps[f.id] = append(s.helps[f.id], int32(r.id))
				s.need[r.id]++
			}
		}
	}
	for _, o := range s.all {
		s.readPlaced(o, +1)
	}
	s.breakersOf()
}

// forcedAfter reports whether every valid order places f after r: f
// follows r in its program, or in the constraint graph, or (a floating
// write outside the graph) its program predecessor is r or follows r.
func (s *scSearch) forcedAfter(r, f *scOp) bool {
	if f.proc == r.proc && f.idx > r.idx {
		return true
	}
	if s.reach == nil || !s.gnode[r.id] {
		return false
	}
	if s.gnode[f.id] {
		return s.reach[r.id].has(f.id)
	}
	ops := s.procs[f.proc]
	for i := f.idx - 1; i >= 0; i-- {
		if q := &ops[i]; !q.float {
			return q == r || s.gnode[q.id] && s.reach[r.id].has(q.id)
		}
	}
	return false
}

// isPlaced reports whether o is placed (floats: released; see applied).
func (s *scSearch) isPlaced(o *scOp) bool { return s.pos[o.proc] > o.idx }

// readPlaced adjusts the counts of unplaced reads when o is placed (d =
// -1) or unplaced (d = +1).
func (s *scSearch) readPlaced(o *scOp, d int32) {
	if !s.prune {
		return
	}
	switch {
	case o.kind == scGet && o.v > 0:
		s.readsLeft[o.v] += d
	case o.rk != 0 && s.need[o.id] == 0:
		s.starved[2*o.k+int32(o.rk)-1] += d
	}
}

// filled adjusts the fillers left to the reads that o can help when o is
// applied (d = -1) or unapplied (d = +1).
func (s *scSearch) filled(o *scOp, d int32) {
	for _, r := range s.helps[o.id] {
		ro := s.all[r]
		if d > 0 && s.need[r] == 0 && !s.isPlaced(ro) {
			s.starved[2*ro.k+int32(ro.rk)-1]--
		}
		s.need[r] += d
		if d < 0 && s.need[r] == 0 && !s.isPlaced(ro) {
			s.starved[2*ro.k+int32(ro.rk)-1]++
		}
	}
}

// applyWrite applies o, whose effect is next, and reports whether the
// configuration can still extend to a full order (register operations):
// a value that an unplaced read expects and no remaining SET produces
// must not be overwritten; a key must not be left present while an
// unplaced read of absence has no DEL left that may come before it, nor
// absent while a read of presence has no SET left.
func (s *scSearch) applyWrite(o *scOp, next int32) (old int32, alive bool) {
	old = s.kv[o.k]
	s.setKV(o.k, next)
	if !s.prune {
		return old, true
	}
	if o.kind == scSet {
		s.prodLeft[o.v]--
	}
	s.filled(o, -1)
	switch {
	case old != 0 && next != old && s.readsLeft[old] > 0 && s.prodLeft[old] == 0:
		return old, false
	case next != 0 && s.starved[2*o.k+scNeedAbsent-1] > 0:
		return old, false
	case next == 0 && s.starved[2*o.k+scNeedPresent-1] > 0:
		return old, false
	case o.kind == scSet && next != old && s.broken(next):
		return old, false
	}
	return old, true
}

func (s *scSearch) unapplyWrite(o *scOp, old int32) {
	s.setKV(o.k, old)
	if !s.prune {
		return
	}
	if o.kind == scSet {
		s.prodLeft[o.v]++
	}
	s.filled(o, +1)
}

// breakersOf lists, for each value with one writer w and reads, the
// operations that would break it: a landing write of its key other than w,
// or a read of the key that does not return it, that the graph orders
// before some read of the value. Between w and a read of its value the key
// holds that value throughout (only w writes it), so once w is applied
// with such an operation unplaced, no order can follow. Only the latest
// breaker of each process is kept (placing follows program order), and
// every floating one.
func (s *scSearch) breakersOf() {
	if s.reach == nil {
		return
	}
	writer := make([]int32, len(s.vals))
	var readers [][]int32
	readers = make([][]int32, len(s.vals))
	byKey := make([][]*scOp, len(s.keys))
	for _, o := range s.all {
		byKey[o.k] = append(byKey[o.k], o)
		switch {
		case o.kind == scSet && o.plain:
			if writer[o.v] == 0 {
				writer[o.v] = int32(o.id) + 1
			} else {
				writer[o.v] = -1
			}
		case o.kind == scGet && o.v > 0:
			readers[o.v] = append(readers[o.v], int32(o.id))
		}
	}
	s.breakers = make([][]int32, len(s.vals))
	latest := make([]int, len(s.procs))
	for v := 1; v < len(s.vals); v++ {
		if writer[v] <= 0 || len(readers[v]) == 0 {
			continue
		}
		w := s.all[writer[v]-1]
		if !s.gnode[w.id] {
			continue
		}
		for p := range latest {
			latest[p] = -1
		}
		var list []int32
		for _, b := range byKey[w.k] {
			if b == w || !s.gnode[b.id] {
				continue
			}
			breaks := false
			switch b.kind {
			case scSet, scDel:
				breaks = true
			case scGet:
				breaks = b.v != int32(v)
			case scExists:
				breaks = b.rk == scNeedAbsent
			}
			if !breaks {
				continue
			}
			for _, r := range readers[v] {
				if s.reach[b.id].has(int(r)) {
					if b.float {
						list = append(list, int32(b.id))
					} else if b.idx > latest[b.proc] {
						latest[b.proc] = b.idx
					}
					break
				}
			}
		}
		for p, i := range latest {
			if i >= 0 {
				list = append(list, int32(s.procs[p][i].id))
			}
		}
		s.breakers[v] = list
	}
}

// broken reports whether some breaker of value v (see breakersOf) is
// unplaced.
func (s *scSearch) broken(v int32) bool {
	if s.breakers == nil {
		return false
	}
	for _, b := range s.breakers[v] {
		o := s.all[b]
		if !s.isPlaced(o) || o.float && s.pool[o.fi] {
			return true
		}
	}
	return false
}
