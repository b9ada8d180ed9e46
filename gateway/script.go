package gateway

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
)

// Lua scripting (issue 34): EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT
// LOAD/EXISTS/FLUSH/KILL, FUNCTION LOAD/LIST/DELETE/FLUSH/STATS/KILL,
// FCALL, FCALL_RO.
//
// A script runs as one KV operation, eval, that carries its text, keys and
// arguments through the namespace's protocol and runs inside Apply on
// every replica (service/kv_script.go says why and what that requires).
// Its redis.call goes through this package's command table: the same
// plans the commands use, so a command answers alike inside and outside a
// script (service.SetScriptCommands, below). Commands without a plan (the
// server's own: INFO, TIME, CLIENT, ...) and the blocking commands are
// not allowed from scripts.
//
// The script cache (EVAL adds to it, SCRIPT LOAD too, EVALSHA reads it)
// and the function libraries are this node's, as in a Redis Cluster each
// node has its own: a client that reaches another node after a fail-over
// gets NOSCRIPT and sends EVAL, as Redis clients do. The log never depends
// on them: it holds the script's text. Functions are not persisted: a
// restarted node has no libraries (FUNCTION LOAD again); Redis 7 persists
// and replicates them.

func init() {
	movable := []string{"noscript", "stale", "skip_monitor", "may_replicate", "no_mandatory_keys", "movablekeys"}
	register("scripting",
		&command{name: "eval", arity: -3, flags: movable, plan: planEval("eval", false)},
		&command{name: "evalsha", arity: -3, flags: movable, plan: planEval("evalsha", false)},
		&command{name: "eval_ro", arity: -3, flags: movable, plan: planEval("eval", true)},
		&command{name: "evalsha_ro", arity: -3, flags: movable, plan: planEval("evalsha", true)},
		&command{name: "fcall", arity: -3, flags: movable, plan: planFCall(false)},
		&command{name: "fcall_ro", arity: -3, flags: movable, plan: planFCall(true)},
		&command{name: "script", arity: -2, flags: []string{"noscript"}, fn: cmdScript},
		&command{name: "function", arity: -2, flags: []string{"noscript"}, fn: cmdFunction},
	)
	service.SetScriptCommands(scriptCommand)
}

// scripts is a node's script cache and function libraries.
type scripts struct {
	mu   sync.Mutex
	body map[string][]byte // sha1 -> script
	libs map[string]*library
}

type library struct {
	name  string
	code  []byte
	funcs []string
}

func (s *scripts) add(body []byte) string {
	sha := service.SHA1Hex(body)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.body == nil {
		s.body = map[string][]byte{}
	}
	s.body[sha] = body
	return sha
}

func (s *scripts) get(sha string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.body[strings.ToLower(sha)]
	return b, ok
}

// libraryOf returns the library holding function name (names compare
// case-insensitively, as in Redis) and the name as registered.
func (s *scripts) libraryOf(name string) (*library, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.libs {
		for _, f := range l.funcs {
			if strings.EqualFold(f, name) {
				return l, f, true
			}
		}
	}
	return nil, "", false
}

// scriptArgs checks numkeys and returns the eval operation's key and the
// arguments after the body: numkeys, keys, args.
func scriptArgs(args [][]byte) (string, [][]byte, string) {
	n, err := strconv.ParseInt(string(args[2]), 10, 64)
	if err != nil {
		return "", nil, "ERR value is not an integer or out of range"
	}
	if n < 0 {
		return "", nil, "ERR Number of keys can't be negative"
	}
	if n > int64(len(args)-3) {
		return "", nil, "ERR Number of keys can't be greater than number of args"
	}
	key := ""
	if n > 0 {
		key = string(args[3])
	}
	return key, args[2:], ""
}

