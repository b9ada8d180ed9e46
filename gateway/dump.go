package gateway

// DUMP and RESTORE (issue 34), each one KV operation (service/kv_dump.go)
// with Redis's own payload (service/kv_rdb.go): a payload dumped by
// redis-server restores on Synod and one dumped by Synod on redis-server.

func init() {
	register("generic",
		key1("dump", 2, fRead, keyPlan("dump", 0, nil, nil)),
		key1("restore", -4, fWriteMem, keyPlan("restore", 0, nil, nil)),
	)
}
