package gateway

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/synod-dev/synod/service"
)

// Stream commands (issue 34) onto the KV stream operations
// (service/kv_stream.go, kv_stream_group.go): XADD, XRANGE, XREVRANGE,
// XLEN, XDEL, XTRIM, XSETID, XREAD, XINFO, XGROUP, XREADGROUP, XACK,
// XPENDING, XCLAIM, XAUTOCLAIM. Each is one operation.
//
// XADD and XTRIM carry this node's stream-node-max-entries and
// stream-node-max-bytes (CONFIG SET), so every replica cuts the stream into
// the same nodes and approximate trims (~) agree. XREAD BLOCK and
// XREADGROUP BLOCK wait as the blocking list commands do (blocking.go):
// every attempt is one operation through the protocol, and $ is resolved
// to the streams' last IDs by one read before the client blocks, as Redis
// resolves it when the command arrives. Inside MULTI they do not block.

func init() {
	register("stream",
		key1("xadd", -5, fWriteMemF, planXAdd),
		key1("xrange", -4, fRead, keyPlan("xrange", 0, nil, nestEntries)),
		key1("xrevrange", -4, fRead, keyPlan("xrevrange", 0, nil, nestEntries)),
		key1("xlen", 2, fReadFast, keyPlan("xlen", 0, nil, nil)),
		key1("xdel", -3, fWriteFast, keyPlan("xdel", 0, nil, nil)),
		key1("xtrim", -4, fWrite, planXTrim),
		key1("xsetid", -3, fWriteMemF, keyPlan("xsetid", 0, nil, nil)),
		key1("xack", -4, fWriteFast, keyPlan("xack", 0, nil, nil)),
		key1("xpending", -3, fRead, planTimedRead("xpending", nil)),
		key1("xclaim", -6, fWriteFast, withConsumerEvents(keyPlan("xclaim", 0, nil, nestEntries), "xgroup-createconsumer")),
		key1("xautoclaim", -6, fWriteFast, withConsumerEvents(keyPlan("xautoclaim", 0, nil, func(r service.Result) service.Result {
			if r.Type == service.ResultArray && len(r.Elems) == 3 {
				r.Elems = []service.Result{r.Elems[0], nestEntries(r.Elems[1]), r.Elems[2]}
			}
			return r
		}), "xgroup-createconsumer")),
		&command{name: "xgroup", arity: -2, flags: []string{"write", "denyoom"}, first: 2, last: 2, step: 1, plan: planXGroup},
		&command{name: "xinfo", arity: -2, flags: []string{"readonly"}, first: 2, last: 2, step: 1, plan: planXInfo},
		&command{name: "xread", arity: -4, flags: []string{"readonly", "blocking", "movablekeys"},
			plan: bplan(parseXRead(false, false)), block: blockIfAsked(parseXRead(false, true))},
		&command{name: "xreadgroup", arity: -7, flags: []string{"write", "blocking", "movablekeys"},
			plan: bplan(parseXRead(true, false)), block: blockIfAsked(parseXRead(true, true))},
	)
}

// nestEntries nests a flat list of entries (service/kv_stream.go,
// entryFlat: id, fields, id, fields, ...) as Redis replies it: [[id,
// fields], ...]. A list of IDs only (XCLAIM JUSTID) passes unchanged.
func nestEntries(r service.Result) service.Result {
	if r.Type != service.ResultArray || len(r.Elems) < 2 || r.Elems[1].Type == service.ResultBytes {
		return r
	}
	out := make([]service.Result, 0, len(r.Elems)/2)
	for i := 0; i+1 < len(r.Elems); i += 2 {
		fv := r.Elems[i+1]
		if fv.Type == service.ResultNil {
			fv = nullArray()
		}
		out = append(out, service.Array(r.Elems[i], fv))
	}
	r.Elems = out
	return r
}

// nodeLimits are this node's stream-node-max-entries and -bytes, as
// arguments.
func (c *conn) nodeLimits() [][]byte {
	return [][]byte{[]byte(c.tunable("stream-node-max-entries")), []byte(c.tunable("stream-node-max-bytes"))}
}

// tunable is this node's value of an encoding tunable (CONFIG SET), or its
// default for a script's commands, which are planned inside the log's
// Apply at every replica (scriptConn has no node): the same value
// everywhere.
func (c *conn) tunable(name string) string {
	if c.s == nil {
		return tunableByName[name].def
	}
	return c.s.tun.get(name)
}

