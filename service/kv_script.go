package service

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// Lua scripts (EVAL, EVALSHA, FCALL; issue 34), run by gopher-lua (Lua 5.1,
// the language Redis embeds).
//
// Decision: a script is replicated as itself, not as its effects. Redis 7
// runs a script on the primary and replicates the writes it made (effects
// replication); Synod logs one operation, eval, holding the script, its
// keys and its arguments, and every replica runs it inside Apply, like any
// other operation. So a script is one atomic operation of the log wherever
// the protocol runs the KV service (nothing interleaves with it, a follower
// forwards it, a new leader re-runs nothing it did not log), and it needs
// no new path through the protocols. The price is determinism, which Apply
// requires and which this file enforces:
//
//   - No clock, no randomness from outside: the os and io libraries are not
//     opened, math.random is a generator seeded from the operation's Env
//     (logged by the leader with the operation, so every replica draws the
//     same numbers and two runs draw different ones, as Redis 7's scripts
//     do), math.randomseed reseeds it, and the commands that read the node's
//     clock or nothing replicated (TIME, INFO, ...) are not reachable.
//   - A bounded run, counted, not timed: every Lua instruction counts, and
//     a script past ScriptBudget instructions fails with an error at the
//     same instruction on every replica (Redis's lua-time-limit is a time;
//     a time would differ between replicas). Writes made before an error
//     stay, as in Redis (a script is not rolled back). Redis runs a script
//     until SCRIPT KILL, FUNCTION KILL or SHUTDOWN NOSAVE; a logged run
//     must end by itself (every replica, and every restart replaying the
//     log, runs it), so Synod gives a run that a kill can still end (busy
//     mark, nothing written: kv_script_busy.go) KillableBudget, ten times
//     ScriptBudget, and one that cannot ScriptBudget.
//   - redis.call runs a Redis command through the gateway's own mapping
//     (SetScriptCommands): its KV operations are applied here, one after
//     the other, on this state. Blocking commands are refused, as in Redis.
//
// The script cache (SCRIPT LOAD, EVALSHA) and the function libraries
// (FUNCTION LOAD, FCALL) are kept by each node's gateway; what reaches the
// log is always the script's text, so a replica never needs a cache.
//
//	eval mode body numkeys [key ...] [arg ...]
//	    mode "eval" (body is a script), "fcall:<name>" (body is a library
//	    whose function <name> is called), or either with "ro:" in front
//	    (EVAL_RO, FCALL_RO: a write is refused), then optionally a report
//	    prefix (ScriptCalls, ScriptCounts). Op.Key is the first key.

// callCost is what one redis.call or redis.pcall counts against the
// budget: a call costs far more than an instruction (an error reply is a
// Go panic and recover inside the VM).
const callCost = 100

// raiseCost is what raising a command's error costs besides.
const raiseCost = 2000

// maxReplyDepth bounds the nesting of a script's reply: the results that
// travel between nodes nest at most MaxArrayDepth arrays deep.
const maxReplyDepth = MaxArrayDepth - 1

// StatusPrefix marks a script's status reply other than OK ({ok='fine'}):
// a ResultErr whose text is StatusPrefix + the status, because results
// between nodes carry no text for a ResultOK. The gateway writes it as a
// status reply.
const StatusPrefix = "\x00status:"

// ScriptBudget bounds the Lua instructions of one script run.
const ScriptBudget = 20_000_000

// KillableBudget bounds a run that may be killed: one with a busy mark
// that has not written before it (kv_script_busy.go). Redis runs a script
// until SCRIPT KILL, FUNCTION KILL or SHUTDOWN NOSAVE; a Synod run is in
// the log and every replica (and every restart) runs it, so it must end
// by itself, but while a kill can end it the budget is ten times larger
// (about 10-30 s on a loaded 2-core machine) so that a client has the time
// Redis gives it. A run that writes before its mark can no longer be
// killed and falls back to ScriptBudget counted from its start.
const KillableBudget = 10 * ScriptBudget

// ScriptCommand turns a Redis command called from a script (name first)
// into KV operations and a function rendering their results as the
// command's reply; errMsg refuses it (a Redis error text).
type ScriptCommand func(args [][]byte) (ScriptCmd, string)

// ScriptCmd is a command a script calls, as ScriptCommand maps it.
type ScriptCmd struct {
	Ops    []Op
	Render func([]Result) Result
	// DenyOOM: Redis's denyoom flag (a command that may grow memory),
	// refused over maxmemory (ScriptOOM).
	DenyOOM bool
	// Known: the command exists (a refusal of it counts in its
	// statistics; an unknown command's counts only as an error).
	Known bool
}

var scriptCommand ScriptCommand

// SetScriptCommands installs the mapping of Redis commands onto KV
// operations that redis.call uses (the gateway's command table). Without
// one, redis.call answers an error.
func SetScriptCommands(f ScriptCommand) { scriptCommand = f }

func init() {
	addKVOps(map[string]kvOp{
		"eval": {min: 3, max: -1, check: checkEval, keys: evalKeys, run: (*KVState).opEval},
	})
}

func checkEval(op Op) error {
	m, _ := SplitScriptReport(strings.TrimPrefix(string(op.Args[0]), "ro:"))
	m, _ = SplitScriptOOM(m)
	m, _, err := splitMark(m)
	if err != nil {
		return err
	}
	if m != "eval" && !strings.HasPrefix(m, "fcall:") {
		return fmt.Errorf("eval mode must be eval or fcall:<name>")
	}
	n, ok := parseInt(op.Args[2])
	if !ok || n < 0 {
		return fmt.Errorf("Number of keys can't be negative")
	}
	if n > int64(len(op.Args)-3) {
		return fmt.Errorf("Number of keys can't be greater than number of args")
	}
	return nil
}