// planEval is EVAL script numkeys [key ...] [arg ...] and EVALSHA sha1
// numkeys ... (ro: EVAL_RO, EVALSHA_RO).
func planEval(kind string, ro bool) planFunc {
	return func(c *conn, args [][]byte) plan {
		if p, ok := c.kvOnly(lower(args[0])); !ok {
			return p
		}
		key, rest, msg := scriptArgs(args)
		if msg != "" {
			return errPlan("%s", msg)
		}
		body := args[1]
		if kind == "evalsha" {
			b, ok := c.s.scr.get(string(args[1]))
			if !ok {
				return errPlan("NOSCRIPT No matching script. Please use EVAL.")
			}
			body = b
		} else {
			c.s.scr.add(body)
		}
		mode := "eval"
		if ro {
			mode = "ro:eval"
		}
		a := append([][]byte{[]byte(mode), body}, rest...)
		return opPlan(service.Op{Kind: "eval", Key: key, Args: a}, nil)
	}
}

// planFCall is FCALL function numkeys [key ...] [arg ...] (ro: FCALL_RO).
func planFCall(ro bool) planFunc {
	return func(c *conn, args [][]byte) plan {
		if p, ok := c.kvOnly(lower(args[0])); !ok {
			return p
		}
		key, rest, msg := scriptArgs(args)
		if _, err := strconv.ParseInt(string(args[2]), 10, 64); err != nil {
			msg = "ERR Bad number of keys provided" // FCALL's word for it (Redis 7.0)
		}
		if msg != "" {
			return errPlan("%s", msg)
		}
		lib, fname, ok := c.s.scr.libraryOf(string(args[1]))
		if !ok {
			return errPlan("ERR Function not found")
		}
		mode := "fcall:" + fname
		if ro {
			mode = "ro:" + mode
		}
		a := append([][]byte{[]byte(mode), lib.code}, rest...)
		return opPlan(service.Op{Kind: "eval", Key: key, Args: a}, nil)
	}
}

// scriptConn is the connection a script's commands are planned on: a KV
// namespace (plans read nothing else of it).
var scriptConn = &conn{ns: config.Namespace{Name: "script", Service: "kv"}, svc: service.KV{}}

// scriptCommand maps a command called from a script onto its plan's
// operations (service.SetScriptCommands).
func scriptCommand(args [][]byte) ([]service.Op, func([]service.Result) service.Result, string) {
	name := lower(args[0])
	cmd, ok := commands[name]
	if !ok {
		return nil, nil, "ERR Unknown Redis command called from script"
	}
	if (cmd.arity > 0 && len(args) != cmd.arity) || (cmd.arity < 0 && len(args) < -cmd.arity) {
		return nil, nil, "ERR Wrong number of args calling Redis command from script"
	}
	switch {
	case name == "ping" && len(args) <= 2:
		if len(args) == 2 {
			return nil, func([]service.Result) service.Result { return service.Bytes(args[1]) }, ""
		}
		return nil, func([]service.Result) service.Result { return status("PONG") }, ""
	case name == "echo" && len(args) == 2:
		return nil, func([]service.Result) service.Result { return service.Bytes(args[1]) }, ""
	}
	if cmd.plan == nil || cmd.block != nil || slices.Contains(cmd.flags, "noscript") {
		return nil, nil, "ERR This Redis command is not allowed from script"
	}
	p := cmd.plan(scriptConn, args)
	if len(p.guards) > 0 {
		return nil, nil, fmt.Sprintf("ERR %s is not supported from scripts by Synod", strings.ToUpper(name))
	}
	return p.ops, p.render, ""
}