func planXAdd(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("xadd"); !ok {
		return p
	}
	return opPlan(kvOp("xadd", args[1], append(c.nodeLimits(), args[2:]...)...), nil)
}

func planXTrim(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("xtrim"); !ok {
		return p
	}
	return opPlan(kvOp("xtrim", args[1], append(c.nodeLimits()[:1], args[2:]...)...), nil)
}

// subHelp answers a container command's HELP (lines as Redis's).
func subHelp(name string, lines ...string) plan {
	out := []service.Result{status(fmt.Sprintf("%s <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", strings.ToUpper(name)))}
	for _, l := range append(lines, "HELP", "    Prints this help.") {
		out = append(out, status(l))
	}
	return constPlan(service.Array(out...))
}

// subArity checks a container command's subcommand: its arity (Redis's
// convention) or Redis's unknown-subcommand error.
func subArity(name string, args [][]byte, arities map[string]int) (string, plan, bool) {
	sub := lower(args[1])
	n, ok := arities[sub]
	if !ok {
		return sub, errPlan("ERR unknown subcommand '%s'. Try %s HELP.", args[1], strings.ToUpper(name)), false
	}
	if (n > 0 && len(args) != n) || (n < 0 && len(args) < -n) {
		return sub, errPlan("ERR wrong number of arguments for '%s|%s' command", name, sub), false
	}
	return sub, plan{}, true
}

func planXGroup(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("xgroup"); !ok {
		return p
	}
	sub, p, ok := subArity("xgroup", args, map[string]int{"create": -5, "setid": -5, "destroy": 4, "createconsumer": 5, "delconsumer": 5, "help": 2})
	if !ok {
		return p
	}
	if sub == "help" {
		return subHelp("xgroup",
			"CREATE <key> <groupname> <id|$> [option]",
			"    Create a new consumer group. Options are:",
			"    * MKSTREAM",
			"      Create the empty stream if it does not exist.",
			"    * ENTRIESREAD entries_read",
			"      Set the group's entries_read counter (internal use).",
			"CREATECONSUMER <key> <groupname> <consumer>",
			"    Create a new consumer in the specified group.",
			"DELCONSUMER <key> <groupname> <consumer>",
			"    Remove the specified consumer.",
			"DESTROY <key> <groupname>",
			"    Remove the specified group.",
			"SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
			"    Set the current group ID and entries_read counter.")
	}
	a := append([][]byte{[]byte(sub)}, args[3:]...)
	if sub == "delconsumer" {
		return c.consumerEvents(opPlan(kvOp("xgroup", args[2], a...), nil), "xgroup-delconsumer")
	}
	return opPlan(kvOp("xgroup", args[2], a...), nil)
}

// readNow is the time (Unix ms) a read that shows idle times carries
// (service/kv_stream.go, timedRead): this node's clock, or 0 (the state's
// time) for a script's read, which runs inside the log's Apply.
func (c *conn) readNow() []byte {
	if c.s == nil {
		return []byte("0")
	}
	return []byte(strconv.FormatInt(time.Now().UnixMilli(), 10))
}

// planTimedRead is key args... as kind now args...
func planTimedRead(kind string, f func(service.Result) service.Result) planFunc {
	return func(c *conn, args [][]byte) plan {
		if p, ok := c.kvOnly(kind); !ok {
			return p
		}
		return opPlan(kvOp(kind, args[1], append([][]byte{c.readNow()}, args[2:]...)...), f)
	}
}

func planXInfo(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("xinfo"); !ok {
		return p
	}
	sub, p, ok := subArity("xinfo", args, map[string]int{"stream": -3, "groups": 3, "consumers": 4, "help": 2})
	if !ok {
		return p
	}
	switch sub {
	case "help":
		return subHelp("xinfo",
			"CONSUMERS <key> <groupname>",
			"    Show consumers of <groupname>.",
			"GROUPS <key>",
			"    Show the stream consumer groups.",
			"STREAM <key> [FULL [COUNT <count>]",
			"    Show information about the stream.")
	case "stream":
		full := len(args) > 3
		return opPlan(kvOp("xinfo", args[2], append([][]byte{c.readNow(), []byte(sub)}, args[3:]...)...), func(r service.Result) service.Result {
			if r.Type != service.ResultArray {
				return r
			}
			if full {
				el := append([]service.Result(nil), r.Elems...)
				for i := 0; i+1 < len(el); i += 2 {
					switch string(el[i].Bytes) {
					case "entries":
						el[i+1] = nestEntries(el[i+1])
					case "groups":
						el[i+1] = fullGroups(el[i+1])
					}
				}
				r.Elems = el
			}
			return asMap(r)
		})
	}
	return opPlan(kvOp("xinfo", args[2], append([][]byte{c.readNow(), []byte(sub)}, args[3:]...)...), func(r service.Result) service.Result {
		return mapsOf(r, "")
	})
}