func evalKeys(op Op) []string {
	n, _ := parseInt(op.Args[2])
	return argStrings(op.Args[3 : 3+n])
}

// SHA1Hex is a script's name in the cache (EVALSHA, redis.sha1hex).
func SHA1Hex(b []byte) string {
	h := sha1.Sum(b)
	return hex.EncodeToString(h[:])
}

// budget is a context whose Done channel closes after n checks: gopher-lua
// checks it once per instruction.
type budget struct {
	left int64
	done chan struct{}
	// run, when the operation has a busy mark, is the registered run;
	// busyAt is the value of left at the mark (kv_script_busy.go).
	run    *RunningScript
	busyAt int64
	marked bool
	total  int64 // the budget the run started with
}

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (b *budget) Deadline() (time.Time, bool) { return time.Time{}, false }
func (b *budget) Value(any) any               { return nil }
func (b *budget) Err() error {
	if b.run != nil && b.run.killed.Load() {
		return errScriptKilled
	}
	if b.left < 0 {
		return errScriptBudget
	}
	return nil
}
func (b *budget) Done() <-chan struct{} {
	b.left--
	if b.left < 0 {
		return closedCh
	}
	if b.run != nil {
		if !b.marked && b.left <= b.busyAt {
			b.marked = true
			switch {
			case !b.run.wrote.Load() && runEnded(b.run.ID):
				// Killed (or out of budget) at another replica: end
				// here at the mark, with the same state.
				b.run.killed.Store(true)
			case runAnswered(b.run.ID):
				// Run first elsewhere and answered: not busy here.
			default:
				markBusy(b.run)
			}
		}
		if b.run.killed.Load() {
			return closedCh
		}
	}
	return b.done
}

// wrote records that the run wrote (before its mark: a write past it is
// refused): it can no longer be killed, and its budget falls back to
// ScriptBudget.
func (b *budget) wrote() {
	if !b.run.wrote.Swap(true) {
		b.left -= b.total - ScriptBudget
	}
}

var errScriptBudget = errors.New("script exceeded its budget of instructions")

var _ context.Context = (*budget)(nil)

// scriptRun is one run's state.
type scriptRun struct {
	s        *KVState
	budget   *budget
	readOnly bool
	name     string // "user_script" or the function's name
	// The globals' metatable and its run-time __index (protectGlobals),
	// the globals a library's code sees while it loads (Redis 7's library
	// API: redis.register_function, redis.log and the version, nothing
	// else), and the registration under way (nil outside a load).
	gmt, backing, loadGlobals *lua.LTable
	register                  func(L *lua.LState) int
	// rep, when reporting (ScriptCalls, ScriptCounts), collects what the
	// run's commands did.
	rep *scriptReport
	// oom: the operation was sent over maxmemory (ScriptOOM) and the run
	// is in Redis's compatibility mode (an EVAL without a shebang), so a
	// denyoom command is refused until the run has written; wrote: a
	// command that writes ran (Redis's SCRIPT_WRITE_DIRTY).
	oom, wrote bool
}

// scriptReport is what a run's commands did, for the sending node's
// statistics and MONITOR.
type scriptReport struct {
	calls bool       // keep each command's arguments (ScriptCalls)
	args  [][][]byte // the commands executed, in order (calls only)
	names []string   // command names (lower case) in order of first use
	stats map[string]*callStats
	codes []string // the error codes of refused and failed commands, in order
	// id is the run's RunningScript.ID, when it has a busy mark.
	id string
	// counted: the run's reply is an error a command answered (a
	// redis.call error raised, or redis.pcall's error returned), already
	// counted among codes, as Redis counts it once.
	counted bool
}

// callStats are one command's outcomes in a run, as Redis counts them:
// calls that ran (failed ones among them) and calls refused before they
// ran.
type callStats struct{ calls, rejected, failed int64 }

// Command outcomes a run reports.
const (
	callOK = iota
	callFailed
	callRejected
)

// record notes one command's outcome (name "" for a command that does
// not exist: only its error counts).
func (r *scriptReport) record(name string, outcome int, errMsg string) {
	if r == nil {
		return
	}
	if outcome != callOK {
		r.codes = append(r.codes, errCode(errMsg))
	}
	if name == "" {
		return
	}
	st := r.stats[name]
	if st == nil {
		if r.stats == nil {
			r.stats = map[string]*callStats{}
		}
		st = &callStats{}
		r.stats[name] = st
		r.names = append(r.names, name)
	}
	switch outcome {
	case callRejected:
		st.rejected++
	case callFailed:
		st.calls++
		st.failed++
	default:
		st.calls++
	}
}

// errCode is an error text's code: its first word when upper case, else
// ERR (withErrCode's rule).
func errCode(msg string) string {
	code, _, _ := strings.Cut(withErrCode(msg), " ")
	return code
}

