package gateway

// Expiry commands (plans, plan.go) onto the KV expiry operations
// (service/kv_doc.go, "Expiry"): deadlines are replicated state and time
// comes from the protocol (the leader's clock in the log for paxos and
// pbpaxos). On a protocol that orders no time (ABD, blocking, ESDS) the
// service refuses every operation that sets a deadline, and TTL answers -1.

var expireWords = []string{"nx", "xx", "gt", "lt"}

func init() {
	register("generic",
		key1("expire", -3, fWriteFast, keyPlan("expire", 3, expireWords, nil)),
		key1("pexpire", -3, fWriteFast, keyPlan("pexpire", 3, expireWords, nil)),
		key1("expireat", -3, fWriteFast, keyPlan("expireat", 3, expireWords, nil)),
		key1("pexpireat", -3, fWriteFast, keyPlan("pexpireat", 3, expireWords, nil)),
		key1("ttl", 2, fReadFast, keyPlan("ttl", 0, nil, nil)),
		key1("pttl", 2, fReadFast, keyPlan("pttl", 0, nil, nil)),
		key1("expiretime", 2, fReadFast, keyPlan("expiretime", 0, nil, nil)),
		key1("pexpiretime", 2, fReadFast, keyPlan("pexpiretime", 0, nil, nil)),
		key1("persist", 2, fWriteFast, keyPlan("persist", 0, nil, nil)),
	)
}
