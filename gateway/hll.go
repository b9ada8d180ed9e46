package gateway

import (
	"math/rand/v2"
	"strconv"

	"github.com/synod-dev/synod/service"
)

// HyperLogLog commands (issue 34): PFADD, PFCOUNT, PFMERGE, PFDEBUG and
// PFSELFTEST, each one KV operation (service/kv_hll.go) but PFSELFTEST,
// which tests the encoding at this node and touches no key. PFADD and
// PFMERGE carry this node's hll-sparse-max-bytes (CONFIG SET) in the
// operation, so every replica changes encoding at the same point.

func init() {
	register("hyperloglog",
		key1("pfadd", -2, fWriteMemF, planHLLWrite("pfadd")),
		allKeys("pfcount", -2, fRead, planPFCount),
		allKeys("pfmerge", -2, fWriteMem, planHLLWrite("pfmerge")),
		&command{name: "pfdebug", arity: -3, flags: []string{"write", "denyoom", "admin"}, first: 2, last: 2, step: 1, plan: planPFDebug},
		keyless("pfselftest", 1, []string{"admin"}, planPFSelfTest),
	)
}

// hllMaxBytes is this node's hll-sparse-max-bytes, as an argument.
func (c *conn) hllMaxBytes() []byte {
	return []byte(c.tunable("hll-sparse-max-bytes"))
}

// planHLLWrite is PFADD key [element ...] and PFMERGE destkey [sourcekey
// ...] (kind): the arguments after the key, led by hll-sparse-max-bytes.
func planHLLWrite(kind string) planFunc {
	return func(c *conn, args [][]byte) plan {
		if p, ok := c.kvOnly(kind); !ok {
			return p
		}
		return opPlan(kvOp(kind, args[1], append([][]byte{c.hllMaxBytes()}, args[2:]...)...), nil)
	}
}

// planPFCount is PFCOUNT key [key ...]: a write with one key (it caches
// the estimate in the value, as Redis does).
func planPFCount(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("pfcount"); !ok {
		return p
	}
	return opPlan(kvOp("pfcount", args[1], args[2:]...), nil)
}

// planPFDebug is PFDEBUG subcommand key [arg ...].
func planPFDebug(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("pfdebug"); !ok {
		return p
	}
	encoding := lower(args[1]) == "encoding"
	return opPlan(kvOp("pfdebug", args[2], append([][]byte{args[1]}, args[3:]...)...), func(r service.Result) service.Result {
		if encoding {
			return asStatus(r)
		}
		return r
	})
}

// planPFSelfTest is PFSELFTEST: service.HLLSelfTest at this node.
func planPFSelfTest(c *conn, args [][]byte) plan {
	n, _ := strconv.ParseInt(string(c.hllMaxBytes()), 10, 64)
	if err := service.HLLSelfTest(n, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))); err != nil {
		return errPlan("ERR %s", err.Error())
	}
	return constPlan(service.OK())
}
