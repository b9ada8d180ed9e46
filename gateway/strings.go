package gateway

import (
	"math"
	"strconv"
	"strings"

	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// String commands (plans, plan.go) onto the KV string operations
// (service/kv_doc.go, "Strings"), and GET/INCR on a counter namespace.
//
// MSET is one atomic group of sets where the protocol has groups, else one
// set per key. MSETNX is the atomic group [guard k exists 0 ..., set k v
// ...] and is refused where the protocol has no groups; inside MULTI it is
// refused too (a runtime error of that command): its guards would not lead
// EXEC's group, and a guard that does not lead stops nothing
// (automaton.ApplyGroup).

func init() {
	register("string",
		key1("get", 2, fReadFast, planGet),
		key1("set", -3, fWriteMem, planSet),
		key1("setnx", 3, fWriteMemF, planSetNX),
		key1("setex", 4, fWriteMem, planSetEx("setex", "ex")),
		key1("psetex", 4, fWriteMem, planSetEx("psetex", "px")),
		key1("getset", 3, fWriteMemF, keyPlan("getset", 0, nil, nil)),
		key1("getdel", 2, fWriteFast, keyPlan("getdel", 0, nil, nil)),
		key1("getex", -2, fWriteFast, planGetEx),
		key1("append", 3, fWriteMemF, planAppend),
		key1("incr", 2, fWriteMemF, planIncr),
		key1("decr", 2, fWriteMemF, planIncr),
		key1("incrby", 3, fWriteMemF, planIncr),
		key1("decrby", 3, fWriteMemF, planIncr),
		key1("incrbyfloat", 3, fWriteMemF, keyPlan("incrbyfloat", 0, nil, nil)),
		key1("strlen", 2, fReadFast, keyPlan("strlen", 0, nil, nil)),
		key1("getrange", 4, fRead, keyPlan("getrange", 0, nil, nil)),
		key1("setrange", 4, fWriteMem, keyPlan("setrange", 0, nil, nil)),
		key1("setbit", 4, fWriteMem, keyPlan("setbit", 0, nil, nil)),
		key1("getbit", 3, fReadFast, keyPlan("getbit", 0, nil, nil)),
		allKeys("mget", -2, fReadFast, planMGet),
		&command{name: "mset", arity: -3, flags: fWriteMem, first: 1, last: -1, step: 2, plan: planMSet},
		&command{name: "msetnx", arity: -3, flags: fWriteMem, first: 1, last: -1, step: 2, plan: planMSetNX},
	)
}

// serviceName is the connection's namespace and its service ("" when none).
func (c *conn) serviceName() (ns, svc string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ns.Name, c.ns.Service
}

// kvOnly returns an error plan when the namespace is not a KV namespace.
func (c *conn) kvOnly(name string) (plan, bool) {
	ns, svc := c.serviceName()
	switch svc {
	case "kv":
		return plan{}, true
	case "counter":
		return errPlan("ERR '%s' is not supported in namespace '%s' (service counter supports GET, INCR, INCRBY, DECR, DECRBY)", name, ns), false
	case "":
		return errPlan("ERR this node serves no namespace"), false
	}
	return errPlan("ERR namespace '%s' has service '%s', which has no Redis command mapping; use SYNOD OP", ns, svc), false
}

// kvOp is the operation kind on key with args.
func kvOp(kind string, key []byte, args ...[]byte) service.Op {
	op := service.Op{Kind: kind, Key: string(key)}
	if len(args) > 0 {
		op.Args = args
	}
	return op
}

// perKey is one operation of kind per key, rendered by reply: outside
// MULTI one atomic group where the namespace's protocol applies groups (as
// Redis runs DEL, EXISTS, MGET: atomically), else each on its own.
func perKey(kind string, keys [][]byte, reply func([]service.Result) service.Result) plan {
	p := plan{ops: make([]service.Op, len(keys)), reply: reply, send: sendGroup}
	for i, k := range keys {
		p.ops[i] = kvOp(kind, k)
	}
	return p
}

// sumReply replies the sum of integer results (DEL, EXISTS, UNLINK, TOUCH).
func sumReply(rs []service.Result) service.Result {
	if e, ok := firstErr(rs); ok {
		return e
	}
	var sum int64
	for _, r := range rs {
		if r.Type != service.ResultInt {
			return errResult("ERR internal error: expected an integer, got %v", r)
		}
		sum += r.Int
	}
	return service.Int(sum)
}

// arrayReply replies the results as an array; an error fails the whole
// reply (MGET).
func arrayReply(rs []service.Result) service.Result {
	if e, ok := firstErr(rs); ok {
		return e
	}
	return service.Array(append([]service.Result(nil), rs...)...)
}

func planGet(c *conn, args [][]byte) plan {
	if _, svc := c.serviceName(); svc == "counter" {
		return opPlan(service.Op{Kind: "read"}, func(r service.Result) service.Result {
			if r.Type == service.ResultInt {
				return service.Bytes([]byte(strconv.FormatInt(r.Int, 10)))
			}
			return r
		})
	}
	if p, ok := c.kvOnly("get"); !ok {
		return p
	}
	return plan{ops: c.oneOp(kvOp("get", args[1])), reply: firstResult} // as SET's: no list of one per GET
}

func planSetNX(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("setnx"); !ok {
		return p
	}
	return opPlan(kvOp("set", args[1], args[2], []byte("nx")), func(r service.Result) service.Result {
		switch r.Type {
		case service.ResultOK:
			return service.Int(1)
		case service.ResultNil:
			return service.Int(0)
		}
		return r
	})
}

func planMGet(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("mget"); !ok {
		return p
	}
	return perKey("get", args[1:], mgetReply)
}

// mgetReply is MGET's array: nil for a key holding another type, as Redis
// answers (it never answers WRONGTYPE).
func mgetReply(rs []service.Result) service.Result {
	out := make([]service.Result, len(rs))
	for i, r := range rs {
		if k, isErr := r.ErrKind(); isErr && k == synoderr.WrongType {
			r = service.Nil()
		}
		out[i] = r
	}
	return arrayReply(out)
}

func planIncr(c *conn, args [][]byte) plan {
	name := strings.ToLower(string(args[0]))
	var delta int64 = 1
	switch name {
	case "decr":
		delta = -1
	case "incrby", "decrby":
		n, err := strconv.ParseInt(string(args[2]), 10, 64)
		if err != nil {
			return errPlan("ERR value is not an integer or out of range")
		}
		delta = n
		if name == "decrby" {
			if n == math.MinInt64 {
				return errPlan("ERR decrement would overflow")
			}
			delta = -n
		}
	}
	d := []byte(strconv.FormatInt(delta, 10))
	if _, svc := c.serviceName(); svc == "counter" {
		return opPlan(service.Op{Kind: "add", Args: [][]byte{d}}, nil)
	}
	if p, ok := c.kvOnly(name); !ok {
		return p
	}
	return opPlan(kvOp("incr", args[1], d), nil)
}

func planAppend(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("append"); !ok {
		return p
	}
	return opPlan(kvOp("append", args[1], args[2]), nil)
}

// expireArg parses a TTL argument as Redis does: an integer, positive.
func expireArg(cmd string, a []byte) (plan, bool) {
	n, err := strconv.ParseInt(string(a), 10, 64)
	if err != nil {
		return errPlan("ERR value is not an integer or out of range"), false
	}
	if n <= 0 {
		return errPlan("ERR invalid expire time in '%s' command", cmd), false
	}
	return plan{}, true
}

// planSet maps SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]
// onto set value [nx|xx] [get] [keepttl | ex s | ...].
func planSet(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("set"); !ok {
		return p
	}
	var cond, ttl string
	var ttlArg []byte
	get := false
	for i := 3; i < len(args); i++ {
		switch opt := lower(args[i]); opt {
		case "nx", "xx":
			if cond != "" && cond != opt {
				return errPlan("ERR syntax error")
			}
			cond = opt
		case "get":
			get = true
		case "keepttl":
			if ttl != "" && ttl != opt {
				return errPlan("ERR syntax error")
			}
			ttl = opt
		case "ex", "px", "exat", "pxat":
			if (ttl != "" && ttl != opt) || i+1 >= len(args) {
				return errPlan("ERR syntax error")
			}
			ttl, ttlArg = opt, args[i+1]
			i++
			if p, ok := expireArg("set", ttlArg); !ok {
				return p
			}
		default:
			return errPlan("ERR syntax error")
		}
	}
	// The value's list is a piece of the command's own (capped: an option
	// appended below goes to a fresh array): no list of one to allocate.
	op := service.Op{Kind: "set", Key: c.keyOfSet(args[1]), Args: args[2:3:3]}
	if cond != "" {
		op.Args = append(op.Args, []byte(cond))
	}
	if get {
		op.Args = append(op.Args, []byte("get"))
	}
	if ttl != "" {
		op.Args = append(op.Args, []byte(ttl))
	}
	if ttlArg != nil {
		op.Args = append(op.Args, ttlArg)
	}
	return plan{ops: c.oneOp(op), reply: firstResult}
}

// opChunkLen is how many one-operation lists oneOp carves from one array.
const opChunkLen = 16

// oneOp is the list of op alone, carved (capped: an append goes to a fresh
// array) from a small array the connection fills in turn: a pipeline of
// SETs allocates one array per opChunkLen commands instead of one list per
// command. A plan lives until its reply is written (or its EXEC), so an
// array, and the reader's buffers its operations' arguments point into,
// is garbage once its opChunkLen commands are answered; a command queued
// in a long MULTI keeps at most the opChunkLen-1 commands planned around
// it alive with it. scriptConn, shared by concurrent scripts, allocates.
func (c *conn) oneOp(op service.Op) []service.Op {
	if c == scriptConn {
		return []service.Op{op}
	}
	if len(c.opChunk) == 0 {
		c.opChunk = make([]service.Op, opChunkLen)
	}
	l := c.opChunk[:1:1]
	l[0] = op
	c.opChunk = c.opChunk[1:]
	return l
}

// keyOfSet is SET's key k as a string: the connection's previous SET's
// string when k is the same key, so that a pipeline of one key's SETs
// allocates its key once, not once per command (the store keeps the
// string of the key's first SET as its map key; the others were garbage
// at once). A connection plans its commands on its own goroutine (serve);
// scriptConn, shared by every script, keeps no key.
func (c *conn) keyOfSet(k []byte) string {
	if c == scriptConn {
		return string(k)
	}
	if string(k) != c.setKey {
		c.setKey = string(k)
	}
	return c.setKey
}

// planSetEx maps SETEX/PSETEX key ttl value onto set value ex|px ttl.
func planSetEx(name, unit string) planFunc {
	return func(c *conn, args [][]byte) plan {
		if p, ok := c.kvOnly(name); !ok {
			return p
		}
		if p, ok := expireArg(name, args[2]); !ok {
			return p
		}
		return opPlan(kvOp("set", args[1], args[3], []byte(unit), args[2]), nil)
	}
}

// planGetEx maps GETEX key [EX s|PX ms|EXAT s|PXAT ms|PERSIST].
func planGetEx(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("getex"); !ok {
		return p
	}
	var a [][]byte
	switch {
	case len(args) == 2:
	case len(args) == 3 && lower(args[2]) == "persist":
		a = [][]byte{[]byte("persist")}
	case len(args) == 4:
		opt := lower(args[2])
		if opt != "ex" && opt != "px" && opt != "exat" && opt != "pxat" {
			return errPlan("ERR syntax error")
		}
		if p, ok := expireArg("getex", args[3]); !ok {
			return p
		}
		a = [][]byte{[]byte(opt), args[3]}
	default:
		return errPlan("ERR syntax error")
	}
	return opPlan(kvOp("getex", args[1], a...), nil)
}

// msetOps returns MSET's and MSETNX's set operations, or an error plan.
func msetOps(c *conn, name string, args [][]byte) ([]service.Op, plan, bool) {
	if p, ok := c.kvOnly(name); !ok {
		return nil, p, false
	}
	if len(args)%2 != 1 {
		return nil, errPlan("%s", arityErr(name)), false
	}
	var ops []service.Op
	for i := 1; i+1 < len(args); i += 2 {
		ops = append(ops, kvOp("set", args[i], args[i+1]))
	}
	return ops, plan{}, true
}

// unlessErr replies the first error of the results, else r.
func unlessErr(r service.Result) func([]service.Result) service.Result {
	return func(rs []service.Result) service.Result {
		if e, ok := firstErr(rs); ok {
			return e
		}
		return r
	}
}

func planMSet(c *conn, args [][]byte) plan {
	ops, p, ok := msetOps(c, "mset", args)
	if !ok {
		return p
	}
	return plan{ops: ops, send: sendGroup, reply: unlessErr(service.OK())}
}

func planMSetNX(c *conn, args [][]byte) plan {
	ops, p, ok := msetOps(c, "msetnx", args)
	if !ok {
		return p
	}
	p = plan{ops: ops, send: sendAtomic, aborted: service.Int(0), reply: unlessErr(service.Int(1)),
		noMulti: "ERR MSETNX inside MULTI is supported by Synod only before the transaction's other writes and reads (its check must lead the transaction's group); use WATCH and MSET"}
	for _, op := range ops {
		p.guards = append(p.guards, service.Op{Kind: service.GuardKind, Key: op.Key, Args: [][]byte{[]byte("exists"), []byte("0")}})
	}
	return p
}
