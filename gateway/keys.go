package gateway

import (
	"strconv"
	"strings"

	"github.com/synod-dev/synod/service"
)

// Key commands (plans, plan.go) onto the KV key operations
// (service/kv_doc.go, "Keys"). DEL, UNLINK and EXISTS with several keys
// are one operation per key: one atomic group outside MULTI where the
// protocol applies groups (else independent requests, not atomic across
// keys, as in a Redis cluster), part of EXEC's group inside it. FLUSHDB and FLUSHALL (one database per namespace) are one write
// through the protocol. TYPE answers a status reply, as Redis.

func init() {
	register("generic",
		allKeys("del", -2, fWrite, planPerKey("del", "del")),
		allKeys("unlink", -2, fWriteFast, planPerKey("unlink", "unlink")),
		allKeys("exists", -2, fReadFast, planPerKey("exists", "exists")),
		// TOUCH counts the keys that exist, as EXISTS (Synod keeps no
		// access times for it to update: OBJECT IDLETIME is refused).
		allKeys("touch", -2, fReadFast, planPerKey("touch", "exists")),
		key1("type", 2, fReadFast, keyPlan("type", 0, nil, asStatus)),
		&command{name: "rename", arity: 3, flags: fWrite, first: 1, last: 2, step: 1, plan: keyPlan("rename", 0, nil, nil)},
		&command{name: "renamenx", arity: 3, flags: fWriteFast, first: 1, last: 2, step: 1, plan: keyPlan("renamenx", 0, nil, nil)},
		keyless("keys", 2, fRead, spacePlan("keys", nil)),
		keyless("scan", -2, fRead, planScan),
		keyless("dbsize", 1, fReadFast, spacePlan("dbsize", nil)),
		keyless("randomkey", 1, fRead, spacePlan("randomkey", nil)),
		keyless("flushdb", -1, fWrite, planFlush),
		keyless("flushall", -1, fWrite, planFlush),
	)
}

// planPerKey is one operation of kind per key, summed (DEL, UNLINK, EXISTS).
func planPerKey(name, kind string) planFunc {
	return func(c *conn, args [][]byte) plan {
		if p, ok := c.kvOnly(name); !ok {
			return p
		}
		return perKey(kind, args[1:], sumReply)
	}
}

// planFlush maps FLUSHDB/FLUSHALL [ASYNC|SYNC]: both mean one flushdb.
func planFlush(c *conn, args [][]byte) plan {
	name := lower(args[0])
	if p, ok := c.kvOnly(name); !ok {
		return p
	}
	if len(args) > 2 {
		return errPlan("ERR syntax error")
	}
	if len(args) == 2 {
		if m := lower(args[1]); m != "async" && m != "sync" {
			return errPlan("ERR syntax error")
		}
	}
	return opPlan(service.Op{Kind: "flushdb"}, nil)
}

// planScan maps SCAN cursor [MATCH p] [COUNT n] [TYPE t], checking what
// Redis checks before it scans.
func planScan(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("scan"); !ok {
		return p
	}
	if _, err := strconv.ParseUint(string(args[1]), 10, 64); err != nil {
		return errPlan("ERR invalid cursor")
	}
	a := [][]byte{args[1]}
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return errPlan("ERR syntax error")
		}
		opt, val := lower(args[i]), args[i+1]
		switch opt {
		case "match":
		case "count":
			n, err := strconv.ParseInt(string(val), 10, 64)
			if err != nil {
				return errPlan("ERR value is not an integer or out of range")
			}
			if n < 1 {
				return errPlan("ERR syntax error")
			}
		case "type":
			val = []byte(strings.ToLower(string(val)))
		default:
			return errPlan("ERR syntax error")
		}
		a = append(a, []byte(opt), val)
	}
	return opPlan(service.Op{Kind: "scan", Args: a}, nil)
}