// cmdScript is SCRIPT LOAD|EXISTS|FLUSH|KILL|HELP.
func cmdScript(c *conn, args [][]byte) {
	sub := lower(args[1])
	switch {
	case sub == "load" && len(args) == 3:
		c.w.WriteBulkString(c.s.scr.add(args[2]))
	case sub == "exists" && len(args) >= 3:
		c.w.WriteArray(len(args) - 2)
		for _, a := range args[2:] {
			_, ok := c.s.scr.get(string(a))
			if ok {
				c.w.WriteInt(1)
			} else {
				c.w.WriteInt(0)
			}
		}
	case sub == "flush" && len(args) <= 3:
		if len(args) == 3 && lower(args[2]) != "async" && lower(args[2]) != "sync" {
			c.writeError("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
			return
		}
		c.s.scr.mu.Lock()
		c.s.scr.body = nil
		c.s.scr.mu.Unlock()
		c.w.WriteSimple("OK")
	case sub == "kill" && len(args) == 2:
		c.writeError("NOTBUSY No scripts in execution right now.")
	case sub == "help":
		help := []string{"SCRIPT LOAD <script>: cache a script on this node, answer its SHA1 (EVALSHA runs it).",
			"SCRIPT EXISTS <sha1> [<sha1> ...]", "SCRIPT FLUSH [ASYNC|SYNC]", "SCRIPT KILL: no script is ever killed (a script's run is bounded by instructions, service/kv_script.go)."}
		c.w.WriteArray(len(help))
		for _, h := range help {
			c.w.WriteSimple(h)
		}
	case slices.Contains([]string{"load", "exists", "flush", "kill"}, sub):
		c.writeError(arityErr("script|" + sub))
	default:
		c.writeError(fmt.Sprintf("ERR unknown subcommand '%s'. Try SCRIPT HELP.", args[1]))
	}
}

// libraryName reads a library's "#!lua name=<name>" first line.
func libraryName(code []byte) (string, string) {
	line, _, _ := strings.Cut(string(code), "\n")
	if !strings.HasPrefix(line, "#!") {
		return "", "ERR Missing library metadata"
	}
	engine, _, _ := strings.Cut(line[2:], " ") // "#! name=x" names the engine ""
	f := strings.Fields(line[2:])
	if !strings.EqualFold(engine, "lua") {
		return "", "ERR Engine '" + engine + "' not found"
	}
	name, named := "", false
	for _, kv := range f[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k != "name" {
			return "", "ERR Invalid metadata value given: " + kv
		}
		if named {
			return "", "ERR Invalid metadata value, name argument was given multiple times"
		}
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' { // Redis splits the line as sdssplitargs: quotes go
			v = v[1 : len(v)-1]
		}
		name, named = v, true
	}
	if name == "" {
		return "", "ERR Library name was not given"
	}
	if strings.IndexFunc(name, func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) >= 0 {
		return "", "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"
	}
	return name, ""
}

