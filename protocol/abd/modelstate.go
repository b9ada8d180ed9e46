package abd

import (
	"maps"
	"slices"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

// The model checker's fast path (automaton.ModelStater, issue 20 item 4):
// ABD encodes and copies its state by hand instead of mc's reflective walk.
// The encoding covers every field the reflective fingerprint covers (the
// constants of a run, the protocol flags, Config, index, self and the
// timeouts, are left out: they are the same in every state), maps in
// sorted key order; mc's TestFastPathMatchesReflective checks that both
// paths visit the same states, for abd and each broken variant. A field
// added to ABD, op or the checker must be added here too (that test fails
// otherwise, when the field matters in the model).

var (
	_ automaton.ModelStater        = (*ABD)(nil)
	_ automaton.ModelCheckerStater = (*checker)(nil)
)

// AppendModelState implements automaton.ModelStater.
func (a *ABD) AppendModelState(b []byte, rename func(automaton.RequestID) automaton.RequestID) []byte {
	return a.AppendRenamedModelState(b, rename, nil)
}

// AppendRenamedModelState implements automaton.ModelNodeRenamer (and is
// AppendModelState with node nil): tags name their writer, renamed; an
// operation's replies are kept per node position, permuted.
func (a *ABD) AppendRenamedModelState(b []byte, rename func(automaton.RequestID) automaton.RequestID, node *automaton.NodeRenaming) []byte {
	// Keys are sorted in arrays of this frame (the model's maps are small):
	// an encoding allocates nothing but its buffer's growth.
	var kb [8]string
	b = automaton.AppendModelUint(b, uint64(len(a.store)))
	for _, k := range appendSortedKeys(kb[:0], a.store) {
		b = appendEntry(automaton.AppendModelString(b, k), *a.store[k], node)
	}
	b = automaton.AppendModelUint(b, a.incarnation)
	b = automaton.AppendModelBool(b, a.fresh)
	b = automaton.AppendModelUint(b, a.counter)
	var ib [8]uint64
	ids := ib[:0]
	for id := range a.ops {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	b = automaton.AppendModelUint(b, uint64(len(ids)))
	for _, id := range ids {
		b = appendOp(automaton.AppendModelUint(b, id), a.ops[id], rename, node)
	}
	// The request table (reqs) as the two maps it replaced were encoded:
	// the requests in flight with their operations, then the answered
	// ones with their answers (queued ones are the queue, below), so
	// that a state's encoding is unchanged.
	var rb [8]automaton.RenamedID
	rids := automaton.AppendModelRenamedKeys(rb[:0], a.reqs, rename) // sorted: so is each stage's part
	for _, st := range [...]reqStage{reqBusy, reqDone} {
		n := 0
		for _, r := range rids {
			if a.reqs[r.ID].state == st {
				n++
			}
		}
		b = automaton.AppendModelUint(b, uint64(n))
		for _, r := range rids {
			switch s := a.reqs[r.ID]; {
			case s.state != st:
			case st == reqBusy:
				b = automaton.AppendModelUint(automaton.AppendModelID(b, r.Renamed, nil), s.op)
			default:
				b = automaton.AppendModelResult(automaton.AppendModelID(b, r.Renamed, nil), s.res)
			}
		}
	}
	b = automaton.AppendModelSlice(b, a.doneOrder, func(b []byte, id automaton.RequestID) []byte {
		return automaton.AppendModelID(b, id, rename)
	})
	b = appendKeyTags(b, a.stepStores, node)
	b = appendKeyTags(b, a.stepDone, node)
	if len(a.queue) == 0 { // requests waiting for a round group (batch.go)
		return b
	}
	return automaton.AppendModelSlice(b, a.queue, func(b []byte, r automaton.Request) []byte {
		return automaton.AppendModelRequest(b, &r, rename)
	})
}

// CloneModel implements automaton.ModelStater. Byte slices (values,
// requests' arguments) are shared: ABD never changes them in place.
func (a *ABD) CloneModel() automaton.Automaton {
	c := *a
	c.Out = nil
	c.sends = proto.Sends{} // a step's scratch, not shared with the copy
	c.sends.Reset()
	c.replies = []byte{}
	// OnBatch's and beginGroup's scratch, empty between steps: the copy's own.
	c.batchReqs, c.batchSeen, c.groupRuns, c.peerMsgs = []automaton.Request{}, map[automaton.RequestID]bool{}, map[string]*op{}, [][]byte{}
	// The entries, the operations and their replies are each copied into
	// one array (a few allocations per copy instead of one per element).
	c.store = make(map[string]*entry, len(a.store))
	es := make([]entry, len(a.store))
	j := 0
	for k, e := range a.store {
		es[j] = *e
		c.store[k] = &es[j]
		j++
	}
	c.ops = make(map[uint64]*op, len(a.ops))
	if len(a.ops) > 0 {
		os, n := make([]op, len(a.ops)), 0
		for _, o := range a.ops {
			n += len(o.replied)
		}
		rs := make([]bool, n)
		j = 0
		for id, o := range a.ops {
			os[j] = *o
			if o.replied != nil {
				os[j].replied = rs[:len(o.replied):len(o.replied)]
				copy(os[j].replied, o.replied)
				rs = rs[len(o.replied):]
			}
			os[j].run, os[j].results = slices.Clone(o.run), slices.Clone(o.results)
			c.ops[id] = &os[j]
			j++
		}
	}
	c.reqs = maps.Clone(a.reqs)
	c.groupLeft, c.queue = maps.Clone(a.groupLeft), slices.Clone(a.queue)
	c.groupReqs = maps.Clone(a.groupReqs)
	if a.peerPipe { // pipeline.go (the model runs without it: model.go)
		c.owed, c.sentNow, c.phaseNow = slices.Clone(a.owed), slices.Clone(a.sentNow), slices.Clone(a.phaseNow)
		c.heldBytes, c.touched = slices.Clone(a.heldBytes), slices.Clone(a.touched)
		c.held = make([][][]byte, len(a.held))
		for i, h := range a.held {
			c.held[i] = slices.Clone(h)
		}
	}
	c.doneOrder = slices.Clone(a.doneOrder)
	c.stepStores = slices.Clone(a.stepStores)
	c.stepDone = slices.Clone(a.stepDone)
	return &c
}

func appendEntry(b []byte, e entry, node *automaton.NodeRenaming) []byte {
	b = appendTag(b, e.Tag, node)
	b = automaton.AppendModelBool(b, e.Tomb)
	return automaton.AppendModelBytes(b, e.Value)
}

func appendTag(b []byte, t Tag, node *automaton.NodeRenaming) []byte {
	t.Node = node.Name(t.Node)
	return automaton.AppendModelUint(automaton.AppendModelString(automaton.AppendModelUint(b, t.TS), t.Node), t.Seq)
}

func appendOp(b []byte, o *op, rename func(automaton.RequestID) automaton.RequestID, node *automaton.NodeRenaming) []byte {
	b = automaton.AppendModelUint(b, o.id)
	b = automaton.AppendModelRequest(b, &o.req, rename)
	b = automaton.AppendModelBool(b, o.write)
	b = automaton.AppendModelUint(b, uint64(o.phase))
	b = appendReplied(b, o.replied, node)
	b = automaton.AppendModelUint(b, uint64(o.count))
	b = automaton.AppendModelUint(b, uint64(o.elapsed))
	b = appendEntry(b, o.max, node)
	b = automaton.AppendModelUint(b, uint64(o.nMax))
	b = appendEntry(b, o.put, node)
	if len(o.run) == 0 { // a key run (batch.go): only with client batches
		return b
	}
	b = automaton.AppendModelSlice(b, o.run, func(b []byte, r automaton.Request) []byte {
		return automaton.AppendModelRequest(b, &r, rename)
	})
	return automaton.AppendModelSlice(b, o.results, func(b []byte, r service.Result) []byte {
		return automaton.AppendModelString(b, r.String())
	})
}

func appendKeyTags(b []byte, kts []keyTag, node *automaton.NodeRenaming) []byte {
	return automaton.AppendModelSlice(b, kts, func(b []byte, kt keyTag) []byte {
		return appendTag(automaton.AppendModelString(b, kt.key), kt.tag, node)
	})
}

// appendSortedKeys appends m's keys to ks, sorted.
func appendSortedKeys[K ~string, V any](ks []K, m map[K]V) []K {
	start := len(ks)
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks[start:])
	return ks
}

// AppendModelState implements automaton.ModelCheckerStater. The checker's
// reference to a node's incarnation encodes as that node's index when it is
// up, and as -1 otherwise (a crashed incarnation: the reflective walk hashes
// its content instead, which the checker never reads again: only its
// identity, which no new incarnation shares).
func (c *checker) AppendModelState(b []byte, ref func(automaton.Automaton) int, rename func(automaton.RequestID) automaton.RequestID) []byte {
	return c.AppendRenamedModelState(b, ref, rename, nil)
}

// AppendRenamedModelState implements automaton.ModelCheckerNodeRenamer
// (and is AppendModelState with node nil): the maps keyed by node are
// encoded in the order of the renamed ids, tags with their writer renamed
// and, per key, sorted by the renamed tags.
func (c *checker) AppendRenamedModelState(b []byte, ref func(automaton.Automaton) int, rename func(automaton.RequestID) automaton.RequestID, node *automaton.NodeRenaming) []byte {
	var nb [8]automaton.NodeID
	b = automaton.AppendModelUint(b, uint64(len(c.inc)))
	for _, id := range renamedNodeKeys(nb[:0], c.inc, node) {
		b = automaton.AppendModelString(b, string(node.ID(id)))
		if a := c.inc[id]; a == nil {
			b = automaton.AppendModelUint(b, 1<<63)
		} else {
			b = automaton.AppendModelUint(b, uint64(int64(ref(a))))
		}
	}
	b = appendTagMaps(b, c.last, node)
	b = appendTagMaps(b, c.floor, node)
	return c.appendVals(b, node)
}

// appendVals appends the values seen per key and tag, tags renamed.
func (c *checker) appendVals(b []byte, node *automaton.NodeRenaming) []byte {
	var kb [8]string
	var tb [16]renamedTag
	b = automaton.AppendModelUint(b, uint64(len(c.vals)))
	for _, k := range appendSortedKeys(kb[:0], c.vals) {
		m := c.vals[k]
		b = automaton.AppendModelString(b, k)
		b = automaton.AppendModelBool(b, m != nil)
		tags := tb[:0]
		for t := range m {
			r := t
			r.Node = node.Name(t.Node)
			tags = append(tags, renamedTag{t, r})
		}
		slices.SortFunc(tags, func(x, y renamedTag) int {
			if tagOrder(x.r, y.r) {
				return -1
			}
			if tagOrder(y.r, x.r) {
				return 1
			}
			return 0
		})
		b = automaton.AppendModelUint(b, uint64(len(tags)))
		for _, t := range tags {
			b = automaton.AppendModelString(appendTag(b, t.r, nil), m[t.t])
		}
	}
	return b
}

var _ automaton.ModelCheckerPartStater = (*checker)(nil)

// AppendModelNodePart implements automaton.ModelCheckerPartStater: the
// node's incarnation (as a reference), the tags it held and those it
// restored at its last start. Check changes only the stepped node's.
func (c *checker) AppendModelNodePart(b []byte, id automaton.NodeID, ref func(automaton.Automaton) int, rename func(automaton.RequestID) automaton.RequestID) []byte {
	a, ok := c.inc[id]
	b = automaton.AppendModelBool(b, ok)
	switch {
	case !ok:
	case a == nil:
		b = automaton.AppendModelUint(b, 1<<63)
	default:
		b = automaton.AppendModelUint(b, uint64(int64(ref(a))))
	}
	var kb [8]string
	for _, mm := range [2]map[automaton.NodeID]map[string]Tag{c.last, c.floor} {
		m, ok := mm[id]
		b = automaton.AppendModelBool(b, ok)
		b = automaton.AppendModelBool(b, m != nil)
		b = automaton.AppendModelUint(b, uint64(len(m)))
		for _, k := range appendSortedKeys(kb[:0], m) {
			b = appendTag(automaton.AppendModelString(b, k), m[k], nil)
		}
	}
	return b
}

// AppendModelRestPart implements automaton.ModelCheckerPartStater: the
// values seen per key and tag, and which nodes the maps name (a node the
// checker has not seen has no part).
func (c *checker) AppendModelRestPart(b []byte, ref func(automaton.Automaton) int, rename func(automaton.RequestID) automaton.RequestID) []byte {
	b = automaton.AppendModelUint(b, uint64(len(c.inc)))
	b = automaton.AppendModelUint(b, uint64(len(c.last)))
	b = automaton.AppendModelUint(b, uint64(len(c.floor)))
	return c.appendVals(b, nil)
}

// tagOrder is a total order on tags (for encoding maps keyed by them).
func tagOrder(x, y Tag) bool {
	if x.TS != y.TS {
		return x.TS < y.TS
	}
	if x.Node != y.Node {
		return x.Node < y.Node
	}
	return x.Seq < y.Seq
}

// renamedTag is a tag and its renaming.
type renamedTag struct{ t, r Tag }

func appendTagMaps(b []byte, mm map[automaton.NodeID]map[string]Tag, node *automaton.NodeRenaming) []byte {
	var nb [8]automaton.NodeID
	var kb [8]string
	b = automaton.AppendModelUint(b, uint64(len(mm)))
	for _, id := range renamedNodeKeys(nb[:0], mm, node) {
		m := mm[id]
		b = automaton.AppendModelString(b, string(node.ID(id)))
		b = automaton.AppendModelBool(b, m != nil)
		b = automaton.AppendModelUint(b, uint64(len(m)))
		for _, k := range appendSortedKeys(kb[:0], m) {
			b = appendTag(automaton.AppendModelString(b, k), m[k], node)
		}
	}
	return b
}

// CloneChecker implements automaton.ModelCheckerStater. The model checker
// clones the checker just before a step of the one node remap moves (or,
// with no node moved, before a node boots): Check changes only that node's
// entries of inc and last, and of floor only when the node starts anew
// (replacing rather than changing a floor map, invariant.go), so the
// other nodes' maps are shared, and floor too after a move; the values
// seen per key (vals) may change on any step and are copied.
func (c *checker) CloneChecker(remap func(automaton.Automaton) automaton.Automaton) automaton.InvariantChecker {
	n := &checker{inc: make(map[automaton.NodeID]*ABD, len(c.inc)), last: make(map[automaton.NodeID]map[string]Tag, len(c.last)),
		vals: make(map[string]map[Tag]string, len(c.vals))}
	var stepped automaton.NodeID
	for id, a := range c.inc {
		if a != nil {
			if b, _ := remap(a).(*ABD); b != a {
				a, stepped = b, id
			}
		}
		n.inc[id] = a
	}
	// floor changes only when a node starts (Check's started: a new
	// incarnation, never the copy of the stepped node's): shared unless
	// no node moved (the clone before a boot).
	n.floor = c.floor
	if stepped == "" {
		n.floor = maps.Clone(c.floor)
	}
	for id, m := range c.last {
		if stepped == "" || id == stepped {
			m = maps.Clone(m)
		}
		n.last[id] = m
	}
	for k, m := range c.vals {
		n.vals[k] = maps.Clone(m)
	}
	return n
}