// fullGroups nests XINFO STREAM FULL's flat groups
// (service/kv_stream_group.go, infoGroupsFull) as Redis's maps.
func fullGroups(r service.Result) service.Result {
	if r.Type != service.ResultArray {
		return r
	}
	str := func(s string) service.Result { return service.Bytes([]byte(s)) }
	var groups []service.Result
	for i := 0; i+6 < len(r.Elems); i += 7 {
		g := r.Elems[i : i+7]
		var pend []service.Result
		for j := 0; j+3 < len(g[5].Elems); j += 4 {
			pend = append(pend, service.Array(g[5].Elems[j:j+4]...))
		}
		var cons []service.Result
		cs := g[6].Elems
		for j := 0; j+3 < len(cs); {
			n := int(cs[j+3].Int)
			var cp []service.Result
			for k := 0; k < n && j+4+3*k+2 < len(cs); k++ {
				cp = append(cp, service.Array(cs[j+4+3*k:j+7+3*k]...))
			}
			cons = append(cons, asMap(service.Array(str("name"), cs[j], str("seen-time"), cs[j+1], str("pel-count"), cs[j+2], str("pending"), service.Array(cp...))))
			j += 4 + 3*n
		}
		groups = append(groups, asMap(service.Array(str("name"), g[0], str("last-delivered-id"), g[1], str("entries-read"), g[2],
			str("lag"), g[3], str("pel-count"), g[4], str("pending"), service.Array(pend...), str("consumers"), service.Array(cons...))))
	}
	return service.Array(groups...)
}

// mapsOf shapes an array of flat maps as maps (RESP3), and the value of
// field nested in each the same way.
func mapsOf(r service.Result, nested string) service.Result {
	if r.Type != service.ResultArray {
		return r
	}
	out := make([]service.Result, len(r.Elems))
	for i, m := range r.Elems {
		if nested != "" && m.Type == service.ResultArray {
			el := append([]service.Result(nil), m.Elems...)
			for j := 0; j+1 < len(el); j += 2 {
				if string(el[j].Bytes) == nested {
					el[j+1] = mapsOf(el[j+1], "")
				}
			}
			m.Elems = el
		}
		out[i] = asMap(m)
	}
	r.Elems = out
	return r
}

// streamReadCmd reports whether a blocking command is XREAD or
// XREADGROUP, which a script may call without BLOCK, as in Redis (their
// plan refuses BLOCK there).
func streamReadCmd(name string) bool { return name == "xread" || name == "xreadgroup" }

// xreadReply renders xread's and xreadgroup's flat key, entries, ...: a
// map in RESP3, an array of [key, entries] in RESP2; nil as a null array.
func (c *conn) xreadReply(r service.Result) service.Result {
	if r.Type != service.ResultArray {
		return nullArray()
	}
	resp3 := c.w != nil && c.w.Protocol() == 3 // a script's call (no writer) takes RESP2's shape
	out := make([]service.Result, 0, len(r.Elems))
	for i := 0; i+1 < len(r.Elems); i += 2 {
		if resp3 {
			out = append(out, r.Elems[i], nestEntries(r.Elems[i+1]))
		} else {
			out = append(out, service.Array(r.Elems[i], nestEntries(r.Elems[i+1])))
		}
	}
	if resp3 {
		return asMap(service.Array(out...))
	}
	return service.Array(out...)
}