// Script call reports, for a node's MONITOR and command statistics: the
// commands a script runs execute inside Apply at every replica, not at the
// gateway that sent it, so the eval operation can ask its result to say
// what ran. A mode with ScriptCalls after any "ro:" gets [calls, result],
// calls one array of arguments per command executed; with ScriptCounts it
// gets [counts, result], counts the commands' names (lower case) and how
// many times each ran, in order of first use. The result is wrapped even
// when it is an error (what ran before the error ran). The report is the
// same at every replica (the run is); operations logged without the
// prefix are read as before.
//
// The report is an array of entries, each an array led by its tag:
//
//	["c", name, calls, rejected, failed]  one command's outcomes (Redis's
//	                                      calls, rejected_calls, failed_calls)
//	["e", code ...]                       the error codes of the refused and
//	                                      failed commands, in order (errorstats)
//	["m", arg ...]                        one command executed (ScriptCalls only)
//	["x"]                                 the reply is an error a command
//	                                      answered, already among the codes
//	["i", id]                             the run's RunningScript.ID (a run
//	                                      with a busy mark): the sending node
//	                                      answered it (RunAnswered)
const (
	ScriptCalls  = "calls:"
	ScriptCounts = "counts:"
)

// Scripts over maxmemory (Redis 7.0's script.c; issue 34). maxmemory is a
// node's (gateway/maxmemory.go): the node sending an EVAL or FCALL while
// over its limit puts ScriptOOM into the mode (after any "ro:" and report
// prefix), as Redis takes pre_command_oom_state when the script starts, so
// every replica decides alike:
//
//   - a script that declares flags (an EVAL with a "#!lua" shebang, any
//     FCALL) without no-writes or allow-oom is refused before it runs
//     with Redis's OOM error (processCommand, scriptPrepareForRun);
//   - an EVAL without a shebang (Redis's compatibility mode) runs, and a
//     denyoom command it calls before it has written answers the OOM error
//     (scriptVerifyOOM): redis.call raises it, redis.pcall returns it;
//   - allow-oom lets a script run any command, as in Redis.
const ScriptOOM = "oom:"

// OOMError is Redis's shared.oomerr.
const OOMError = "OOM command not allowed when used memory > 'maxmemory'."

// SplitScriptOOM removes ScriptOOM from mode (after "ro:" and the report
// prefix), saying whether it was there.
func SplitScriptOOM(mode string) (string, bool) {
	return strings.CutPrefix(mode, ScriptOOM)
}

// SplitScriptReport removes a report prefix from mode (after "ro:"),
// returning it.
func SplitScriptReport(mode string) (string, string) {
	for _, p := range []string{ScriptCalls, ScriptCounts} {
		if m, ok := strings.CutPrefix(mode, p); ok {
			return m, p
		}
	}
	return mode, ""
}

func (s *KVState) opEval(op Op) Result {
	mode := string(op.Args[0])
	ro := strings.HasPrefix(mode, "ro:")
	rest, report := SplitScriptReport(strings.TrimPrefix(mode, "ro:"))
	if report == "" {
		return s.runEval(op, nil)
	}
	if ro {
		rest = "ro:" + rest
	}
	op.Args = append([][]byte{[]byte(rest)}, op.Args[1:]...)
	rep := &scriptReport{calls: report == ScriptCalls}
	r := s.runEval(op, rep)
	var out []Result
	for _, n := range rep.names {
		st := rep.stats[n]
		out = append(out, Array(Bytes([]byte("c")), Bytes([]byte(n)), Int(st.calls), Int(st.rejected), Int(st.failed)))
	}
	if len(rep.codes) > 0 {
		e := []Result{Bytes([]byte("e"))}
		for _, c := range rep.codes {
			e = append(e, Bytes([]byte(c)))
		}
		out = append(out, Array(e...))
	}
	for _, c := range rep.args {
		out = append(out, BytesArray(append([][]byte{[]byte("m")}, c...)...))
	}
	if rep.counted && r.Type == ResultErr {
		out = append(out, Array(Bytes([]byte("x"))))
	}
	if rep.id != "" {
		out = append(out, Array(Bytes([]byte("i")), Bytes([]byte(rep.id))))
	}
	return Array(Array(out...), r)
}

// runEval runs an eval operation without a report prefix, collecting what
// its commands did into rep when not nil.
func (s *KVState) runEval(op Op, rep *scriptReport) Result {
	mode := string(op.Args[0])
	ro := strings.HasPrefix(mode, "ro:")
	mode, oom := SplitScriptOOM(strings.TrimPrefix(mode, "ro:"))
	mode, mark, _ := splitMark(mode)
	n, _ := parseInt(op.Args[2])
	keys, argv := op.Args[3:3+n], op.Args[3+n:]
	body := op.Args[1]
	run := &scriptRun{s: s, readOnly: ro, oom: oom, budget: &budget{left: ScriptBudget, total: ScriptBudget, done: make(chan struct{})}, rep: rep}
	if mark > 0 {
		// A run that may become busy (kv_script_busy.go).
		name := "user_script"
		if f, ok := strings.CutPrefix(mode, "fcall:"); ok {
			name = f
		}
		r := &RunningScript{Name: name, Eval: mode == "eval", Command: scriptCommandLine(ro, mode, body, op.Args[2:]), Start: time.Now(), Libraries: len(s.libs)}
		for _, l := range s.libs {
			r.Functions += len(l.funcs)
		}
		r.ID = runID(s.env)
		if rep != nil {
			rep.id = r.ID
		}
		run.budget.left, run.budget.total = KillableBudget, KillableBudget
		run.budget.run, run.budget.busyAt = r, KillableBudget-mark
		registerRun(r)
		defer func() {
			if run.budget.left < 0 && !r.wrote.Load() {
				endRun(r) // the replicas behind end theirs at the mark
			}
			unregisterRun(r)
		}()
	}
	L := newScriptState(run)
	defer L.Close()
	L.SetContext(run.budget)
	fn, r := run.load(L, mode, body)
	if fn == nil {
		return r
	}
	L.Push(fn)
	L.Push(bytesTable(L, keys))
	L.Push(bytesTable(L, argv))
	if err := L.PCall(2, 1, nil); err != nil {
		var le *lua.ApiError
		if errors.As(err, &le) && rep != nil {
			rep.counted = countedError(le.Object)
		}
		total := run.budget.total
		if run.budget.run != nil && run.budget.run.wrote.Load() {
			total = ScriptBudget
		}
		return scriptError(err, body, run.name, total)
	}
	ret := L.Get(-1)
	L.Pop(1)
	if rep != nil {
		rep.counted = countedError(ret)
	}
	return fromLua(ret, 0)
}

