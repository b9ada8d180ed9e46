package service

import (
	"fmt"

	"github.com/synod-dev/synod/shard"
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
		"slotstats": {read: true, keyspace: true, run: (*KVState).opSlotStats},
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

// opSlotStats is a group's size for the placement service's decisions
// (shard.Decide): its live keys and their bytes, reserved keys (slot
// states, dirty sets) left out. Bytes are the key's length plus a string's
// value length, or plus 32 bytes per element of a collection (an estimate:
// the exact serialized size would cost a DUMP per key).
func (s *KVState) opSlotStats(Op) Result {
	var keys, bytes int64
	for k, e := range s.m {
		if e.exp != 0 && e.exp <= s.now || shard.Reserved(k) {
			continue
		}
		keys++
		bytes += int64(len(k))
		if e.c == nil {
			bytes += int64(len(e.v))
		} else {
			bytes += 32 * int64(e.c.size())
		}
	}
	return Array(Int(keys), Int(bytes))
}
