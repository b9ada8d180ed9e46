package service

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/synod-dev/synod/shard"
	"github.com/synod-dev/synod/synoderr"
)

// Whole-keyspace operations of a shard group (issue 33; node/shardks.go).
//
// A group of a sharded namespace may hold keys it does not answer for:
// copies it is importing (state importing), keys it has handed over or
// given up (handed, gone: deleted by the driver later), and migration's
// own reserved keys (shard.ReservedPrefix). The node's cluster-wide
// DBSIZE, KEYS, SCAN, RANDOMKEY and FLUSHDB ask each group for the keys it
// serves, with the trailing argument ServedArg (SCAN: the option "slots
// FIRST-LAST"): reserved keys are left out, and so are the keys of slots
// whose state key says importing, handed or gone. The filter reads the
// slot states in the same log entry as the keys, so it is exact at that
// point of the group's log. At a hand-off the destination becomes owned
// before the source becomes handed (package shard), so a key of a slot
// under hand-off is counted by both groups for that moment, never by
// neither.
//
// FLUSHDB served deletes the served keys one by one (each leaves a
// tombstone, as DEL), marks each key of a migrating slot dirty (so the
// copy deletes it at the destination too), and refuses with TRYAGAIN,
// deleting nothing, while any slot is frozen (its last copy pass is
// running: a deletion then would not reach the destination).

// ServedArg is the trailing argument of dbsize, keys, randomkey and
// flushdb asking for the served keys only.
const ServedArg = "served"

// slotStates is what a group's reserved slot-state keys say of its slots.
type slotStates struct {
	skip   *[shard.Slots]bool // keys of these slots are not served here (nil: none)
	track  *[shard.Slots]bool // migrating slots: a deletion is marked dirty (nil: none)
	frozen bool               // some slot is frozen
}

// walk calls fn for each key that is not reserved (live or not) and
// returns what the reserved slot-state keys say: one pass over the
// keyspace, reading each key's bytes once (what the filter costs over a
// plain DBSIZE: BenchmarkDBSizeServed); a key's slot is computed only
// when some slot is not served.
func (s *KVState) walk(fn func(k string, e kvEntry)) slotStates {
	var st slotStates
	pre := shard.ReservedPrefix + "slot:"
	for k, e := range s.m {
		if !shard.Reserved(k) {
			fn(k, e)
			continue
		}
		if !strings.HasPrefix(k, pre) || e.c != nil {
			continue
		}
		sl, err := strconv.Atoi(k[len(pre):])
		if err != nil || sl < 0 || sl >= shard.Slots {
			continue
		}
		switch shard.ParseState(e.v).State {
		case shard.StImporting, shard.StHanded, shard.StGone:
			if st.skip == nil {
				st.skip = new([shard.Slots]bool)
			}
			st.skip[sl] = true
		case shard.StMigrating:
			if st.track == nil {
				st.track = new([shard.Slots]bool)
			}
			st.track[sl] = true
		case shard.StFrozen:
			st.frozen = true
		}
	}
	return st
}

// unserved reports whether key (not reserved) is of a slot the group does
// not serve.
func (st slotStates) unserved(key string) bool {
	return st.skip != nil && st.skip[shard.KeySlot(key)]
}

func (s *KVState) alive(e kvEntry) bool { return e.exp == 0 || e.exp > s.now }

// dbsizeServed is DBSIZE served.
func (s *KVState) dbsizeServed() Result {
	n := 0
	st := s.walk(func(_ string, e kvEntry) {
		if s.alive(e) {
			n++
		}
	})
	if st.skip != nil {
		for k, e := range s.m {
			if s.alive(e) && !shard.Reserved(k) && st.unserved(k) {
				n--
			}
		}
	}
	return Int(int64(n))
}

// servedOnly reports whether op asks for the served keys only.
func servedOnly(op Op, at int) bool {
	return len(op.Args) > at && string(op.Args[at]) == ServedArg
}

func checkServedAt(at int) func(Op) error {
	return func(op Op) error {
		if len(op.Args) > at && string(op.Args[at]) != ServedArg {
			return fmt.Errorf(errSyntax)
		}
		return nil
	}
}