// countedField marks the error table of a command's error (redis.call
// raises it, redis.pcall returns it): its code is counted where the command
// failed, so the script's reply made of it is not counted again (Redis's
// ignore_error_stats_update).
const countedField = "ignore_error_stats_update"

func countedError(v lua.LValue) bool {
	t, ok := v.(*lua.LTable)
	return ok && t.RawGetString("err").Type() == lua.LTString && lua.LVAsBool(t.RawGetString(countedField))
}

// load compiles the script (eval) or runs the library and finds its
// function (fcall:<name>), returning the function to call with KEYS and
// ARGV, or the error.
func (run *scriptRun) load(L *lua.LState, mode string, body []byte) (*lua.LFunction, Result) {
	if mode == "eval" {
		run.name = "user_script"
		src, flags, msg := evalShebang(string(body))
		if msg != "" {
			return nil, Errorf("%s", msg)
		}
		if run.oom && !run.readOnly {
			switch {
			case !flags.shebang:
				// Compatibility mode: denyoom commands are refused
				// until the run writes (call).
			case !flags.noWrites && !flags.allowOOM:
				return nil, Errorf("%s", OOMError)
			default:
				run.oom = false
			}
		} else {
			run.oom = false
		}
		run.readOnly = run.readOnly || flags.noWrites
		fn, err := L.Load(strings.NewReader(src), "user_script")
		if err != nil {
			return nil, Errorf("Error compiling script (new function): %s", luaMessage(err))
		}
		// KEYS and ARGV are globals for EVAL scripts.
		wrapper := L.NewFunction(func(L *lua.LState) int {
			L.SetGlobal("KEYS", L.Get(1))
			L.SetGlobal("ARGV", L.Get(2))
			L.Push(fn)
			L.Call(0, 1)
			return 1
		})
		return wrapper, Result{}
	}
	name := strings.TrimPrefix(mode, "fcall:")
	run.name = name
	if len(body) == 0 { // FCALL of a replicated library (kv_function.go)
		lib, fname, ok := run.s.libraryOf(name)
		if !ok {
			return nil, Errorf("ERR Function not found")
		}
		body, name = lib.code, fname
		run.name = name
	}
	fns, meta, msg := loadLibrary(run, L, body)
	if msg != "" {
		return nil, Errorf("%s", msg)
	}
	f, ok := fns[name]
	if !ok {
		return nil, Errorf("Function not found")
	}
	if run.readOnly && !meta[name].noWrites {
		return nil, Errorf("ERR Can not execute a script with write flag using *_ro command.")
	}
	if run.oom && !meta[name].noWrites && !meta[name].allowOOM {
		return nil, Errorf("%s", OOMError)
	}
	run.oom = false // a function declares its flags: no compatibility mode
	run.readOnly = run.readOnly || meta[name].noWrites
	return f, Result{}
}

// shebangFlags are what an EVAL script's shebang declares.
type shebangFlags struct {
	shebang, noWrites, allowOOM bool
}

// evalShebang reads an EVAL script's "#!lua [flags=f1,f2]" first line, as
// Redis 7 (evalExtractShebangFlags): it returns the source with that line
// made a comment (line numbers stay), the flags it declares, or the error.
func evalShebang(src string) (string, shebangFlags, string) {
	if !strings.HasPrefix(src, "#!") {
		return src, shebangFlags{}, ""
	}
	line, rest, _ := strings.Cut(src, "\n")
	parts := strings.Fields(line[2:])
	if len(parts) == 0 || parts[0] != "lua" {
		engine := ""
		if len(parts) > 0 {
			engine = parts[0]
		}
		return "", shebangFlags{}, "ERR Unexpected engine in script shebang: " + engine
	}
	fl := shebangFlags{shebang: true}
	for _, p := range parts[1:] {
		flags, ok := strings.CutPrefix(p, "flags=")
		if !ok {
			return "", shebangFlags{}, "ERR Unknown lua shebang option: " + p
		}
		for _, f := range strings.Split(flags, ",") {
			switch f {
			case "no-writes":
				fl.noWrites = true
			case "allow-oom":
				fl.allowOOM = true
			case "allow-stale", "no-cluster", "allow-cross-slot-keys", "":
			default:
				return "", shebangFlags{}, "ERR Unexpected flag in script shebang: " + f
			}
		}
	}
	return "--" + line + "\n" + rest, fl, ""
}

// functionFlags are the flags redis.register_function accepts.
var functionFlags = map[string]bool{"no-writes": true, "allow-oom": true, "allow-stale": true, "no-cluster": true, "allow-cross-slot-keys": true}

// fnMeta is what register_function said of a function besides its
// callback: its description (FUNCTION LIST) and flags; no-writes ones run
// read-only, and FCALL_RO runs only them.
type fnMeta struct {
	noWrites, allowOOM bool
	desc               *string
	flags              []string
}

