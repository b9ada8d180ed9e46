package service

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"

	"github.com/synod-dev/synod/shard"
	"github.com/synod-dev/synod/wire"
)

// Slot migration's part of KV (issue 33; package shard, "Online slot
// migration"): a group of a sharded namespace keeps each changed slot's
// state in a reserved key (shard.StateKey), and the node makes every
// request of such a group an atomic group that begins with
//
//	guard <state key> slot <mode>
//
// (shard.Admit decides: OK, or GUARDFAILED slot <refusal> <peer>, which
// stops the group before anything is applied) and, for a write, ends with
//
//	slotdirty <key>
//
// for each key it writes: the key is added to the dirty set
// (shard.DirtyKey) when its slot is migrating, so the copy takes it again.
// Both run in log order with the driver's state changes, which is what
// makes "no write accepted by a group that no longer owns its slot" hold.

func init() {
	addKVOps(map[string]kvOp{
		"slotdirty": {min: 0, max: 0, run: (*KVState).opSlotDirty},
		"slotstats": {read: true, keyspace: true, max: 1, check: checkSlotStats, run: (*KVState).opSlotStats},
	})
}

// slotGuard is "guard <state key> slot <mode>".
func (s *KVState) slotGuard(op Op) Result {
	switch string(op.Args[1]) {
	case shard.ModeRead, shard.ModeWrite, shard.ModeAsking:
		// A client's request (or a transaction's prepare) waits for no
		// transaction: a slot a prepared transaction holds is refused
		// (kv_txn.go; the node answers TRYAGAIN).
		if tx, locked := s.slotLocked(op.Key, string(op.Args[1])); locked {
			return GuardFailure(fmt.Sprintf("slot %s %s", shard.RefuseLocked, tx))
		}
	}
	var v []byte
	if e, ok := s.live(op.Key); ok && e.c == nil {
		v = e.v
	}
	if ref, peer := shard.Admit(v, string(op.Args[1])); ref != "" {
		if peer == "" {
			peer = "-"
		}
		return GuardFailure(fmt.Sprintf("slot %s %s", ref, peer))
	}
	return OK()
}

// opSlotDirty marks op.Key dirty when its slot is migrating.
func (s *KVState) opSlotDirty(op Op) Result {
	st := shard.StateKey(shard.KeySlot(op.Key))
	if e, ok := s.live(st); ok && e.c == nil && shard.Tracks(e.v) {
		return s.opSAdd(Op{Kind: "sadd", Key: shard.DirtyKey, Args: [][]byte{[]byte(op.Key)}})
	}
	return OK()
}

// slotStatsSample bounds the keys "slotstats slots" hashes: with more
// live keys it takes every stride-th key the walk visits (stride: the
// keys over it), each counting stride keys and stride times its bytes.
// The walk's order is the map's, which does not follow the keys' hash
// slots, so this is a sample of them. 32,768 keys over 16,384 slots: a
// single slot's figure is rough, but a cut weighs sums over runs of
// slots (half of a group's slots: ±0.55% of its keys, one standard
// deviation; TestSlotStatsSampled), and the per-slot walk hashes at most
// about 32,768 keys however big the group (exactly, a hash per key, it
// was about 5 times the plain walk's time: BenchmarkSlotStats).
const slotStatsSample = 1 << 15

