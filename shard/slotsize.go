package shard

import (
	"strconv"
	"strings"
)

// Per-slot sizes for a split by size (split47; shared by the node's
// placement leader, node/slotsize.go, and the simulator's,
// sim/shards_place.go, since session 48): a group near a size threshold
// is read with KV "slotstats slots", whose third element lists
// "<slot>:<keys>:<bytes>" for each slot holding a key; the weights Decide
// cuts by (PlaceInput.SlotKeys, SlotBytes) are those answers, each slot
// counted for the group that owns it now.

// SlotSize is one slot's keys and bytes in a group's per-slot answer.
type SlotSize struct {
	Slot        int
	Keys, Bytes int64
}

// SizeNear says whether a group of keys and bytes is near a split by size
// (half of a threshold or more), so that its size is read per slot.
func SizeNear(keys, bytes int64, p PlaceParams) bool {
	return p.SplitKeys > 0 && 2*keys >= p.SplitKeys || p.SplitBytes > 0 && 2*bytes >= p.SplitBytes
}

// ParseSlotSizes reads "slotstats slots"'s third element; a malformed
// field is skipped.
func ParseSlotSizes(v string) []SlotSize {
	var out []SlotSize
	for _, f := range strings.Fields(v) {
		a, rest, ok1 := strings.Cut(f, ":")
		b, c, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			continue
		}
		sl, e1 := strconv.Atoi(a)
		k, e2 := strconv.ParseInt(b, 10, 64)
		by, e3 := strconv.ParseInt(c, 10, 64)
		if e1 != nil || e2 != nil || e3 != nil || sl < 0 || sl >= Slots || k < 0 || by < 0 {
			continue
		}
		out = append(out, SlotSize{sl, k, by})
	}
	return out
}

// SlotSizeWeights builds PlaceInput's SlotKeys and SlotBytes from each
// group's last per-slot answer (perGroup[g]; nil: none, or read plainly),
// each slot counted for the group that owns it in owner (a slot a group
// answered for but no longer owns is left out); nil, nil when no group
// was read per slot.
func SlotSizeWeights(perGroup [][]SlotSize, owner *[Slots]int16) ([]float64, []float64) {
	var keys, bytes []float64
	for gi, sz := range perGroup {
		if sz == nil {
			continue
		}
		if keys == nil {
			keys, bytes = make([]float64, Slots), make([]float64, Slots)
		}
		for _, e := range sz {
			if int(owner[e.Slot]) == gi {
				keys[e.Slot], bytes[e.Slot] = float64(e.Keys), float64(e.Bytes)
			}
		}
	}
	return keys, bytes
}