// loadLibrary runs a function library's code (after its "#!lua name=..."
// line) with Redis 7's library API as its globals (libraryAPI), and returns
// the functions it registered with their metadata, or the error.
func loadLibrary(run *scriptRun, L *lua.LState, code []byte) (map[string]*lua.LFunction, map[string]fnMeta, string) {
	metas := map[string]fnMeta{}
	src := string(code)
	if i := strings.IndexByte(src, '\n'); strings.HasPrefix(src, "#!") {
		if i < 0 {
			src = ""
		} else {
			src = "--" + src[i:] // keep line numbers
		}
	}
	fns := map[string]*lua.LFunction{}
	reg := func(L *lua.LState) int {
		var name string
		var fn *lua.LFunction
		var meta fnMeta
		switch a := L.Get(1).(type) {
		case lua.LString:
			if L.GetTop() == 1 {
				L.RaiseError("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).")
			}
			if L.GetTop() != 2 {
				L.RaiseError("wrong number of arguments to redis.register_function")
			}
			name = string(a)
			f, ok := L.Get(2).(*lua.LFunction)
			if !ok {
				L.RaiseError("second argument to redis.register_function must be a function")
			}
			fn = f
		case *lua.LTable:
			var bad string
			for k, v := a.Next(lua.LNil); k != lua.LNil && bad == ""; k, v = a.Next(k) {
				switch k.String() {
				case "function_name":
					if s, ok := v.(lua.LString); ok {
						name = string(s)
					} else {
						bad = "function_name argument given to redis.register_function must be a string"
					}
				case "callback":
					if f, ok := v.(*lua.LFunction); ok {
						fn = f
					} else {
						bad = "callback argument given to redis.register_function must be a function"
					}
				case "description":
					if d, ok := v.(lua.LString); ok {
						ds := string(d)
						meta.desc = &ds
					} else {
						bad = "description argument given to redis.register_function must be a string"
					}
				case "flags":
					t, ok := v.(*lua.LTable)
					if !ok {
						bad = "flags argument to redis.register_function must be a table representing function flags"
						break
					}
					for i := 1; i <= t.Len(); i++ {
						f, ok := t.RawGetInt(i).(lua.LString)
						if !ok || !functionFlags[string(f)] {
							bad = "unknown flag given"
							break
						}
						meta.noWrites = meta.noWrites || f == "no-writes"
						meta.allowOOM = meta.allowOOM || f == "allow-oom"
						meta.flags = append(meta.flags, string(f))
					}
				default:
					bad = "unknown argument given to redis.register_function"
				}
			}
			if bad != "" {
				L.RaiseError("%s", bad)
			}
			if name == "" {
				L.RaiseError("redis.register_function must get a function name argument")
			}
			if fn == nil {
				L.RaiseError("redis.register_function must get a callback argument")
			}
		case *lua.LNilType:
			if L.GetTop() == 0 {
				L.RaiseError("wrong number of arguments to redis.register_function")
			}
			L.RaiseError("first argument to redis.register_function must be a string")
		default:
			L.RaiseError("first argument to redis.register_function must be a string")
		}
		if name == "" || strings.IndexFunc(name, func(r rune) bool {
			return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
		}) >= 0 {
			L.RaiseError("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long")
		}
		if _, dup := fns[name]; dup {
			L.RaiseError("Function already exists in the library")
		}
		fns[name] = fn
		metas[name] = meta
		return 0
	}
	fn, err := L.Load(strings.NewReader(src), "user_function")
	if err != nil {
		return nil, nil, "Error compiling function: " + luaMessage(err)
	}
	// The code runs with the library API as its globals; the functions it
	// registers find the run-time globals when called.
	run.register = reg
	run.gmt.RawSetString("__index", run.loadGlobals)
	L.Push(fn)
	err = L.PCall(0, 0, nil)
	run.register = nil
	run.gmt.RawSetString("__index", run.backing)
	if err != nil {
		var le *lua.ApiError
		if errors.As(err, &le) && (errors.Is(le.Cause, errScriptBudget) || strings.Contains(le.Object.String(), errScriptBudget.Error())) {
			return nil, nil, "Error registering functions: FUNCTION LOAD timeout"
		}
		return nil, nil, "Error registering functions: " + luaMessage(err)
	}
	if len(fns) == 0 {
		return nil, nil, "No functions registered"
	}
	return fns, metas, ""
}

