package gateway

import (
	"math"
	"strconv"
	"strings"

	"github.com/synod-dev/synod/service"
)

// String commands (plans, plan.go) on a KV namespace, and GET/INCR on a
// counter namespace.

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

// perKey is one operation of kind per key, sent each on its own outside
// MULTI, and rendered by reply.
func perKey(kind string, keys [][]byte, reply func([]service.Result) service.Result) plan {
	p := plan{ops: make([]service.Op, len(keys)), reply: reply}
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
	return opPlan(kvOp("get", args[1]), nil)
}

func planSet(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("set"); !ok {
		return p
	}
	cond := ""
	for _, o := range args[3:] {
		switch opt := strings.ToUpper(string(o)); opt {
		case "NX", "XX":
			if cond != "" && cond != strings.ToLower(opt) {
				return errPlan("ERR syntax error")
			}
			cond = strings.ToLower(opt)
		case "EX", "PX", "EXAT", "PXAT", "KEEPTTL":
			return errPlan("ERR SET option '%s' is not supported: Synod keys do not expire", opt)
		case "GET":
			return errPlan("ERR SET option 'GET' is not supported: use GET, then SET")
		default:
			return errPlan("ERR syntax error")
		}
	}
	op := kvOp("set", args[1], args[2])
	if cond != "" {
		op.Args = append(op.Args, []byte(cond))
	}
	return opPlan(op, nil)
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
	return perKey("get", args[1:], arrayReply)
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
