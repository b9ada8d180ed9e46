package service

// Locks implements Lockable: one lock per key the operation names,
// exclusive for the operations that may write (set, del, hset, rename, ...),
// shared for reads; RENAME locks both keys, SINTER/SUNION/SDIFF every key
// they read. A keyspace-wide operation (flushdb, scan, keys, dbsize,
// randomkey, dbinfo, activeexpire) locks the empty key only: under T-Paxos
// it is not isolated from a transaction's per-key locks (documented
// limitation: run it outside transactions).
func (KV) Locks(op Op) []Lock {
	write := !(KV{}).IsRead(op)
	out := []Lock{{Key: op.Key, Write: write}}
	o := kvOps[op.Kind]
	var more []string
	switch {
	case o.keys != nil:
		more = o.keys(op)
	case op.Kind == "sinter" || op.Kind == "sunion" || op.Kind == "sdiff":
		more = argStrings(op.Args)
	}
	for _, k := range more {
		dup := false
		for _, l := range out {
			dup = dup || l.Key == k
		}
		if !dup {
			out = append(out, Lock{Key: k, Write: write})
		}
	}
	return out
}

// SpansKeyspace reports whether op reads or writes the whole keyspace
// (flushdb, scan, keys, dbsize, randomkey, dbinfo, activeexpire) beyond the
// keys Locks names: with it, an operation's result and effect depend on,
// and touch, only the keys Locks names (protocol/esds relies on this to
// apply an operation out of order when no later one touches its keys).
func (KV) SpansKeyspace(op Op) bool { return kvOps[op.Kind].keyspace }