// CheckLibrary runs a function library's code as FUNCTION LOAD does (no
// Redis command may run) and returns the names of its functions, or the
// error.
func CheckLibrary(code []byte) ([]string, string) {
	run := &scriptRun{}
	L := newScriptState(run)
	defer L.Close()
	L.SetContext(&budget{left: ScriptBudget, done: make(chan struct{})})
	fns, _, msg := loadLibrary(run, L, code)
	if msg != "" {
		return nil, msg
	}
	names := make([]string, 0, len(fns))
	for n := range fns {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, ""
}

// luaMessage is a Lua error's text without the traceback.
func luaMessage(err error) string {
	var le *lua.ApiError
	if errors.As(err, &le) {
		if t, ok := le.Object.(*lua.LTable); ok {
			if e, ok := t.RawGetString("err").(lua.LString); ok {
				return string(e)
			}
		}
		return le.Object.String()
	}
	return err.Error()
}

// scriptError is the reply of a script that raised an error: a
// redis.call error keeps its code, as in Redis.
func scriptError(err error, body []byte, name string, budget int64) Result {
	var le *lua.ApiError
	if errors.As(err, &le) {
		if t, ok := le.Object.(*lua.LTable); ok {
			if e, ok := t.RawGetString("err").(lua.LString); ok {
				return Errorf("%s", string(e))
			}
		}
		msg := le.Object.String()
		if errors.Is(le.Cause, errScriptKilled) || strings.Contains(msg, errScriptKilled.Error()) {
			return Errorf("ERR %s script: %s, on @%s.", errScriptKilled.Error(), SHA1Hex(body), name)
		}
		if errors.Is(le.Cause, errScriptBudget) || strings.Contains(msg, errScriptBudget.Error()) {
			return Errorf("BUSY script exceeded its budget of %d instructions (Synod counts instructions, not time, so every replica stops at the same point)", budget)
		}
		return Errorf("%s script: %s, on @%s.", msg, SHA1Hex(body), name)
	}
	return Errorf("%v", err)
}

func bytesTable(L *lua.LState, bs [][]byte) *lua.LTable {
	t := L.CreateTable(len(bs), 0)
	for i, b := range bs {
		t.RawSetInt(i+1, lua.LString(b))
	}
	return t
}

// newScriptState is a Lua state with the libraries Redis gives scripts
// (base, table, string, math; no os, io or loading of files) and the redis
// table; the globals are read-only once set up.
func newScriptState(run *scriptRun) *lua.LState {
	L := lua.NewState(lua.Options{SkipOpenLibs: true, CallStackSize: 256, RegistrySize: 1024 * 20})
	for _, lib := range []struct {
		name string
		fn   lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.fn))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	for _, g := range []string{"dofile", "loadfile", "load", "module", "require", "print", "collectgarbage", "newproxy", "gcinfo"} {
		L.SetGlobal(g, lua.LNil)
	}
	math := L.GetGlobal("math").(*lua.LTable)
	// The generator starts from the operation's Env (the leader's seed and
	// time, logged with the operation: the same at every replica), so two
	// runs draw different numbers, as Redis 7's scripts do; without an Env
	// (a bare Apply) from a fixed seed.
	var seed uint64 = 0x2545F4914F6CDD1D
	if run.s != nil && (run.s.env.Seed != 0 || run.s.env.Time != 0) {
		seed = (run.s.env.Seed ^ uint64(run.s.env.Time)*0x9e3779b97f4a7c15) | 1
	}
	next := func() float64 { // xorshift64*, reseeded alike at every call
		seed ^= seed >> 12
		seed ^= seed << 25
		seed ^= seed >> 27
		return float64((seed*0x2545F4914F6CDD1D)>>11) / (1 << 53)
	}
	math.RawSetString("random", L.NewFunction(func(L *lua.LState) int {
		f := next()
		switch L.GetTop() {
		case 0:
			L.Push(lua.LNumber(f))
		case 1:
			m := int(L.CheckNumber(1))
			L.Push(lua.LNumber(1 + int(f*float64(m))))
		default:
			lo, hi := int(L.CheckNumber(1)), int(L.CheckNumber(2))
			L.Push(lua.LNumber(lo + int(f*float64(hi-lo+1))))
		}
		return 1
	}))
	math.RawSetString("randomseed", L.NewFunction(func(L *lua.LState) int {
		seed = uint64(L.CheckNumber(1)) | 1
		return 0
	}))
	redis := L.NewTable()
	redis.RawSetString("call", L.NewFunction(func(L *lua.LState) int { return run.call(L, true) }))
	redis.RawSetString("pcall", L.NewFunction(func(L *lua.LState) int { return run.call(L, false) }))
	redis.RawSetString("error_reply", L.NewFunction(func(L *lua.LState) int {
		t := L.NewTable()
		t.RawSetString("err", L.Get(1))
		L.Push(t)
		return 1
	}))
	redis.RawSetString("status_reply", L.NewFunction(func(L *lua.LState) int {
		t := L.NewTable()
		t.RawSetString("ok", L.Get(1))
		L.Push(t)
		return 1
	}))
	redis.RawSetString("sha1hex", L.NewFunction(func(L *lua.LState) int {
		if L.GetTop() != 1 {
			L.RaiseError("wrong number of arguments")
		}
		L.Push(lua.LString(SHA1Hex([]byte(L.CheckString(1)))))
		return 1
	}))
	noop := L.NewFunction(func(L *lua.LState) int { return 0 })
	for _, f := range []string{"log", "set_repl", "setresp", "debug", "breakpoint"} {
		redis.RawSetString(f, noop)
	}
	redis.RawSetString("replicate_commands", L.NewFunction(func(L *lua.LState) int { L.Push(lua.LTrue); return 1 }))
	for i, n := range []string{"LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING"} {
		redis.RawSetString(n, lua.LNumber(i))
	}
	for n, v := range map[string]int{"REPL_NONE": 0, "REPL_SLAVE": 1, "REPL_REPLICA": 1, "REPL_AOF": 2, "REPL_ALL": 3} {
		redis.RawSetString(n, lua.LNumber(v))
	}
	redis.RawSetString("REDIS_VERSION", lua.LString("7.0.15"))
	redis.RawSetString("REDIS_VERSION_NUM", lua.LNumber(0x07000f))
	L.SetGlobal("redis", redis)
	openScriptLibs(L) // cjson, cmsgpack, bit, struct (kv_lualibs.go)
	run.gmt, run.backing = protectGlobals(L)
	run.loadGlobals = libraryAPI(L, run)
	return L
}

