package service

// Locks implements Lockable: one lock per key the operation names,
// exclusive for the operations that may write (set, del, hset, rename, ...),
// shared for reads; RENAME locks both keys, SINTER/SUNION/SDIFF every key
// they read. A keyspace-wide operation (flushdb, scan, keys, dbsize,
// randomkey, dbinfo, activeexpire) locks the empty key only (one with a key
// besides, SORT with BY or GET patterns, locks both): under T-Paxos
// it is not isolated from a transaction's per-key locks (documented
// limitation: run it outside transactions).
func (KV) Locks(op Op) []Lock { return (KV{}).AppendLocks(nil, op) }

// AppendLocks appends Locks(op) to dst and returns the extended slice: no
// allocation when dst has room (protocol/esds keeps a key-local
// operation's one lock in the operation itself, and takes a read's in a
// scratch array: an allocation per put and per get per replica before).
func (KV) AppendLocks(dst []Lock, op Op) []Lock {
	write := !(KV{}).IsRead(op)
	out := append(dst, Lock{Key: op.Key, Write: write})
	n := len(dst)
	o := kvOps[op.Kind]
	var more []string
	switch {
	case o.keys != nil:
		more = o.keys(op)
	case op.Kind == "sinter" || op.Kind == "sunion" || op.Kind == "sdiff":
		more = argStrings(op.Args)
	}
	if o.keyspace && op.Key != "" {
		// It reads keys it cannot name (SORT's BY and GET patterns): it
		// locks the keyspace too, so that a protocol that runs one key's
		// operations apart (orca-primary, the sharded KV) refuses it.
		more = append(more, "")
	}
	for _, k := range more {
		dup := false
		for _, l := range out[n:] {
			dup = dup || l.Key == k
		}
		if !dup {
			out = append(out, Lock{Key: k, Write: write})
		}
	}
	return out
}

// KeyLocal reports whether op's result and effect depend on, and touch,
// nothing but the keys Locks names, so that it commutes with any
// operation on other keys that is key-local too. Conservatively only GET,
// SET, APPEND, INCR and STRLEN: an operation that may delete a key can
// flush the remembered deletions into the state-wide version floor (forget,
// flushWT), which the version of every absent key, hence of a key SET or
// INCR creates, depends on; keyspace-wide operations read every key.
// protocol/esds applies a key-local operation out of label order when no
// later one names its keys.
func (KV) KeyLocal(op Op) bool { return kvKeyLocal[op.Kind] }

var kvKeyLocal = map[string]bool{"get": true, "set": true, "append": true, "incr": true, "strlen": true}

// StateFreeResult implements StateFree: SET key value without options
// answers OK in every state (opSet: no GET, NX, XX or expiry option, so
// neither the old value, its type nor the clock is read for the answer).
func (KV) StateFreeResult(op Op) (Result, bool) {
	if op.Kind == "set" && len(op.Args) == 1 {
		return OK(), true
	}
	return Result{}, false
}
