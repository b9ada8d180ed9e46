package service

import (
	"strconv"

	"github.com/synod-dev/synod/shard"
)

// The migration driver's actions as KV operations (package shard,
// "Online slot migration"): the atomic group an action of shard.Machine
// is in a group's log, and the outcome read back from its results. The
// live node (node/migrate.go) and the sharded simulation (sim/shards_driver.go)
// both run these.

func kvArgs(kind, key string, args ...string) Op {
	op := Op{Kind: kind, Key: key}
	for _, a := range args {
		op.Args = append(op.Args, []byte(a))
	}
	return op
}

// MigrationOps is the atomic group that carries out driver action a in
// its group (nil for the actions that are not a group's: save, flip,
// wait, stop). Every copy action is guarded by the driver's token, every
// state change by the states it expects; a freeze also waits until no
// cross-shard transaction holds the slot (shard/txn, "Migrations": a
// commit after the final copy would be lost to the destination).
func MigrationOps(a shard.Action) []Op {
	tok := func() Op { return kvArgs(GuardKind, shard.StateKey(a.Slots[0].First), "slot", shard.TokMode(a.Token)) }
	switch a.Kind {
	case shard.ActSetState:
		var ops, sets []Op
		mode := shard.InMode(a.State.Token, a.Expect)
		for _, r := range a.Slots {
			for sl := r.First; sl <= r.Last; sl++ {
				ops = append(ops, kvArgs(GuardKind, shard.StateKey(sl), "slot", mode))
				if a.State.State == shard.StFrozen {
					ops = append(ops, kvArgs(GuardKind, shard.LockKey(sl), "exists", "0"))
				}
				sets = append(sets, kvArgs("set", shard.StateKey(sl), a.State.String()))
			}
		}
		return append(ops, sets...)
	case shard.ActScan:
		return []Op{kvArgs("scan", "", strconv.FormatUint(a.Cursor, 10), "count", strconv.Itoa(a.Count))}
	case shard.ActDump:
		ops := []Op{tok()}
		for _, k := range a.Keys {
			ops = append(ops, kvArgs("dump", k), kvArgs("pttl", k))
		}
		return ops
	case shard.ActImport:
		ops := []Op{tok()}
		for _, it := range a.Items {
			if it.Absent {
				ops = append(ops, kvArgs("del", it.Key))
				continue
			}
			ops = append(ops, Op{Kind: "restore", Key: it.Key, Args: [][]byte{[]byte(strconv.FormatInt(it.TTL, 10)), it.Value, []byte("replace")}})
		}
		return ops
	case shard.ActTake:
		return []Op{tok(), kvArgs("smembers", shard.DirtyKey), kvArgs("smembers", shard.TakenKey)}
	case shard.ActClearTaken:
		return []Op{tok(), kvArgs("del", shard.TakenKey)}
	case shard.ActDelete:
		ops := []Op{tok()}
		for _, k := range a.Keys {
			ops = append(ops, kvArgs("del", k))
		}
		return ops
	}
	return nil
}

// MigrationOutcome reads the outcome of action a from the results rs of
// MigrationOps(a) (no guard failed). For a take, it also returns the
// group that moves the dirty keys read into the taken set (nil when none
// were dirty): keys marked since stay dirty for the next pass.
func MigrationOutcome(a shard.Action, rs []Result) (o shard.Outcome, next []Op) {
	switch a.Kind {
	case shard.ActScan:
		if len(rs) != 1 || len(rs[0].Elems) != 2 {
			return shard.Outcome{Err: "bad scan answer"}, nil
		}
		o.Cursor, _ = strconv.ParseUint(string(rs[0].Elems[0].Bytes), 10, 64)
		for _, k := range rs[0].Elems[1].Elems {
			o.Keys = append(o.Keys, string(k.Bytes))
		}
	case shard.ActDump:
		for i, k := range a.Keys {
			d, t := rs[1+2*i], rs[2+2*i]
			it := shard.Item{Key: k}
			if d.Type != ResultBytes || t.Int == -2 {
				it.Absent = true
			} else {
				it.Value = d.Bytes
				it.TTL = max(t.Int, 0)
			}
			o.Items = append(o.Items, it)
		}
	case shard.ActImport:
		for _, r := range rs[1:] {
			if r.IsErr() {
				return shard.Outcome{Err: "import: " + r.Err}, nil
			}
		}
	case shard.ActTake:
		seen := map[string]bool{}
		var dirty [][]byte
		for _, e := range rs[1].Elems {
			dirty = append(dirty, e.Bytes)
		}
		for _, e := range append(rs[1].Elems, rs[2].Elems...) {
			if k := string(e.Bytes); !seen[k] {
				seen[k] = true
				o.Keys = append(o.Keys, k)
			}
		}
		if len(dirty) > 0 {
			tok := MigrationOps(a)[0]
			next = []Op{tok, {Kind: "sadd", Key: shard.TakenKey, Args: dirty}, {Kind: "srem", Key: shard.DirtyKey, Args: dirty}}
		}
	}
	return o, next
}