// libraryAPI is what a library's code sees as globals while FUNCTION LOAD
// (or a replica's FCALL) runs it, as Redis 7's luaEngineInitEngine: a
// read-only table holding a read-only redis table with register_function,
// log, the LOG_* levels and the version; any other name is an error.
func libraryAPI(L *lua.LState, run *scriptRun) *lua.LTable {
	readonly := L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Attempt to modify a readonly table")
		return 0
	})
	undefined := L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Script attempted to access nonexistent global variable '%s'", L.Get(2).String())
		return 0
	})
	protect := func(t *lua.LTable) *lua.LTable {
		inner := L.NewTable()
		im := L.NewTable()
		im.RawSetString("__index", undefined)
		L.SetMetatable(inner, im)
		for k, v := t.Next(lua.LNil); k != lua.LNil; k, v = t.Next(k) {
			inner.RawSet(k, v)
		}
		p := L.NewTable()
		m := L.NewTable()
		m.RawSetString("__index", inner)
		m.RawSetString("__newindex", readonly)
		m.RawSetString("__metatable", lua.LFalse)
		L.SetMetatable(p, m)
		return p
	}
	redis := L.NewTable()
	redis.RawSetString("register_function", L.NewFunction(func(L *lua.LState) int {
		if run.register == nil {
			L.RaiseError("redis.register_function can only be called on FUNCTION LOAD command")
		}
		return run.register(L)
	}))
	redis.RawSetString("log", L.NewFunction(func(L *lua.LState) int { return 0 }))
	for i, n := range []string{"LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING"} {
		redis.RawSetString(n, lua.LNumber(i))
	}
	redis.RawSetString("REDIS_VERSION", lua.LString("7.0.15"))
	redis.RawSetString("REDIS_VERSION_NUM", lua.LNumber(0x07000f))
	g := L.NewTable()
	g.RawSetString("redis", protect(redis))
	return protect(g)
}

// protectGlobals makes the globals read-only, as Redis 7 does: reading an
// undefined global or creating one is an error, and so is replacing a
// global (redis = ..., _G = ...), changing a field of the libraries' tables
// (redis, cjson, cmsgpack, bit, struct, string, table, math), or changing
// or replacing _G's metatable. KEYS and ARGV stay writable (EVAL sets them).
// The globals move to a backing table that _G reads through its __index;
// each library table is replaced by an empty proxy that reads its own the
// same way.
func protectGlobals(L *lua.LState) (gmt, backing *lua.LTable) {
	readonly := L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Attempt to modify a readonly table")
		return 0
	})
	proxy := func(t *lua.LTable) *lua.LTable {
		p := L.NewTable()
		m := L.NewTable()
		m.RawSetString("__index", t)
		m.RawSetString("__newindex", readonly)
		m.RawSetString("__metatable", lua.LFalse)
		L.SetMetatable(p, m)
		return p
	}
	g := L.G.Global
	backing = L.NewTable()
	var keys []lua.LValue
	for k, _ := g.Next(lua.LNil); k != lua.LNil; k, _ = g.Next(k) {
		keys = append(keys, k)
	}
	for _, k := range keys {
		v := g.RawGet(k)
		g.RawSet(k, lua.LNil)
		if t, ok := v.(*lua.LTable); ok && t != g {
			switch k.String() {
			case "redis", "cjson", "cmsgpack", "bit", "struct", "string", "table", "math":
				v = proxy(t)
			}
		}
		backing.RawSet(k, v)
	}
	setmt := backing.RawGetString("setmetatable")
	backing.RawSetString("setmetatable", L.NewFunction(func(L *lua.LState) int {
		if L.GetMetaField(L.Get(1), "__metatable") != lua.LNil {
			L.RaiseError("Attempt to modify a readonly table")
		}
		L.Push(setmt)
		L.Push(L.Get(1))
		L.Push(L.Get(2))
		L.Call(2, 1)
		return 1
	}))
	undefined := L.NewTable()
	undefined.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		k := L.Get(2)
		if k.String() == "KEYS" || k.String() == "ARGV" {
			return 0
		}
		L.RaiseError("Script attempted to access nonexistent global variable '%s'", k.String())
		return 0
	}))
	L.SetMetatable(backing, undefined)
	mt := L.NewTable()
	mt.RawSetString("__index", backing)
	mt.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		k := L.Get(2)
		if k.String() == "KEYS" || k.String() == "ARGV" {
			L.RawSet(L.CheckTable(1), k, L.Get(3))
			return 0
		}
		L.RaiseError("Attempt to modify a readonly table")
		return 0
	}))
	mt.RawSetString("__metatable", proxy(mt))
	L.SetMetatable(g, mt)
	return mt, backing
}

