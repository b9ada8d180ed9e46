package gateway

import (
	"strconv"

	"github.com/synod-dev/synod/service"
)

// Sorted-set commands (plans, plan.go) onto the KV sorted-set operations
// (service/kv_doc.go, "Sorted sets"). ZRANGEBYSCORE, ZREVRANGE,
// ZREVRANGEBYSCORE and ZRANGEBYLEX are zrange with options, as the spec
// says. Scores are doubles in RESP3 and WITHSCORES pairs nest there, as
// from Redis 7.

var zrangeWords = []string{"byscore", "bylex", "rev", "limit", "withscores"}

func init() {
	register("sorted_set",
		key1("zadd", -4, fWriteMemF, planZAdd),
		key1("zrem", -3, fWriteFast, keyPlan("zrem", 0, nil, nil)),
		key1("zscore", 3, fReadFast, keyPlan("zscore", 0, nil, asDouble)),
		key1("zmscore", -3, fReadFast, keyPlan("zmscore", 0, nil, doubles)),
		key1("zincrby", 4, fWriteMemF, keyPlan("zincrby", 0, nil, asDouble)),
		key1("zcard", 2, fReadFast, keyPlan("zcard", 0, nil, nil)),
		key1("zcount", 4, fReadFast, keyPlan("zcount", 0, nil, nil)),
		key1("zrank", 3, fReadFast, keyPlan("zrank", 0, nil, nil)),
		key1("zrevrank", 3, fReadFast, keyPlan("zrevrank", 0, nil, nil)),
		key1("zrange", -4, fRead, planZRange(nil)),
		key1("zrangebyscore", -4, fRead, planZRange([]string{"byscore"})),
		key1("zrevrangebyscore", -4, fRead, planZRange([]string{"byscore", "rev"})),
		key1("zrevrange", -4, fRead, planZRange([]string{"rev"})),
		key1("zrangebylex", -4, fRead, planZRange([]string{"bylex"})),
		key1("zrevrangebylex", -4, fRead, planZRange([]string{"bylex", "rev"})),
		key1("zlexcount", 4, fReadFast, planZLexCount),
		&command{name: "zunion", arity: -3, flags: []string{"readonly", "movablekeys"}, plan: planZCombine("union", false), getkeys: zCombineKeys},
		&command{name: "zinter", arity: -3, flags: []string{"readonly", "movablekeys"}, plan: planZCombine("inter", false), getkeys: zCombineKeys},
		&command{name: "zdiff", arity: -3, flags: []string{"readonly", "movablekeys"}, plan: planZCombine("diff", false), getkeys: zCombineKeys},
		&command{name: "zunionstore", arity: -4, flags: []string{"write", "denyoom", "movablekeys"}, plan: planZCombine("union", true), getkeys: zStoreKeys},
		&command{name: "zinterstore", arity: -4, flags: []string{"write", "denyoom", "movablekeys"}, plan: planZCombine("inter", true), getkeys: zStoreKeys},
		&command{name: "zdiffstore", arity: -4, flags: []string{"write", "denyoom", "movablekeys"}, plan: planZCombine("diff", true), getkeys: zStoreKeys},
		key1("zremrangebyrank", 4, fWrite, planZRemRange(nil)),
		key1("zremrangebyscore", 4, fWrite, planZRemRange([]byte("byscore"))),
		key1("zremrangebylex", 4, fWrite, planZRemRange([]byte("bylex"))),
		key1("zpopmin", -2, fWriteFast, planZPop("zpopmin")),
		key1("zpopmax", -2, fWriteFast, planZPop("zpopmax")),
	)
}

// zCombineKeys is ZUNION/ZINTER/ZDIFF's key finder (Redis's
// zunionInterDiffGetKeys): numkeys, then that many keys.
func zCombineKeys(args [][]byte) [][]byte {
	n, err := strconv.Atoi(string(args[1]))
	if err != nil || n <= 0 || n > len(args)-2 {
		return nil
	}
	return args[2 : 2+n]
}

// zStoreKeys is ZUNIONSTORE/ZINTERSTORE/ZDIFFSTORE's key finder (Redis's
// zunionInterDiffStoreGetKeys): the destination, then numkeys keys.
func zStoreKeys(args [][]byte) [][]byte {
	keys := zCombineKeys(args[1:])
	if keys == nil {
		return nil
	}
	return append([][]byte{args[1]}, keys...)
}

// planZAdd lower-cases the leading option words (up to the first score).
func planZAdd(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("zadd"); !ok {
		return p
	}
	a := append([][]byte(nil), args[2:]...)
	incr := false
	for i := range a {
		w := lower(a[i])
		switch w {
		case "nx", "xx", "gt", "lt", "ch", "incr":
			a[i] = []byte(w)
			incr = incr || w == "incr"
			continue
		}
		break
	}
	return opPlan(kvOp("zadd", args[1], a...), func(r service.Result) service.Result {
		if incr {
			return asDouble(r)
		}
		return r
	})
}

