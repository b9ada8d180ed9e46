package service

// Locks implements Lockable: one lock per key, exclusive for the
// operations that may write it (set, del, cas, append, incr), shared for
// get and exists.
func (KV) Locks(op Op) []Lock {
	return []Lock{{Key: op.Key, Write: !(KV{}).IsRead(op)}}
}