// call is redis.call (raise: an error reply raises it) and redis.pcall
// (returns it as a table {err=...}). Its outcome is reported as Redis
// counts it (scriptCall): refused before it ran (rejected: unknown,
// not allowed, a write in a read-only or busy script, OOM) or ran and
// answered an error (failed).
func (run *scriptRun) call(L *lua.LState, raise bool) int {
	name := ""
	// fail answers msg; a command's refusal or failure is reported and
	// its error table marked counted (countedField).
	fail := func(outcome int, msg string) int {
		t := L.NewTable()
		t.RawSetString("err", lua.LString(msg))
		if outcome != callOK {
			run.rep.record(name, outcome, msg)
			t.RawSetString(countedField, lua.LTrue)
		}
		if raise {
			if run.budget != nil {
				run.budget.left -= raiseCost
			}
			L.Error(t, 1)
			return 0
		}
		L.Push(t)
		return 1
	}
	if run.budget != nil {
		run.budget.left -= callCost
	}
	n := L.GetTop()
	if n == 0 {
		return fail(callOK, "ERR Please specify at least one argument for this redis lib call")
	}
	args := make([][]byte, n)
	for i := 1; i <= n; i++ {
		switch v := L.Get(i).(type) {
		case lua.LString:
			args[i-1] = []byte(v)
		case lua.LNumber:
			f := float64(v)
			if f == math.Trunc(f) && math.Abs(f) < 1e17 {
				args[i-1] = []byte(strconv.FormatInt(int64(f), 10))
			} else {
				args[i-1] = []byte(strconv.FormatFloat(f, 'g', 17, 64))
			}
		default:
			return fail(callOK, "ERR Lua redis lib command arguments must be strings or integers")
		}
	}
	if scriptCommand == nil || run.s == nil {
		return fail(callOK, "ERR Redis commands cannot be run here (no command mapping, or a library being loaded)")
	}
	cmd, msg := scriptCommand(args)
	if cmd.Known {
		name = strings.ToLower(string(args[0]))
	}
	if msg != "" {
		return fail(callRejected, msg)
	}
	write := false
	for _, op := range cmd.Ops {
		if err := (KV{}).Validate(op); err != nil {
			return fail(callFailed, withErrCode(err.Error()))
		}
		write = write || !kvOps[op.Kind].read
	}
	if write && run.readOnly {
		return fail(callRejected, "ERR Write commands are not allowed from read-only scripts.")
	}
	if run.oom && cmd.DenyOOM && !run.wrote {
		// Over maxmemory when the run started, nothing written yet
		// (Redis's scriptVerifyOOM).
		return fail(callRejected, OOMError)
	}
	if b := run.budget; write && b != nil && b.run != nil {
		// Past the mark, only a run that wrote before it may write
		// (kv_script_busy.go); the count is the same at every replica.
		if b.left <= b.busyAt && !b.run.wrote.Load() {
			return fail(callRejected, ErrBusyWrite)
		}
		b.wrote()
	}
	run.wrote = run.wrote || write
	if run.rep != nil && run.rep.calls {
		run.rep.args = append(run.rep.args, args)
	}
	results := make([]Result, len(cmd.Ops))
	for i, op := range cmd.Ops {
		results[i] = run.s.ApplyEnv(op, run.s.env)
	}
	r := cmd.Render(results)
	if r.Type == ResultErr {
		return fail(callFailed, withErrCode(r.Err))
	}
	run.rep.record(name, callOK, "")
	L.Push(toLua(L, r))
	return 1
}

// withErrCode is msg with "ERR " in front unless it starts with an
// upper-case code (the gateway's rule, gateway.withCode).
func withErrCode(msg string) string {
	code, _, found := strings.Cut(msg, " ")
	if found && len(code) >= 2 && strings.ToUpper(code) == code && strings.IndexFunc(code, func(r rune) bool { return (r < 'A' || r > 'Z') && r != '_' }) < 0 {
		return msg
	}
	return "ERR " + msg
}

// toLua converts a command's reply as Redis does for RESP2: integer ->
// number, bulk -> string, nil -> false, status -> {ok=...}, array ->
// table.
func toLua(L *lua.LState, r Result) lua.LValue {
	switch r.Type {
	case ResultInt:
		return lua.LNumber(r.Int)
	case ResultBytes:
		return lua.LString(r.Bytes)
	case ResultOK:
		t := L.NewTable()
		s := "OK"
		if len(r.Bytes) > 0 {
			s = string(r.Bytes)
		}
		t.RawSetString("ok", lua.LString(s))
		return t
	case ResultErr:
		t := L.NewTable()
		t.RawSetString("err", lua.LString(withErrCode(r.Err)))
		return t
	case ResultArray:
		t := L.CreateTable(len(r.Elems), 0)
		for i, e := range r.Elems {
			t.RawSetInt(i+1, toLua(L, e))
		}
		return t
	}
	return lua.LFalse
}

// fromLua converts a script's return value as Redis does: number ->
// integer (truncated), string -> bulk, true -> 1, false and nil -> nil,
// {err=...} -> error, {ok=...} -> status, other tables -> array up to the
// first nil. A reply nested deeper than maxReplyDepth (a table that holds
// itself) is an error, as in Redis.
func fromLua(v lua.LValue, depth int) Result {
	switch v := v.(type) {
	case lua.LNumber:
		return Int(int64(v))
	case lua.LString:
		return Bytes([]byte(v))
	case lua.LBool:
		if v {
			return Int(1)
		}
		return Nil()
	case *lua.LTable:
		if e, ok := v.RawGetString("err").(lua.LString); ok {
			return Result{Type: ResultErr, Err: withErrCode(string(e))}
		}
		if s, ok := v.RawGetString("ok").(lua.LString); ok {
			if s == "OK" {
				return OK()
			}
			return Result{Type: ResultErr, Err: StatusPrefix + string(s)}
		}
		if depth > maxReplyDepth {
			return Errorf("reached lua stack limit")
		}
		var out []Result
		for i := 1; ; i++ {
			e := v.RawGetInt(i)
			if e == lua.LNil {
				break
			}
			r := fromLua(e, depth+1)
			if r.Type == ResultErr && r.Err == "reached lua stack limit" {
				return r
			}
			out = append(out, r)
		}
		return Array(out...)
	}
	return Nil()
}
