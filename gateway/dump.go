package gateway

// DUMP and RESTORE (issue 34), each one KV operation (service/kv_dump.go)
// with Synod's own payload: it round-trips between Synod namespaces and
// clusters, and a payload from Redis is refused as damaged (Redis's
// "DUMP payload version or checksum are wrong").

func init() {
	register("generic",
		key1("dump", 2, fRead, keyPlan("dump", 0, nil, nil)),
		key1("restore", -4, fWriteMem, keyPlan("restore", 0, nil, nil)),
	)
}