// planZRange maps ZRANGE and its older spellings (extra: the options the
// spelling implies). ZREVRANGEBYSCORE takes max before min; zrange with
// byscore and rev takes them in that order too, as Redis's ZRANGE does.
func planZRange(extra []string) planFunc {
	return func(c *conn, args [][]byte) plan {
		if p, ok := c.kvOnly(lower(args[0])); !ok {
			return p
		}
		a := lowerOpts(args, 4, zrangeWords...)[2:]
		for _, e := range extra {
			a = append(a, []byte(e))
		}
		withScores := false
		for _, x := range a[2:] {
			withScores = withScores || string(x) == "withscores"
		}
		return opPlan(kvOp("zrange", args[1], a...), func(r service.Result) service.Result {
			if withScores {
				return asPairs(r)
			}
			return r
		})
	}
}

// planZPop maps ZPOPMIN/ZPOPMAX: with a count, pairs (nested in RESP3);
// without, one member and its score.
func planZPop(kind string) planFunc {
	return func(c *conn, args [][]byte) plan {
		if p, ok := c.kvOnly(kind); !ok {
			return p
		}
		counted := len(args) > 2
		return opPlan(kvOp(kind, args[1], args[2:]...), func(r service.Result) service.Result {
			if counted {
				return asPairs(r)
			}
			if r.Type == service.ResultArray && len(r.Elems) == 2 {
				r.Elems = []service.Result{r.Elems[0], asDouble(r.Elems[1])}
			}
			return r
		})
	}
}

// planZLexCount is ZLEXCOUNT key min max: the length of zrange min max bylex.
func planZLexCount(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("zlexcount"); !ok {
		return p
	}
	return opPlan(kvOp("zrange", args[1], args[2], args[3], []byte("bylex")), func(r service.Result) service.Result {
		if r.Type == service.ResultArray {
			return service.Int(int64(len(r.Elems)))
		}
		return r
	})
}

// planZRemRange maps ZREMRANGEBYRANK/BYSCORE/BYLEX onto zremrange with the
// mode (nil: by rank).
func planZRemRange(mode []byte) planFunc {
	return func(c *conn, args [][]byte) plan {
		if p, ok := c.kvOnly(lower(args[0])); !ok {
			return p
		}
		a := [][]byte{args[2], args[3]}
		if mode != nil {
			a = append(a, mode)
		}
		return opPlan(kvOp("zremrange", args[1], a...), nil)
	}
}

// planZCombine maps ZUNION/ZINTER/ZDIFF numkeys key ... [WEIGHTS w ...]
// [AGGREGATE SUM|MIN|MAX] [WITHSCORES] and their STORE forms (destination
// first) onto zcombine / zcombinestore (service/kv_more.go): one operation,
// atomic wherever it runs. ZDIFF takes neither WEIGHTS nor AGGREGATE. No
// key positions are declared (COMMAND INFO 0 0 0, movablekeys): a STORE
// form reads other keys than its first, so it must not be pipelined on its
// first key alone (pipeline.go).
func planZCombine(mode string, store bool) planFunc {
	return func(c *conn, args [][]byte) plan {
		name := lower(args[0])
		if p, ok := c.kvOnly(name); !ok {
			return p
		}
		i := 1
		var dst []byte
		if store {
			dst, i = args[1], 2
		}
		n, err := strconv.ParseInt(string(args[i]), 10, 64)
		if err != nil {
			return errPlan("ERR value is not an integer or out of range")
		}
		if n < 1 {
			return errPlan("ERR at least 1 input key is needed for '%s' command", name)
		}
		if n > int64(len(args)-i-1) {
			return errPlan("ERR syntax error")
		}
		keys := args[i+1 : i+1+int(n)]
		weights := make([][]byte, n)
		for j := range weights {
			weights[j] = []byte("1")
		}
		agg, withScores := "sum", false
		rest := args[i+1+int(n):]
		for j := 0; j < len(rest); j++ {
			switch w := lower(rest[j]); {
			case w == "weights" && mode != "diff" && j+int(n) < len(rest):
				for k := range weights {
					weights[k] = rest[j+1+k]
				}
				j += int(n)
			case w == "aggregate" && mode != "diff" && j+1 < len(rest):
				agg = lower(rest[j+1])
				if agg != "sum" && agg != "min" && agg != "max" {
					return errPlan("ERR syntax error")
				}
				j++
			case w == "withscores" && !store:
				withScores = true
			default:
				return errPlan("ERR syntax error")
			}
		}
		a := [][]byte{[]byte(mode), []byte(agg), []byte(strconv.FormatInt(n, 10))}
		a = append(append(a, keys...), weights...)
		if store {
			return opPlan(kvOp("zcombinestore", dst, a...), nil)
		}
		return opPlan(kvOp("zcombine", keys[0], a...), func(r service.Result) service.Result {
			if r.Type != service.ResultArray {
				return r
			}
			if withScores {
				return asPairs(r)
			}
			out := make([]service.Result, 0, len(r.Elems)/2)
			for k := 0; k < len(r.Elems); k += 2 {
				out = append(out, r.Elems[k])
			}
			return service.Array(out...)
		})
	}
}
