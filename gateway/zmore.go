package gateway

import (
	"strconv"

	"github.com/synod-dev/synod/service"
)

// ZRANDMEMBER, ZRANGESTORE and ZINTERCARD (issue 34), each one KV
// operation (service/kv_zmore.go).

func init() {
	register("sorted_set",
		key1("zrandmember", -2, fRead, planZRandMember),
		&command{name: "zrangestore", arity: -5, flags: fWriteMem, first: 1, last: 2, step: 1, plan: planZRangeStore},
		&command{name: "zintercard", arity: -3, flags: []string{"readonly", "movablekeys"}, plan: planInterCard("zintercard")},
	)
}

// planZRandMember is ZRANDMEMBER key [count [WITHSCORES]].
func planZRandMember(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("zrandmember"); !ok {
		return p
	}
	if len(args) > 4 {
		return errPlan("ERR syntax error")
	}
	if len(args) >= 3 {
		if _, err := strconv.ParseInt(string(args[2]), 10, 64); err != nil {
			return errPlan("ERR value is not an integer or out of range")
		}
	}
	a := lowerOpts(args, 3, "withscores")[2:]
	withScores := len(a) == 2
	return opPlan(kvOp("zrandmember", args[1], a...), func(r service.Result) service.Result {
		if withScores {
			return asPairs(r)
		}
		return r
	})
}

// planZRangeStore is ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV]
// [LIMIT offset count].
func planZRangeStore(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("zrangestore"); !ok {
		return p
	}
	a := lowerOpts(args, 5, zrangeWords...)[2:]
	return opPlan(kvOp("zrangestore", args[1], a...), nil)
}