// cmdFunction is FUNCTION LOAD|LIST|DELETE|FLUSH|STATS|KILL|DUMP|RESTORE|HELP.
func cmdFunction(c *conn, args [][]byte) {
	sub := lower(args[1])
	scr := &c.s.scr
	switch sub {
	case "load":
		replace := len(args) == 4 && lower(args[2]) == "replace"
		if len(args) > 3 && !replace {
			c.writeError(fmt.Sprintf("ERR Unknown option given: %s", args[2]))
			return
		}
		code := args[len(args)-1]
		name, msg := libraryName(code)
		if msg != "" {
			c.writeError(msg)
			return
		}
		funcs, msg := service.CheckLibrary(code)
		if msg != "" {
			c.writeError(withCode(msg))
			return
		}
		scr.mu.Lock()
		defer scr.mu.Unlock()
		if _, exists := scr.libs[name]; exists && !replace {
			c.writeError(fmt.Sprintf("ERR Library '%s' already exists", name))
			return
		}
		for _, l := range scr.libs {
			for _, f := range funcs {
				if l.name != name && slices.Contains(l.funcs, f) {
					c.writeError(fmt.Sprintf("ERR Function %s already exists", f))
					return
				}
			}
		}
		if scr.libs == nil {
			scr.libs = map[string]*library{}
		}
		scr.libs[name] = &library{name: name, code: code, funcs: funcs}
		c.w.WriteBulkString(name)
	case "delete":
		if len(args) != 3 {
			c.writeError(arityErr("function|delete"))
			return
		}
		scr.mu.Lock()
		_, ok := scr.libs[string(args[2])]
		delete(scr.libs, string(args[2]))
		scr.mu.Unlock()
		if !ok {
			c.writeError("ERR Library not found")
			return
		}
		c.w.WriteSimple("OK")
	case "flush":
		if len(args) > 3 {
			c.writeError("ERR unknown subcommand or wrong number of arguments for 'flush'. Try FUNCTION HELP.")
			return
		}
		if len(args) == 3 && lower(args[2]) != "async" && lower(args[2]) != "sync" {
			c.writeError("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
			return
		}
		scr.mu.Lock()
		scr.libs = nil
		scr.mu.Unlock()
		c.w.WriteSimple("OK")
	case "list":
		withCode, pattern := false, ""
		for i := 2; i < len(args); i++ {
			switch lower(args[i]) {
			case "withcode":
				withCode = true
			case "libraryname":
				if i+1 >= len(args) {
					c.writeError("ERR library name argument was not given")
					return
				}
				pattern = string(args[i+1])
				i++
			default:
				c.writeError(fmt.Sprintf("ERR Unknown argument %s", args[i]))
				return
			}
		}
		scr.mu.Lock()
		var libs []*library
		for _, l := range scr.libs {
			if pattern == "" || service.GlobMatch([]byte(pattern), []byte(l.name)) {
				libs = append(libs, l)
			}
		}
		scr.mu.Unlock()
		slices.SortFunc(libs, func(a, b *library) int { return strings.Compare(a.name, b.name) })
		c.w.WriteArray(len(libs))
		for _, l := range libs {
			n := 3
			if withCode {
				n = 4
			}
			c.w.WriteMap(n)
			c.w.WriteBulkString("library_name")
			c.w.WriteBulkString(l.name)
			c.w.WriteBulkString("engine")
			c.w.WriteBulkString("LUA")
			c.w.WriteBulkString("functions")
			c.w.WriteArray(len(l.funcs))
			for _, f := range l.funcs {
				c.w.WriteMap(3)
				c.w.WriteBulkString("name")
				c.w.WriteBulkString(f)
				c.w.WriteBulkString("description")
				c.w.WriteNull()
				c.w.WriteBulkString("flags")
				c.w.WriteSet(0)
			}
			if withCode {
				c.w.WriteBulkString("library_code")
				c.w.WriteBulk(l.code)
			}
		}
	case "kill":
		c.writeError("NOTBUSY No scripts in execution right now.")
	case "stats":
		c.w.WriteMap(2)
		c.w.WriteBulkString("running_script")
		c.w.WriteNull()
		c.w.WriteBulkString("engines")
		c.w.WriteMap(1)
		c.w.WriteBulkString("LUA")
		scr.mu.Lock()
		nl, nf := len(scr.libs), 0
		for _, l := range scr.libs {
			nf += len(l.funcs)
		}
		scr.mu.Unlock()
		c.w.WriteMap(2)
		c.w.WriteBulkString("libraries_count")
		c.w.WriteInt(int64(nl))
		c.w.WriteBulkString("functions_count")
		c.w.WriteInt(int64(nf))
	case "dump", "restore":
		c.writeError(fmt.Sprintf("ERR FUNCTION %s is not supported by Synod (FUNCTION LOAD the library's code on each node)", strings.ToUpper(sub)))
	case "help":
		help := []string{"FUNCTION LOAD [REPLACE] <code>: load a Lua library on this node (#!lua name=<name>).",
			"FUNCTION LIST [WITHCODE] [LIBRARYNAME <pattern>]", "FUNCTION DELETE <library>", "FUNCTION FLUSH [ASYNC|SYNC]", "FUNCTION STATS", "FUNCTION KILL"}
		c.w.WriteArray(len(help))
		for _, h := range help {
			c.w.WriteSimple(h)
		}
	default:
		c.writeError(fmt.Sprintf("ERR unknown subcommand '%s'. Try FUNCTION HELP.", args[1]))
	}
}
