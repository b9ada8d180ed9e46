package gateway

import "github.com/synod-dev/synod/service"

// List commands (plans, plan.go) onto the KV list operations
// (service/kv_doc.go, "Lists").

func init() {
	register("list",
		key1("lpush", -3, fWriteMemF, keyPlan("lpush", 0, nil, nil)),
		key1("rpush", -3, fWriteMemF, keyPlan("rpush", 0, nil, nil)),
		key1("lpushx", -3, fWriteMemF, keyPlan("lpushx", 0, nil, nil)),
		key1("rpushx", -3, fWriteMemF, keyPlan("rpushx", 0, nil, nil)),
		key1("lpop", -2, fWriteFast, planPop),
		key1("rpop", -2, fWriteFast, planPop),
		key1("lrange", 4, fRead, keyPlan("lrange", 0, nil, nil)),
		key1("llen", 2, fReadFast, keyPlan("llen", 0, nil, nil)),
		key1("lindex", 3, fRead, keyPlan("lindex", 0, nil, nil)),
		key1("lset", 4, fWriteMem, keyPlan("lset", 0, nil, nil)),
		key1("lrem", 4, fWrite, keyPlan("lrem", 0, nil, nil)),
		key1("ltrim", 4, fWrite, keyPlan("ltrim", 0, nil, nil)),
		key1("linsert", 5, fWriteMem, planLInsert),
	)
}

// planLInsert lower-cases BEFORE|AFTER, the only option word (the pivot
// and element are values).
func planLInsert(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("linsert"); !ok {
		return p
	}
	a := append([][]byte(nil), args[2:]...)
	a[0] = []byte(lower(a[0]))
	return opPlan(kvOp("linsert", args[1], a...), nil)
}

// planPop is LPOP/RPOP key [count]; with a count, a missing key answers a
// null array, as in Redis.
func planPop(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly(lower(args[0])); !ok {
		return p
	}
	if len(args) > 3 {
		return errPlan("%s", arityErr(lower(args[0])))
	}
	counted := len(args) == 3
	return opPlan(kvOp(lower(args[0]), args[1], args[2:]...), func(r service.Result) service.Result {
		if counted && r.Type == service.ResultNil {
			return nullArray()
		}
		return r
	})
}
