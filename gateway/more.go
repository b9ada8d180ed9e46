package gateway

import (
	"strconv"

	"github.com/synod-dev/synod/service"
)

// More key, list, set, hash and sorted-set commands (issue 34), each one
// KV operation (service/kv_more.go), so atomic on every protocol that runs
// it: COPY, SMOVE, SINTERSTORE/SUNIONSTORE/SDIFFSTORE, SINTERCARD, LMOVE,
// RPOPLPUSH, LPOS, HRANDFIELD. SSCAN, HSCAN and ZSCAN read the whole
// collection in one operation and answer it as one page with cursor 0
// (Redis allows a SCAN page of any size, and small collections answer
// that way in Redis too), filtered by MATCH; COUNT is checked and is a hint.

func init() {
	register("generic",
		&command{name: "copy", arity: -3, flags: fWriteMem, first: 1, last: 2, step: 1, plan: planCopy},
	)
	register("set",
		&command{name: "smove", arity: 4, flags: fWriteFast, first: 1, last: 2, step: 1, plan: planSMove},
		&command{name: "sinterstore", arity: -3, flags: fWriteMem, first: 1, last: -1, step: 1, plan: planSetStore("sinter")},
		&command{name: "sunionstore", arity: -3, flags: fWriteMem, first: 1, last: -1, step: 1, plan: planSetStore("sunion")},
		&command{name: "sdiffstore", arity: -3, flags: fWriteMem, first: 1, last: -1, step: 1, plan: planSetStore("sdiff")},
		&command{name: "sintercard", arity: -3, flags: []string{"readonly", "movablekeys"}, plan: planInterCard("sintercard")},
		key1("sscan", -3, fRead, planCollScan("sscan", "smembers")),
	)
	register("list",
		&command{name: "lmove", arity: 5, flags: fWriteMem, first: 1, last: 2, step: 1, plan: planLMove},
		&command{name: "rpoplpush", arity: 3, flags: fWriteMem, first: 1, last: 2, step: 1, plan: planLMove},
		key1("lpos", -3, fRead, planLPos),
	)
	register("hash",
		key1("hrandfield", -2, fRead, planHRandField),
		key1("hscan", -3, fRead, planCollScan("hscan", "hgetall")),
	)
	register("sorted_set",
		key1("zscan", -3, fRead, planCollScan("zscan", "zrange")),
	)
}

// planCopy is COPY source destination [DB 0] [REPLACE] (one database per
// namespace: DB must be 0).
func planCopy(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("copy"); !ok {
		return p
	}
	replace := false
	for i := 3; i < len(args); i++ {
		switch lower(args[i]) {
		case "replace":
			replace = true
		case "db":
			if i+1 >= len(args) {
				return errPlan("ERR syntax error")
			}
			n, err := strconv.ParseInt(string(args[i+1]), 10, 64)
			if err != nil {
				return errPlan("ERR value is not an integer or out of range")
			}
			if n != 0 {
				return errPlan("ERR DB index is out of range")
			}
			i++
		default:
			return errPlan("ERR syntax error")
		}
	}
	a := [][]byte{args[2]}
	if replace {
		a = append(a, []byte("replace"))
	}
	return opPlan(kvOp("copy", args[1], a...), nil)
}

func planSMove(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("smove"); !ok {
		return p
	}
	return opPlan(kvOp("smove", args[1], args[2], args[3]), nil)
}

// planSetStore is S(INTER|UNION|DIFF)STORE destination key [key ...].
func planSetStore(kind string) planFunc {
	return func(c *conn, args [][]byte) plan {
		if p, ok := c.kvOnly(lower(args[0])); !ok {
			return p
		}
		a := append([][]byte{[]byte(kind)}, args[2:]...)
		return opPlan(kvOp("setstore", args[1], a...), nil)
	}
}

// planInterCard is SINTERCARD and ZINTERCARD (kind): numkeys key [key ...]
// [LIMIT limit].
func planInterCard(kind string) planFunc {
	return func(c *conn, args [][]byte) plan {
		return interCard(c, kind, args)
	}
}

