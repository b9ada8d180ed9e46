package gateway

// Set commands (plans, plan.go) onto the KV set operations
// (service/kv_doc.go, "Sets"). SMEMBERS, SINTER, SUNION and SDIFF are sets
// in RESP3. SINTER/SUNION/SDIFF are one operation over all their keys (the
// first is Op.Key), so they read one consistent cut.

func init() {
	register("set",
		key1("sadd", -3, fWriteMemF, keyPlan("sadd", 0, nil, nil)),
		key1("srem", -3, fWriteFast, keyPlan("srem", 0, nil, nil)),
		key1("smembers", 2, fRead, keyPlan("smembers", 0, nil, asSet)),
		key1("sismember", 3, fReadFast, keyPlan("sismember", 0, nil, nil)),
		key1("smismember", -3, fReadFast, keyPlan("smismember", 0, nil, nil)),
		key1("scard", 2, fReadFast, keyPlan("scard", 0, nil, nil)),
		key1("spop", -2, fWriteFast, keyPlan("spop", 0, nil, nil)),
		key1("srandmember", -2, fRead, keyPlan("srandmember", 0, nil, nil)),
		allKeys("sinter", -2, fRead, keyPlan("sinter", 0, nil, asSet)),
		allKeys("sunion", -2, fRead, keyPlan("sunion", 0, nil, asSet)),
		allKeys("sdiff", -2, fRead, keyPlan("sdiff", 0, nil, asSet)),
	)
}

// allKeys is a command whose every argument is a key.
func allKeys(name string, arity int, flags []string, p planFunc) *command {
	return &command{name: name, arity: arity, flags: flags, first: 1, last: -1, step: 1, plan: p}
}
