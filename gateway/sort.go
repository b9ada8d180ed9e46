package gateway

import (
	"bytes"

	"github.com/synod-dev/synod/service"
)

// SORT and SORT_RO (issue 34): one KV operation (service/kv_sort.go), so
// the sort, the BY and GET lookups and the STORE are atomic. A BY pattern
// with '*' or a GET pattern other than '#' reads keys the command does
// not name: such a SORT is the "sortkeys" kind, which a namespace running
// operations in parallel by their keys (eve, adam, orca-primary) refuses,
// and a sharded namespace refuses BY and GET as Redis Cluster does.

func init() {
	register("generic",
		&command{name: "sort", arity: -2, flags: []string{"write", "denyoom", "movablekeys"}, first: 1, last: 1, step: 1, plan: planSort(false), getkeys: sortKeys},
		&command{name: "sort_ro", arity: -2, flags: []string{"readonly", "movablekeys"}, first: 1, last: 1, step: 1, plan: planSort(true)},
	)
}

// planSort is SORT key [BY pattern] [LIMIT offset count] [GET pattern
// ...] [ASC|DESC] [ALPHA] [STORE destination], and SORT_RO without STORE.
func planSort(ro bool) planFunc {
	return func(c *conn, args [][]byte) plan {
		name := "sort"
		if ro {
			name = "sort_ro"
		}
		if p, ok := c.kvOnly(name); !ok {
			return p
		}
		var opts [][]byte
		var store []byte
		for j := 2; j < len(args); j++ {
			left := len(args) - j - 1
			switch w := lower(args[j]); {
			case w == "asc" || w == "desc" || w == "alpha":
				opts = append(opts, []byte(w))
			case w == "limit" && left >= 2:
				opts = append(opts, []byte(w), args[j+1], args[j+2])
				j += 2
			case w == "store" && left >= 1 && !ro:
				store = args[j+1]
				j++
			case (w == "by" || w == "get") && left >= 1:
				if c.sharded() && (w == "get" || bytes.Contains(args[j+1], []byte("*"))) {
					return errPlan("ERR %s option of SORT denied in Cluster mode.", map[string]string{"by": "BY", "get": "GET"}[w])
				}
				opts = append(opts, []byte(w), args[j+1])
				j++
			default:
				return errPlan("ERR syntax error")
			}
		}
		kind := "sort"
		if service.SortReadsKeys(opts) {
			kind = "sortkeys"
		}
		if store != nil {
			return opPlan(kvOp(kind+"store", args[1], append([][]byte{store}, opts...)...), nil)
		}
		return opPlan(kvOp(kind, args[1], opts...), nil)
	}
}