func interCard(c *conn, kind string, args [][]byte) plan {
	if p, ok := c.kvOnly(kind); !ok {
		return p
	}
	n, err := strconv.ParseInt(string(args[1]), 10, 64)
	if err != nil || n <= 0 {
		return errPlan("ERR numkeys should be greater than 0")
	}
	if int64(len(args)-2) < n {
		return errPlan("ERR Number of keys can't be greater than number of args")
	}
	keys := args[2 : 2+n]
	limit := []byte("0")
	rest := args[2+n:]
	for i := 0; i < len(rest); i += 2 {
		if lower(rest[i]) != "limit" || i+1 >= len(rest) {
			return errPlan("ERR syntax error")
		}
		if l, err := strconv.ParseInt(string(rest[i+1]), 10, 64); err != nil || l < 0 {
			return errPlan("ERR LIMIT can't be negative") // Redis's answer to a non-number too
		}
		limit = rest[i+1]
	}
	a := append([][]byte{limit}, keys[1:]...)
	return opPlan(kvOp(kind, keys[0], a...), nil)
}

// planLMove is LMOVE source destination LEFT|RIGHT LEFT|RIGHT and
// RPOPLPUSH source destination (RIGHT LEFT).
func planLMove(c *conn, args [][]byte) plan {
	name := lower(args[0])
	if p, ok := c.kvOnly(name); !ok {
		return p
	}
	from, to := []byte("right"), []byte("left")
	if name == "lmove" {
		from, to = []byte(lower(args[3])), []byte(lower(args[4]))
	}
	return opPlan(kvOp("lmove", args[1], args[2], from, to), nil)
}

// planLPos is LPOS key element [RANK r] [COUNT n] [MAXLEN m].
func planLPos(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("lpos"); !ok {
		return p
	}
	a := lowerOpts(args, 3, "rank", "count", "maxlen")[2:]
	return opPlan(kvOp("lpos", args[1], a...), nil)
}

// planHRandField is HRANDFIELD key [count [WITHVALUES]].
func planHRandField(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("hrandfield"); !ok {
		return p
	}
	if len(args) > 4 {
		return errPlan("ERR syntax error")
	}
	a := lowerOpts(args, 3, "withvalues")[2:]
	withValues := len(a) == 2
	return opPlan(kvOp("hrandfield", args[1], a...), func(r service.Result) service.Result {
		if withValues {
			return shaped(r, shapeFields)
		}
		return r
	})
}

// planCollScan is SSCAN/HSCAN/ZSCAN key cursor [MATCH p] [COUNT n]: the
// whole collection (read by kind) as one page, cursor 0.
func planCollScan(name, kind string) planFunc {
	return func(c *conn, args [][]byte) plan {
		if p, ok := c.kvOnly(name); !ok {
			return p
		}
		if _, err := strconv.ParseUint(string(args[2]), 10, 64); err != nil {
			return errPlan("ERR invalid cursor")
		}
		var match []byte
		for i := 3; i < len(args); i += 2 {
			if i+1 >= len(args) {
				return errPlan("ERR syntax error")
			}
			switch lower(args[i]) {
			case "match":
				match = args[i+1]
			case "count":
				n, err := strconv.ParseInt(string(args[i+1]), 10, 64)
				if err != nil {
					return errPlan("ERR value is not an integer or out of range")
				}
				if n < 1 {
					return errPlan("ERR syntax error")
				}
			default:
				return errPlan("ERR syntax error")
			}
		}
		var op service.Op
		pairs := kind != "smembers"
		if kind == "zrange" {
			op = kvOp("zrange", args[1], []byte("0"), []byte("-1"), []byte("withscores"))
		} else {
			op = kvOp(kind, args[1])
		}
		return opPlan(op, func(r service.Result) service.Result {
			if r.Type != service.ResultArray {
				return r
			}
			var out []service.Result
			step := 1
			if pairs {
				step = 2
			}
			for i := 0; i+step-1 < len(r.Elems); i += step {
				if match != nil && !service.GlobMatch(match, r.Elems[i].Bytes) {
					continue
				}
				out = append(out, r.Elems[i:i+step]...)
			}
			for i := range out {
				out[i].Err = "" // plain bulk strings (ZSCAN's scores too, as Redis)
			}
			return service.Array(service.Bytes([]byte("0")), service.Array(out...))
		})
	}
}
