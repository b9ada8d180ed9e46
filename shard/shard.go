// Package shard splits a namespace's keys among replica groups by Redis
// Cluster's hash slots (issue 33).
//
// # Slots, not ranges
//
// A sharded namespace's keys are divided into Redis Cluster's 16,384 hash
// slots: slot = CRC16(key) mod 16384, where CRC16 is the XMODEM variant
// (polynomial 0x1021, initial value 0) and only the part between the first
// '{' and the next '}' is hashed when that part is non-empty (a hash tag),
// exactly as Redis Cluster's specification ("Keys distribution model",
// "Hash tags") defines it. Each slot belongs to exactly one group (a shard);
// a group owns any set of slots.
//
// Why hash slots rather than key ranges (TiKV, CockroachDB):
//
//   - The Redis Cluster protocol is the routing protocol Synod speaks
//     (CLUSTER SLOTS, CLUSTER SHARDS, MOVED, ASK), and it can only describe
//     slots. redis-cli -c, redis-py's RedisCluster and go-redis's
//     ClusterClient compute the slot themselves; a range partition would
//     need a second, Synod-only routing protocol and client.
//   - Hashing spreads sequential keys (user:1, user:2, ...) and hot key
//     prefixes over all groups without load-based splitting, which ranges
//     need from the first day. A fixed slot count also bounds the placement
//     table (16,384 entries at most), so every node can hold all of it.
//   - Hash tags give applications the co-location that ranges give by
//     prefix: keys {u1}.a and {u1}.b share a slot and so a group, and a
//     multi-key command or transaction over them stays on one group.
//
// What slots cost: range scans (SCAN, KEYS) visit every group, and a slot
// cannot be split further, so one hot key (or hash tag) is bounded by one
// group's throughput. Moving load is moving whole slots (online migration,
// docs/SHARDING.md), which Redis Cluster's ASK protocol already describes.
//
// This package is pure: slot arithmetic, the parsing of slot sets and the
// Map from slots to groups with its one invariant (every slot owned by
// exactly one group), which Check enforces and config validation calls.
package shard

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Slots is the number of hash slots (Redis Cluster's).
const Slots = 16384

// crcTable is the CRC16-XMODEM table (polynomial 0x1021).
var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for j := 0; j < 8; j++ {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return
}()

// CRC16 is CRC16-CCITT in its XMODEM variant, Redis Cluster's key hash.
func CRC16(b []byte) uint16 {
	var c uint16
	for _, x := range b {
		c = c<<8 ^ crcTable[byte(c>>8)^x]
	}
	return c
}

// HashPart is the part of key that is hashed: the hash tag (between the
// first '{' and the first '}' after it) when it is non-empty, else the
// whole key.
func HashPart(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// KeySlot is key's hash slot.
func KeySlot(key string) int {
	return int(CRC16([]byte(HashPart(key)))) % Slots
}

// Range is a run of slots, First through Last inclusive.
type Range struct{ First, Last int }

func (r Range) String() string {
	if r.First == r.Last {
		return strconv.Itoa(r.First)
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}

// ParseSlots reads a slot set: comma-separated slots and inclusive ranges,
// "0-5460" or "0-99,200,300-399". Ranges are returned sorted and merged.
func ParseSlots(s string) ([]Range, error) {
	var rs []Range
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("slots %q: empty element", s)
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := parseSlot(lo)
		if err != nil {
			return nil, fmt.Errorf("slots %q: %v", s, err)
		}
		b := a
		if isRange {
			if b, err = parseSlot(hi); err != nil {
				return nil, fmt.Errorf("slots %q: %v", s, err)
			}
			if b < a {
				return nil, fmt.Errorf("slots %q: range %s ends before it starts", s, part)
			}
		}
		rs = append(rs, Range{a, b})
	}
	return merge(rs), nil
}

func parseSlot(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n >= Slots {
		return 0, fmt.Errorf("%q is not a slot (0-%d)", s, Slots-1)
	}
	return n, nil
}

func merge(rs []Range) []Range {
	sort.Slice(rs, func(i, j int) bool { return rs[i].First < rs[j].First })
	var out []Range
	for _, r := range rs {
		if k := len(out) - 1; k >= 0 && r.First <= out[k].Last+1 {
			out[k].Last = max(out[k].Last, r.Last)
			continue
		}
		out = append(out, r)
	}
	return out
}

// FormatSlots writes ranges as ParseSlots reads them.
func FormatSlots(rs []Range) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}

// Even splits the slots into n contiguous ranges of nearly equal size the
// way redis-cli --cluster create does (0-5460, 5461-10922, 10923-16383 for
// three), so that a Synod cluster's slot table reads like a Redis one.
func Even(n int) []Range {
	out := make([]Range, n)
	per := float64(Slots) / float64(n)
	first, cursor := 0, 0.0
	for i := range out {
		last := int(math.Round(cursor + per - 1))
		if last > Slots-1 || i == n-1 {
			last = Slots - 1
		}
		last = max(last, first)
		out[i] = Range{first, last}
		cursor += per
		first = last + 1
	}
	return out
}

// Unowned marks a slot no group owns in a Map built by Build from an
// incomplete assignment (Check refuses such a map).
const Unowned = -1

// Map says which group owns each slot: Owner[slot] is the group's index.
type Map struct {
	Owner [Slots]int16
}

// Build makes the Map of groups whose slot sets are given in order. It
// never fails: slots nobody claims are Unowned and a slot claimed twice
// keeps its first claimant; Check reports both.
func Build(groups [][]Range) *Map {
	m := &Map{}
	for i := range m.Owner {
		m.Owner[i] = Unowned
	}
	for g, rs := range groups {
		for _, r := range rs {
			for s := r.First; s <= r.Last; s++ {
				if m.Owner[s] == Unowned {
					m.Owner[s] = int16(g)
				}
			}
		}
	}
	return m
}

// Check is the placement invariant: every slot is owned by exactly one of
// the groups. It returns an error naming the first unowned slot range and
// the first slot claimed by two groups.
func Check(groups [][]Range) error {
	var count [Slots]uint8
	var first [Slots]int16
	var dup []string
	for g, rs := range groups {
		for _, r := range rs {
			for s := r.First; s <= r.Last; s++ {
				if count[s] == 0 {
					first[s] = int16(g)
				} else if len(dup) < 3 {
					dup = append(dup, fmt.Sprintf("slot %d is owned by groups %d and %d", s, first[s], g))
				}
				if count[s] < 255 {
					count[s]++
				}
			}
		}
	}
	var missing []Range
	for s := 0; s < Slots; s++ {
		if count[s] == 0 {
			if k := len(missing) - 1; k >= 0 && missing[k].Last == s-1 {
				missing[k].Last = s
			} else {
				missing = append(missing, Range{s, s})
			}
		}
	}
	var errs []string
	if len(missing) > 0 {
		errs = append(errs, "slots "+FormatSlots(missing)+" are owned by no group")
	}
	errs = append(errs, dup...)
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// Group returns the index of the group owning key.
func (m *Map) Group(key string) int { return int(m.Owner[KeySlot(key)]) }

// Ranges lists, in slot order, the contiguous runs of slots each group
// owns: one entry per run, with the owning group's index.
func (m *Map) Ranges() []OwnedRange {
	var out []OwnedRange
	for s := 0; s < Slots; s++ {
		g := int(m.Owner[s])
		if k := len(out) - 1; k >= 0 && out[k].Group == g && out[k].Last == s-1 {
			out[k].Last = s
			continue
		}
		out = append(out, OwnedRange{Range{s, s}, g})
	}
	return out
}

// OwnedRange is a run of slots and the group that owns it.
type OwnedRange struct {
	Range
	Group int
}
