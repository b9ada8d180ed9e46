package gateway

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/synod-dev/synod/service"
)

// Server commands that read no replicated state: TIME (the node's own
// clock, as each Redis server answers its own; never applied through a
// log, so replicated state stays deterministic), MEMORY and OBJECT.
// FUNCTION is in script.go.

func init() {
	register("server",
		keyless("time", 1, []string{"random", "loading", "stale", "fast"}, planTime),
		&command{name: "memory", arity: -2, flags: fRead, first: 2, last: 2, step: 1, plan: planMemory},
	)
	register("server",
		&command{name: "save", arity: 1, flags: []string{"admin", "noscript", "no_async_loading", "no_multi"}, fn: cmdSave},
		&command{name: "shutdown", arity: -1, flags: []string{"admin", "noscript", "loading", "stale", "no_multi", "allow_busy"}, fn: cmdShutdown},
	)
	register("generic",
		&command{name: "object", arity: -2, flags: fRead, first: 2, last: 2, step: 1, plan: planObject},
	)
}

// cmdSave is SAVE. Synod takes no RDB snapshot: with durability fsync
// every acknowledged write is already on disk in the replicated log, so
// SAVE answers OK (there is nothing left to write); with durability memory
// nothing is kept on disk and SAVE is refused with that reason. Inside
// MULTI it is not allowed, as in Redis (no-multi).
func cmdSave(c *conn, args [][]byte) {
	if d := c.s.durability(); d != "fsync" {
		if d == "" {
			d = "unknown"
		}
		c.writeError(fmt.Sprintf("ERR SAVE: this node's durability is %s (the cluster file's durability field), so no data is kept on disk to save", d))
		return
	}
	c.w.WriteSimple("OK")
}

// cmdShutdown is SHUTDOWN, refused: a node of a replicated cluster is
// stopped by its operator (synod cluster down, or a signal to its process),
// not by a client. Inside MULTI it is not allowed, as in Redis (no-multi).
func cmdShutdown(c *conn, args [][]byte) {
	c.writeError("ERR SHUTDOWN is not supported by Synod: stop a node with 'synod cluster down' or a signal to its process")
}

// planTime answers [seconds, microseconds] of the node's clock when the
// reply is rendered (inside MULTI: at EXEC, as Redis).
func planTime(c *conn, args [][]byte) plan {
	return plan{reply: func([]service.Result) service.Result {
		now := time.Now()
		return service.Array(
			service.Bytes([]byte(strconv.FormatInt(now.Unix(), 10))),
			service.Bytes([]byte(strconv.Itoa(now.Nanosecond()/1000))),
		)
	}}
}

// planMemory is MEMORY USAGE key [SAMPLES n] (the KV operation memusage: an
// estimate from the value's encoding; Synod does not count allocator
// bytes), and MEMORY DOCTOR/STATS/MALLOC-STATS/PURGE refused.
func planMemory(c *conn, args [][]byte) plan {
	if lower(args[1]) != "usage" {
		if h := lower(args[1]); h == "help" {
			return constPlan(service.Array(service.Bytes([]byte("MEMORY USAGE <key> [SAMPLES <count>]: estimated bytes the key holds (its key and value encoding plus 48)."))))
		}
		return errPlan("ERR MEMORY %s is not supported by Synod (MEMORY USAGE is)", strings.ToUpper(string(args[1])))
	}
	if len(args) < 3 {
		return errPlan("%s", arityErr("memory|usage"))
	}
	if p, ok := c.kvOnly("memory"); !ok {
		return p
	}
	switch {
	case len(args) == 3:
	case len(args) == 5 && lower(args[3]) == "samples":
		if _, err := strconv.ParseInt(string(args[4]), 10, 64); err != nil {
			return errPlan("ERR value is not an integer or out of range")
		}
	default:
		return errPlan("ERR syntax error")
	}
	return opPlan(kvOp("memusage", args[2]), nil)
}

// objectEncodings names the one encoding Synod keeps per type (Redis's
// name for its general encoding of that type; Synod has no compact ones).
var objectEncodings = map[string]string{"string": "raw", "hash": "hashtable", "list": "quicklist", "set": "hashtable", "zset": "skiplist"}

// planObject is OBJECT ENCODING|REFCOUNT|IDLETIME|FREQ key (from the key's
// type: nil without the key; every value has one reference; IDLETIME from
// this node's access table and FREQ Redis's error without an LFU policy,
// access.go).
func planObject(c *conn, args [][]byte) plan {
	sub := lower(args[1])
	switch sub {
	case "help":
		return constPlan(service.Array(
			service.Bytes([]byte("OBJECT ENCODING <key>: the key's encoding (Synod keeps one per type).")),
			service.Bytes([]byte("OBJECT REFCOUNT <key>: 1 (values are not shared).")),
			service.Bytes([]byte("OBJECT IDLETIME <key>: seconds since a command through this node named the key.")),
		))
	case "encoding", "refcount":
	case "idletime", "freq":
	default:
		return errPlan("ERR unknown subcommand '%s'. Try OBJECT HELP.", args[1])
	}
	if len(args) != 3 {
		return errPlan("%s", arityErr("object|"+sub))
	}
	if p, ok := c.kvOnly("object"); !ok {
		return p
	}
	c.mu.Lock()
	ns := c.ns.Name
	c.mu.Unlock()
	key := args[2]
	return opPlan(kvOp("type", key), func(r service.Result) service.Result {
		if r.Type != service.ResultBytes {
			return r
		}
		t := string(r.Bytes)
		if t == "none" {
			return service.Nil()
		}
		switch sub {
		case "refcount":
			return service.Int(1)
		case "idletime":
			return service.Int(c.s.acc.idle(ns, key))
		case "freq":
			return service.Errorf("%s", "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.")
		}
		return service.Bytes([]byte(objectEncodings[t]))
	})
}