// servedLiveKeys lists the live keys the group serves, sorted.
func (s *KVState) servedLiveKeys() []string {
	out := make([]string, 0, len(s.m))
	st := s.walk(func(k string, e kvEntry) {
		if s.alive(e) {
			out = append(out, k)
		}
	})
	if st.skip != nil {
		out = slices.DeleteFunc(out, st.unserved)
	}
	slices.Sort(out)
	return out
}

// flushServed is FLUSHDB served.
func (s *KVState) flushServed() Result {
	var ks []string
	st := s.walk(func(k string, _ kvEntry) { ks = append(ks, k) })
	if st.frozen {
		return Fail(synoderr.TryAgain, "a slot of this group is frozen for a migration's last pass")
	}
	if st.skip != nil {
		ks = slices.DeleteFunc(ks, st.unserved)
	}
	slices.Sort(ks) // the same order on every replica
	for _, k := range ks {
		s.del(k)
		if st.track != nil && st.track[shard.KeySlot(k)] {
			s.opSAdd(Op{Kind: "sadd", Key: shard.DirtyKey, Args: [][]byte{[]byte(k)}})
		}
	}
	return OK()
}

// ClusterCursorBits is how many low bits of a cluster-wide SCAN cursor
// hold the position within its slot; the slot is in the bits above
// (node/shardks.go, "SCAN's cursor").
const ClusterCursorBits = 50

// clusterPos is key's position in a cluster-wide scan: its slot, then the
// top 50 bits of its 62-bit scan position.
func clusterPos(key string) uint64 {
	return uint64(shard.KeySlot(key))<<ClusterCursorBits | scanPos(key)>>(62-ClusterCursorBits)
}

// scanSlots is SCAN with the option "slots FIRST-LAST": the served keys
// of those slots, by cluster position (clusterPos), from the cursor on;
// the next cursor is 0 when none is left in the range.
//
// A slot of the range the group does not serve ends it: asked for such a
// slot first, the group refuses as a guard does ("GUARDFAILED slot <MOVED
// or ASK> <peer group>", shard.Admit), so the node asks the group that
// serves it; met later, the page stops before it (the next cursor names
// it). A node whose map is older than the group's states so never skips
// a slot's keys.
func (s *KVState) scanSlots(a scanArgs) Result {
	var cand []pk
	st := s.walk(func(k string, e kvEntry) {
		if !s.alive(e) {
			return
		}
		if p := clusterPos(k); p >= a.cursor && int(p>>ClusterCursorBits) >= a.first && int(p>>ClusterCursorBits) <= a.last {
			cand = append(cand, pk{p, k})
		}
	})
	if st.skip != nil {
		if st.skip[a.first] {
			var v []byte
			if e, ok := s.live(shard.StateKey(a.first)); ok && e.c == nil {
				v = e.v
			}
			ref, peer := shard.Admit(v, shard.ModeRead)
			if peer == "" {
				peer = "-"
			}
			return GuardFailure(fmt.Sprintf("slot %s %s", ref, peer))
		}
		for sl := a.first + 1; sl <= a.last; sl++ {
			if st.skip[sl] {
				a.last, a.cut = sl-1, true
				break
			}
		}
		cand = slices.DeleteFunc(cand, func(c pk) bool { return int(c.p>>ClusterCursorBits) > a.last })
	}
	n := scanPageLen(cand, a.count)
	next := uint64(0)
	switch {
	case n < len(cand):
		next = cand[n-1].p + 1
	case a.cut:
		next = uint64(a.last+1) << ClusterCursorBits
	}
	var keys [][]byte
	for _, c := range cand[:n] {
		if a.match != nil && !globMatch(a.match, []byte(c.k)) {
			continue
		}
		if a.typ != "" && s.m[c.k].typ().String() != a.typ {
			continue
		}
		keys = append(keys, []byte(c.k))
	}
	return Array(Bytes([]byte(strconv.FormatUint(next, 10))), BytesArray(keys...))
}
