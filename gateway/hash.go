package gateway

import "github.com/synod-dev/synod/service"

// Hash commands (plans, plan.go) onto the KV hash operations
// (service/kv_doc.go, "Hashes"). HMSET is HSET answering OK; HGETALL is a
// map in RESP3.

func init() {
	register("hash",
		key1("hset", -4, fWriteMemF, planHSet),
		key1("hmset", -4, fWriteMemF, planHSet),
		key1("hsetnx", 4, fWriteMemF, keyPlan("hsetnx", 0, nil, nil)),
		key1("hget", 3, fReadFast, keyPlan("hget", 0, nil, nil)),
		key1("hmget", -3, fReadFast, keyPlan("hmget", 0, nil, nil)),
		key1("hdel", -3, fWriteFast, keyPlan("hdel", 0, nil, nil)),
		key1("hgetall", 2, fRead, keyPlan("hgetall", 0, nil, asMap)),
		key1("hkeys", 2, fRead, keyPlan("hkeys", 0, nil, nil)),
		key1("hvals", 2, fRead, keyPlan("hvals", 0, nil, nil)),
		key1("hlen", 2, fReadFast, keyPlan("hlen", 0, nil, nil)),
		key1("hexists", 3, fReadFast, keyPlan("hexists", 0, nil, nil)),
		key1("hstrlen", 3, fReadFast, keyPlan("hstrlen", 0, nil, nil)),
		key1("hincrby", 4, fWriteMemF, keyPlan("hincrby", 0, nil, nil)),
		key1("hincrbyfloat", 4, fWriteMemF, keyPlan("hincrbyfloat", 0, nil, nil)),
	)
}

func planHSet(c *conn, args [][]byte) plan {
	name := lower(args[0])
	if p, ok := c.kvOnly(name); !ok {
		return p
	}
	if len(args)%2 != 0 {
		return errPlan("%s", arityErr(name))
	}
	return opPlan(kvOp("hset", args[1], args[2:]...), func(r service.Result) service.Result {
		if name == "hmset" {
			return service.OK()
		}
		return r
	})
}