// parseXRead parses XREAD [COUNT n] [BLOCK ms] STREAMS key ... id ... and
// XREADGROUP GROUP g c [COUNT n] [BLOCK ms] [NOACK] STREAMS key ... id ...
// (group) as xreadCommand does. blocking: the command's blocking form
// (outside MULTI), which resolves $ by a read first.
func parseXRead(group, blocking bool) func(c *conn, args [][]byte) blockPlan {
	return func(c *conn, args [][]byte) blockPlan {
		name := lower(args[0])
		if p, ok := c.kvOnly(name); !ok {
			return blockPlan{plan: p}
		}
		count, block, noack := "0", time.Duration(-1), "0"
		var gname, cname []byte
		streams := 0
		for i := 1; i < len(args); i++ {
			more := len(args) - 1 - i
			switch w := lower(args[i]); {
			case w == "block" && more > 0:
				if c.s == nil { // a script's call (scriptConn)
					return blockPlan{plan: errPlan("ERR %s command is not allowed with BLOCK option from scripts", name)}
				}
				i++
				ms, err := strconv.ParseInt(string(args[i]), 10, 64)
				if err != nil {
					return blockPlan{plan: errPlan("ERR timeout is not an integer or out of range")}
				}
				if ms < 0 {
					return blockPlan{plan: errPlan("ERR timeout is negative")}
				}
				block = time.Duration(ms) * time.Millisecond
			case w == "count" && more > 0:
				i++
				n, err := strconv.ParseInt(string(args[i]), 10, 64)
				if err != nil {
					return blockPlan{plan: errPlan("ERR value is not an integer or out of range")}
				}
				count = strconv.FormatInt(max(n, 0), 10)
			case w == "streams" && more > 0:
				streams = i + 1
				if (len(args)-streams)%2 != 0 {
					return blockPlan{plan: errPlan("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.")}
				}
				i = len(args)
			case w == "group" && more >= 2:
				if !group {
					return blockPlan{plan: errPlan("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.")}
				}
				gname, cname = args[i+1], args[i+2]
				i += 2
			case w == "noack":
				if !group {
					return blockPlan{plan: errPlan("ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.")}
				}
				noack = "1"
			default:
				return blockPlan{plan: errPlan("ERR syntax error")}
			}
		}
		if streams == 0 {
			return blockPlan{plan: errPlan("ERR syntax error")}
		}
		if group && gname == nil {
			return blockPlan{plan: errPlan("ERR Missing GROUP option for XREADGROUP")}
		}
		n := (len(args) - streams) / 2
		keys, ids := args[streams:streams+n], append([][]byte(nil), args[streams+n:]...)
		if blocking && block >= 0 && !group {
			if p, ok := c.resolveLast(keys, ids); !ok {
				return blockPlan{plan: p}
			}
		}
		tail := append([][]byte{[]byte(strconv.Itoa(n))}, keys[1:]...)
		tail = append(tail, ids...)
		var op service.Op
		probeGroup := []byte{}
		if group {
			op = kvOp("xreadgroup", keys[0], append([][]byte{[]byte("0"), gname, cname, []byte(noack), []byte(count)}, tail...)...)
			probeGroup = gname
		} else {
			op = kvOp("xread", keys[0], append([][]byte{[]byte("0"), []byte(count)}, tail...)...)
		}
		bp := blockPlan{plan: opPlan(op, c.xreadReply), keys: strs(keys),
			probe: kvOp("xready", keys[0], append([][]byte{probeGroup}, tail...)...), timeout: max(block, 0)}
		bp.plan.reply = func(rs []service.Result) service.Result {
			if rs[0].Type == service.ResultErr {
				return rs[0]
			}
			return c.xreadReply(rs[0])
		}
		if group {
			bp.plan = c.consumerEvents(bp.plan, "xgroup-createconsumer")
		}
		return bp
	}
}

// resolveLast replaces each $ of ids by its stream's last ID (one read).
func (c *conn) resolveLast(keys, ids [][]byte) (plan, bool) {
	has := false
	for _, id := range ids {
		has = has || string(id) == "$"
	}
	if !has {
		return plan{}, true
	}
	op := kvOp("xlastid", keys[0], keys[1:]...)
	if p := c.check(opPlan(op, nil)); len(p.ops) == 0 {
		return p, false
	}
	r := c.run(op, c.nextSeq())
	if r.Type == service.ResultErr {
		return constPlan(r), false
	}
	for i, id := range ids {
		if string(id) == "$" && i < len(r.Elems) {
			ids[i] = r.Elems[i].Bytes
		}
	}
	return plan{}, true
}

// blockIfAsked runs XREAD/XREADGROUP: blocking (blocking.go) when BLOCK was
// given, else as a plain plan.
func blockIfAsked(parse func(c *conn, args [][]byte) blockPlan) handler {
	blocking := blockCmd(parse)
	return func(c *conn, args [][]byte) {
		for _, a := range args[1:] {
			w := lower(a)
			if w == "streams" {
				break
			}
			if w == "block" {
				blocking(c, args)
				return
			}
		}
		cmd := commands[lower(args[0])]
		c.runPlan(cmd.name, c.planOf(cmd, args))
	}
}
