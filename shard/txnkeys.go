package shard

import (
	"strconv"
	"strings"
)

// Cross-shard transactions' reserved keys (issue 33 item 5; the protocol is
// in package shard/txn and service/kv_txn.go). Each lives in one group's
// keyspace, beside migration's, under ReservedPrefix, so that it is in the
// group's log, snapshots and state hash, and no client can name it.

// LockKey is the reserved key of slot's transaction lock in a group: its
// value is the id of the transaction that holds the slot (prepared, not yet
// decided). Locks are per slot: see package shard/txn, "Isolation".
func LockKey(slot int) string { return ReservedPrefix + "lock:" + strconv.Itoa(slot) }

// TxKey is the reserved key of prepared transaction id's record in a
// participant group (its coordinator group, slots and operations).
func TxKey(id string) string { return ReservedPrefix + "tx:" + id }

// DecisionKey is the reserved key of transaction id's decision (commit or
// abort) in its coordinator group.
func DecisionKey(id string) string { return ReservedPrefix + "txd:" + id }

// PreparedKey is the set of the transactions prepared in a group (their
// ids), which a resolver lists.
const PreparedKey = ReservedPrefix + "txs"

// TxID returns the transaction id of a TxKey or DecisionKey.
func TxID(key string) string {
	for _, p := range []string{ReservedPrefix + "tx:", ReservedPrefix + "txd:"} {
		if strings.HasPrefix(key, p) {
			return key[len(p):]
		}
	}
	return ""
}

// SlotOfStateKey is the slot a StateKey names (-1 if key is not one).
func SlotOfStateKey(key string) int {
	s, ok := strings.CutPrefix(key, ReservedPrefix+"slot:")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// RefuseLocked is the slot guard's refusal of a client request naming a
// slot a prepared cross-shard transaction holds (the node answers
// TRYAGAIN; the peer word of the refusal is the transaction's id).
const RefuseLocked = "LOCKED"