// opSlotStats is a group's size for the placement service's decisions
// (shard.Decide): its live keys and their bytes, reserved keys (slot
// states, dirty sets) left out. A key's bytes are its serialized size:
// the length of its entry in the state's snapshot (the key, its
// generation and deadline, its value's canonical encoding: what a
// replica's snapshot, a catch-up and a restart's load carry for it),
// computed without encoding it (entrySize; session 49: before, the key's
// length plus a string's length or 32 bytes per element of a collection,
// an estimate off by the encoding's prefixes for small values and by any
// factor for collections).
//
// "slotstats slots" (split47, session 47) adds a third element, the same
// figures per hash slot, for a split by size to cut where the keys (or
// bytes) divide (shard.PlaceInput.SlotKeys, SlotBytes): a bulk string of
// "<slot>:<keys>:<bytes>" fields, space-separated, in slot order, for
// each slot holding a key. Decision (no seed covers it): the counts are
// taken in the walk slotstats already makes (a CRC16 per key, or per
// sampled key past slotStatsSample keys), not kept up to date on every
// insert and delete: the keyspace's hot path
// (put, del, expiry, restore, snapshot load) stays as it is and no
// namespace pays 64 KiB of counters it never splits by; the placement
// leader asks the per-slot form only of a group near a size threshold
// (node/placer.go), at most once per placeSizeEvery (10 s) outside
// migrations. Bounded: at most 16,384 fields (one per slot the group
// holds keys in; under 400 KiB at the worst).
func (s *KVState) opSlotStats(op Op) Result {
	var keys, bytes int64
	var per *[shard.Slots][2]int64
	stride, seen := int64(1), int64(0)
	if len(op.Args) == 1 {
		per = new([shard.Slots][2]int64)
		stride = max(1, int64(len(s.m))/slotStatsSample)
	}
	for k, e := range s.m {
		if e.exp != 0 && e.exp <= s.now || shard.Reserved(k) {
			continue
		}
		b := int64(entrySize(k, e))
		keys++
		bytes += b
		if per != nil && seen%stride == 0 {
			sl := &per[shard.KeySlot(k)]
			sl[0] += stride
			sl[1] += b * stride
		}
		seen++
	}
	if per == nil {
		return Array(Int(keys), Int(bytes))
	}
	var out []byte
	for sl := range per {
		if per[sl][0] == 0 {
			continue
		}
		if len(out) > 0 {
			out = append(out, ' ')
		}
		out = strconv.AppendInt(out, int64(sl), 10)
		out = append(out, ':')
		out = strconv.AppendInt(out, per[sl][0], 10)
		out = append(out, ':')
		out = strconv.AppendInt(out, per[sl][1], 10)
	}
	return Array(Int(keys), Int(bytes), Bytes(out))
}

func checkSlotStats(op Op) error {
	if len(op.Args) == 1 && string(op.Args[0]) != "slots" {
		return fmt.Errorf("slotstats takes no argument or \"slots\", not %q", op.Args[0])
	}
	return nil
}

// entrySize is the length of key k's entry in a snapshot (encodeEntries:
// the key, its generation, its deadline, its value's encode), computed
// from the lengths alone: O(1) for a string, O(elements) for a collection
// (the walk visits no more than a snapshot's encoding would), encoded
// into a scratch buffer only for a stream (TestEntrySize checks every
// type against the encoding).
func entrySize(k string, e kvEntry) int {
	return strLen(len(k)) + uvarintLen(e.gen) + varintLen(e.exp) + e.encodedLen()
}

// encodedLen is the length of e.encode's output.
func (e kvEntry) encodedLen() int {
	n := 1 // the type
	if e.c == nil {
		return n + strLen(len(e.v))
	}
	c := e.c
	switch c.t {
	case tHash:
		n += uvarintLen(uint64(len(c.h)))
		for f, v := range c.h {
			n += strLen(len(f)) + strLen(len(v))
		}
	case tList:
		n += uvarintLen(uint64(len(c.l)))
		for _, x := range c.l {
			n += strLen(len(x))
		}
	case tSet:
		n += uvarintLen(uint64(len(c.set)))
		for m := range c.set {
			n += strLen(len(m))
		}
	case tZSet:
		n += uvarintLen(uint64(len(c.zs)))
		for _, z := range c.zs {
			n += strLen(len(z.m)) + uvarintLen(math.Float64bits(z.score))
		}
	case tStream:
		var w wire.Encoder
		c.st.encode(&w)
		n += len(w.B)
	}
	return n
}

// strLen is the length of a length-prefixed string of n bytes.
func strLen(n int) int { return uvarintLen(uint64(n)) + n }

// uvarintLen is the length of v as an unsigned varint.
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// varintLen is the length of v as a zig-zag signed varint.
func varintLen(v int64) int { return uvarintLen(uint64(v)<<1 ^ uint64(v>>63)) }
