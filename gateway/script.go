package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
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
// is this node's, as in a Redis Cluster each node has its own: a client
// that reaches another node after a fail-over gets NOSCRIPT and sends
// EVAL, as Redis clients do. The log never depends on it: it holds the
// script's text. The function libraries are replicated state, as in Redis
// 7: FUNCTION LOAD, DELETE, FLUSH and RESTORE are operations of the log,
// and FCALL names the function, which Apply finds in the state's library
// table (service/kv_function.go), so every node has them and a restarted
// node keeps them.

func init() {
	movable := []string{"noscript", "stale", "skip_monitor", "may_replicate", "no_mandatory_keys", "movablekeys"}
	register("scripting",
		&command{name: "eval", arity: -3, flags: movable, getkeys: scriptKeys, plan: planEval("eval", false)},
		&command{name: "evalsha", arity: -3, flags: movable, getkeys: scriptKeys, plan: planEval("evalsha", false)},
		&command{name: "eval_ro", arity: -3, flags: movable, getkeys: scriptKeys, plan: planEval("eval", true)},
		&command{name: "evalsha_ro", arity: -3, flags: movable, getkeys: scriptKeys, plan: planEval("evalsha", true)},
		&command{name: "fcall", arity: -3, flags: movable, getkeys: scriptKeys, plan: planFCall(false)},
		&command{name: "fcall_ro", arity: -3, flags: movable, getkeys: scriptKeys, plan: planFCall(true)},
		&command{name: "script", arity: -2, flags: []string{"noscript"}, fn: cmdScript},
		&command{name: "function", arity: -2, flags: []string{"noscript"}, plan: planFunction},
	)
	service.SetScriptCommands(scriptCommand)
}

// scripts is a node's script cache, and its scripts in flight.
type scripts struct {
	mu   sync.Mutex
	body map[string][]byte // sha1 -> script
	// flying are this node's EVAL and FCALL requests with a busy mark
	// that are waiting for their reply, with when they were sent.
	flying  map[*flight]struct{}
	nflying atomic.Int32  // len(flying), read without the lock before every command
	peers   PubSubBackend // the other nodes, for kills (nil: none)
	// asks are this node's kills handed to the other nodes
	// (killRemote), by request id, waiting for a node's result.
	asks map[string]chan string
}

// flight is one script request in flight.
type flight struct {
	start  time.Time
	limit  time.Duration // the node's busy-reply-threshold when it was sent
	eval   bool
	killed bool // a kill of its kind succeeded: no longer busy (under scripts.mu)
	// cmdline names its run (service.RunCommand, joined by NULs), for a
	// kill asked of another node (killRemote).
	cmdline string
}

// sending records op (an eval operation) in flight when it carries a busy
// mark, and returns the function that forgets it.
func (s *scripts) sending(op service.Op) func() {
	mode, _ := service.SplitScriptReport(strings.TrimPrefix(string(op.Args[0]), "ro:"))
	mode, _ = service.SplitScriptOOM(mode)
	kind, mark, ok := strings.Cut(mode, "|")
	if !ok {
		return func() {}
	}
	m, _ := strconv.ParseInt(mark, 10, 64)
	f := &flight{start: time.Now(), limit: time.Duration(m/service.InstructionsPerMs) * time.Millisecond, eval: kind == "eval",
		cmdline: strings.Join(service.RunCommand(op), "\x00")}
	s.mu.Lock()
	if s.flying == nil {
		s.flying = map[*flight]struct{}{}
	}
	s.flying[f] = struct{}{}
	s.nflying.Add(1)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.flying, f)
		s.nflying.Add(-1)
		s.mu.Unlock()
	}
}

// overdue is a request of this node in flight for longer than its
// threshold (nil: none), and whether any is in flight at all.
func (s *scripts) overdue() (*flight, bool) {
	if s.nflying.Load() == 0 {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for f := range s.flying {
		if !f.killed && time.Since(f.start) >= f.limit {
			return f, true
		}
	}
	return nil, len(s.flying) > 0
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

// count is the number of cached scripts (INFO's number_of_cached_scripts).
func (s *scripts) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.body)
}

func (s *scripts) get(sha string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.body[strings.ToLower(sha)]
	return b, ok
}

// scriptKeys is the key finder of EVAL, EVALSHA, FCALL and their _RO
// forms (Redis's evalGetKeys): numkeys keys after it; none for a bad count.
func scriptKeys(args [][]byte) [][]byte {
	n, err := strconv.Atoi(string(args[2]))
	if err != nil || n <= 0 || n > len(args)-3 {
		return nil
	}
	return args[3 : 3+n]
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
		mode := c.scriptOOM() + "eval" + c.busyMark()
		if ro {
			mode = "ro:" + mode
		}
		a := append([][]byte{[]byte(mode), body}, rest...)
		return c.scriptReports(opPlan(service.Op{Kind: "eval", Key: key, Args: a}, nil))
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
		mode := c.scriptOOM() + "fcall:" + string(args[1]) + c.busyMark()
		if ro {
			mode = "ro:" + mode
		}
		// No body: Apply finds the function in the replicated library
		// table (service/kv_function.go).
		a := append([][]byte{[]byte(mode), nil}, rest...)
		return c.scriptReports(opPlan(service.Op{Kind: "eval", Key: key, Args: a}, nil))
	}
}

// scriptOOM is service.ScriptOOM while this node is over its maxmemory
// (maxmemory.go), else "": the script then runs as Redis runs one that
// starts over maxmemory (service/kv_script.go says how).
func (c *conn) scriptOOM() string {
	if c.s == nil || !c.s.mem.over() {
		return ""
	}
	return service.ScriptOOM
}

// busyMark is the "|<instructions>" suffix of an eval operation's mode from
// this node's busy-reply-threshold, or "" when it gives none (the default:
// service/kv_script_busy.go).
func (c *conn) busyMark() string {
	if c.s == nil {
		return ""
	}
	ms, _ := strconv.ParseInt(c.s.tun.get("busy-reply-threshold"), 10, 64)
	if m := service.BusyMark(ms); m > 0 {
		return "|" + strconv.FormatInt(m, 10)
	}
	return ""
}

// Busy scripts (service/kv_script_busy.go). While a script run at this
// node's replica is past its busy mark, every command but the few Redis
// allows (allowBusy) answers BUSY, as Redis does past
// busy-reply-threshold; inside MULTI that marks the transaction, and EXEC
// answers EXECABORT with the BUSY error. SCRIPT KILL stops an EVAL run,
// FUNCTION KILL an FCALL run, when it wrote nothing; the node is then no
// longer busy. A busy script is the node's: its connections to every
// namespace see BUSY, as one Redis server's do.

// busyErr is Redis's BUSY error for the kind of the busy run.
func busyErr(r *service.RunningScript) string {
	if r.Eval {
		return "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
	}
	return "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
}

// allowBusy says whether a command runs while a script is busy (Redis 7.0's
// ALLOW_BUSY commands).
func allowBusy(name string, args [][]byte) bool {
	switch name {
	case "auth", "hello", "multi", "discard", "watch", "unwatch", "quit", "reset", "shutdown":
		return true
	case "script":
		return lower(args[1]) == "kill"
	case "function":
		return lower(args[1]) == "kill" || lower(args[1]) == "stats"
	}
	return false
}

// refuseBusy answers BUSY for a command not allowed while a script is busy
// and returns true. Busy: a run at this node's replica is past its mark, or
// a script this node sent with a mark has waited for its reply longer than
// its threshold (its run may not have reached this replica yet: the log
// orders it first, and the commands after it wait behind it anyway).
func (c *conn) refuseBusy(name string, args [][]byte) bool {
	if allowBusy(name, args) {
		return false
	}
	r := service.BusyScript()
	if r == nil {
		f, _ := c.s.scr.overdue()
		if f == nil {
			return false
		}
		r = &service.RunningScript{Eval: f.eval}
	}
	if name == "exec" && c.multi.open {
		c.multi = multiConn{}
		c.writeError("EXECABORT Transaction discarded because of: " + busyErr(r))
		return true
	}
	c.queueError()
	c.writeError(busyErr(r))
	return true
}

// killScript is SCRIPT KILL (eval) and FUNCTION KILL: it stops this node's
// busy run of that kind. A run that is not yet busy is waited for (Redis
// reads the KILL only once the script is past the threshold), up to
// killWait.
func (s *scripts) killScript(eval bool) service.Result {
	deadline := time.Now().Add(killWait)
	for {
		var busy []*service.RunningScript
		_, pending := s.overdue()
		for _, r := range service.RunningScripts() {
			if r.Busy() {
				busy = append(busy, r)
			} else {
				pending = true
			}
		}
		// Every busy run of this process: one per replica the process
		// holds (one in a deployed node; several in an in-process test).
		killed, unkillable := false, false
		for _, r := range busy {
			if r.Eval != eval {
				return errResult("%s", busyErr(r))
			}
			switch r.Kill() {
			case service.KillUnkillable:
				unkillable = true
			case service.KillDone:
				killed = true
				s.killPeers(eval, r.ID, strings.Join(r.Command, "\x00"))
			}
		}
		f := s.overdueElsewhere()
		switch {
		case unkillable:
			return errResult("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.")
		case killed:
			s.killedFlights(eval)
			return service.OK()
		case len(busy) == 0 && f != nil && f.eval != eval:
			// A script of the other kind is busy at another replica.
			return errResult("%s", busyErr(&service.RunningScript{Eval: f.eval}))
		case len(busy) == 0 && f != nil:
			// This node sent a script that is overdue and its replica
			// runs nothing: another replica executes it (pbpaxos; paxos
			// when the leader is another node: this replica runs it once
			// the leader has).
			return s.killRemote(eval, f.cmdline, time.Until(deadline))
		case !pending || time.Now().After(deadline):
			return errResult("NOTBUSY No scripts in execution right now.")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// killedFlights marks this node's scripts of the kind in flight killed: no
// longer busy.
func (s *scripts) killedFlights(eval bool) {
	s.mu.Lock()
	for f := range s.flying {
		f.killed = f.killed || f.eval == eval
	}
	s.mu.Unlock()
}

// overdueElsewhere is a script this node sent that is overdue while no
// run of this process is in progress (the run is at another node's
// replica only), or nil.
func (s *scripts) overdueElsewhere() *flight {
	if len(service.RunningScripts()) > 0 {
		return nil
	}
	f, _ := s.overdue()
	return f
}

// killRemote is SCRIPT KILL (FUNCTION KILL) for a script this node sent
// whose only runs are at other nodes' replicas (pbpaxos: the leader
// executes and the backups install its state, replay.go aside): it asks
// every node to kill its run of cmdline (psScriptKillAny) and answers
// with the first result, NOTBUSY when none comes within wait. The kill is
// safe for the reason a local one is (service/kv_script_busy.go): a busy
// run that has not written can no longer write.
func (s *scripts) killRemote(eval bool, cmdline string, wait time.Duration) service.Result {
	if s.peers == nil {
		return errResult("NOTBUSY No scripts in execution right now.")
	}
	var b [8]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	ch := make(chan string, 1)
	s.mu.Lock()
	if s.asks == nil {
		s.asks = map[string]chan string{}
	}
	s.asks[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.asks, id)
		s.mu.Unlock()
	}()
	kind := "fcall"
	if eval {
		kind = "eval"
	}
	e := wire.Encoder{}
	e.Byte(psScriptKillAny)
	e.String(kind)
	e.String(id + "|" + cmdline)
	s.peers.PublishPeers(e.B)
	select {
	case r := <-ch:
		if r == "unkillable" {
			return errResult("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.")
		}
		s.killedFlights(eval)
		return service.OK()
	case <-time.After(max(wait, 0)):
		return errResult("NOTBUSY No scripts in execution right now.")
	}
}

// killResult takes another node's answer to killRemote.
func (s *scripts) killResult(id, outcome string) {
	s.mu.Lock()
	ch := s.asks[id]
	s.mu.Unlock()
	if ch != nil {
		select {
		case ch <- outcome:
		default:
		}
	}
}

// busyRun is this process's busy run; while a script this node sent is
// overdue but its run here is not yet busy, it waits for it (up to
// killWait), since a request through the log would wait behind the run.
// When this process runs nothing while the script is overdue (another
// node's replica runs it: pbpaxos, or paxos with another leader), it is
// the run as this node knows it from the flight (remote true: name,
// command and start, without the library counts).
func (c *conn) busyRun() (r *service.RunningScript, remote bool) {
	if c.s == nil {
		return service.BusyScript(), false
	}
	for deadline := time.Now().Add(killWait); ; time.Sleep(2 * time.Millisecond) {
		if r := service.BusyScript(); r != nil {
			return r, false
		}
		if f := c.s.scr.overdueElsewhere(); f != nil {
			cmd := strings.Split(f.cmdline, "\x00")
			r := &service.RunningScript{Eval: f.eval, Command: cmd, Start: f.start, Name: "user_script"}
			if !f.eval && len(cmd) > 1 {
				r.Name = cmd[1]
			}
			return r, true
		}
		if f, _ := c.s.scr.overdue(); f == nil || time.Now().After(deadline) {
			return nil, false
		}
	}
}

// killPeers hands a kill to the other nodes (over the pub/sub peer
// transport, at most once): each ends its own replica's run of the same
// operation, named by runID, now if it is busy or at its mark if it has
// not reached it (service.EndRun). Without it the other replicas run the
// script to its budget, and the log waits behind them. The kill is safe at
// any replica for the same reason as here: a busy run that has not written
// can no longer write (service/kv_script_busy.go). A run without an ID (an
// operation without Env) is named by its command line instead, which each
// node waits for up to killWait (killLater).
func (s *scripts) killPeers(eval bool, runID, cmdline string) {
	if s.peers == nil {
		return
	}
	kind := "fcall"
	if eval {
		kind = "eval"
	}
	e := wire.Encoder{}
	e.Byte(psScriptKill)
	e.String(kind)
	e.String(runID + "|" + cmdline)
	s.peers.PublishPeers(e.B)
}

// killLater kills this process's run of cmdline when it is busy, waiting
// for it up to killWait or until a run of cmdline has ended anywhere (a
// later run of the same command must not be killed); for a kill another
// node asked for with an id (killRemote), it answers the outcome.
func (s *scripts) killLater(eval bool, cmdline, id string) {
	start := time.Now()
	for deadline := start.Add(killWait); time.Now().Before(deadline) && !service.EndedSince(cmdline, start); time.Sleep(5 * time.Millisecond) {
		for _, r := range service.RunningScripts() {
			if r.Eval != eval || strings.Join(r.Command, "\x00") != cmdline {
				continue
			}
			switch k := r.Kill(); k {
			case service.KillDone, service.KillUnkillable:
				if id != "" && s.peers != nil {
					outcome := "killed"
					if k == service.KillUnkillable {
						outcome = "unkillable"
					} else {
						// The other replicas' runs of it, if any
						// (paxos: a replica behind in the log).
						s.killPeers(eval, r.ID, strings.Join(r.Command, "\x00"))
					}
					e := wire.Encoder{}
					e.Byte(psScriptKillResult)
					e.String(id)
					e.String(outcome)
					s.peers.PublishPeers(e.B)
				}
				return
			}
		}
	}
}

// killWait bounds how long SCRIPT KILL waits for a running script to reach
// its busy mark.
const killWait = 5 * time.Second

// scriptConn is the connection a script's commands are planned on: a KV
// namespace (plans read nothing else of it).
var scriptConn = &conn{ns: config.Namespace{Name: "script", Service: "kv"}, svc: service.KV{}}

// scriptCommand maps a command called from a script onto its plan's
// operations (service.SetScriptCommands).
func scriptCommand(args [][]byte) (service.ScriptCmd, string) {
	name := lower(args[0])
	cmd, ok := commands[name]
	if !ok {
		return service.ScriptCmd{}, "ERR Unknown Redis command called from script"
	}
	sc := service.ScriptCmd{Known: true, DenyOOM: slices.Contains(cmd.flags, "denyoom")}
	if (cmd.arity > 0 && len(args) != cmd.arity) || (cmd.arity < 0 && len(args) < -cmd.arity) {
		return sc, "ERR Wrong number of args calling Redis command from script"
	}
	switch {
	case name == "ping" && len(args) <= 2:
		sc.Render = func([]service.Result) service.Result { return status("PONG") }
		if len(args) == 2 {
			sc.Render = func([]service.Result) service.Result { return service.Bytes(args[1]) }
		}
		return sc, ""
	case name == "echo" && len(args) == 2:
		sc.Render = func([]service.Result) service.Result { return service.Bytes(args[1]) }
		return sc, ""
	case name == "select":
		// SELECT changes only the script's database in Redis; Synod has
		// database 0 only. Redis's 16 databases bound "out of range".
		sc.Render = func([]service.Result) service.Result {
			n, err := strconv.Atoi(string(args[1]))
			switch {
			case err != nil:
				return errResult("ERR value is not an integer or out of range")
			case n < 0 || n >= 16:
				return errResult("ERR DB index is out of range")
			case n != 0:
				return errResult("ERR DB index is out of range: Synod has no numbered databases; choose a namespace with SYNOD NS <name>")
			}
			return service.OK()
		}
		return sc, ""
	}
	if cmd.plan == nil || (cmd.block != nil && !streamReadCmd(name)) || slices.Contains(cmd.flags, "noscript") {
		return sc, "ERR This Redis command is not allowed from script"
	}
	p := cmd.plan(scriptConn, args)
	if len(p.guards) > 0 {
		return sc, fmt.Sprintf("ERR %s is not supported from scripts by Synod", strings.ToUpper(name))
	}
	sc.Ops, sc.Render = p.ops, p.render
	return sc, ""
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
		c.writeResult(c.s.scr.killScript(true))
	case sub == "help":
		help := []string{"SCRIPT LOAD <script>: cache a script on this node, answer its SHA1 (EVALSHA runs it).",
			"SCRIPT EXISTS <sha1> [<sha1> ...]", "SCRIPT FLUSH [ASYNC|SYNC]", "SCRIPT KILL: stop this node's busy EVAL run that wrote nothing (service/kv_script_busy.go)."}
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

// planFunction is FUNCTION LOAD|LIST|DELETE|FLUSH|STATS|KILL|DUMP|RESTORE|HELP:
// the library table is replicated state (service/kv_function.go), so each
// subcommand that reads or changes it is one KV operation.
func planFunction(c *conn, args [][]byte) plan {
	sub := lower(args[1])
	switch sub {
	case "load", "delete", "flush", "list", "stats", "dump", "restore":
		if p, ok := c.kvOnly("function"); !ok {
			return p
		}
	}
	switch sub {
	case "load":
		replace := len(args) == 4 && lower(args[2]) == "replace"
		if len(args) > 3 && !replace {
			return errPlan("ERR Unknown option given: %s", args[2])
		}
		if len(args) < 3 {
			return errPlan("%s", arityErr("function|load"))
		}
		code := args[len(args)-1]
		if _, msg := service.LibraryName(code); msg != "" {
			return errPlan("%s", msg)
		}
		mode := "append"
		if replace {
			mode = "replace"
		}
		return opPlan(service.Op{Kind: "fnload", Args: [][]byte{[]byte(mode), code}}, nil)
	case "delete":
		if len(args) != 3 {
			return errPlan("%s", arityErr("function|delete"))
		}
		return opPlan(service.Op{Kind: "fndelete", Args: args[2:3]}, nil)
	case "flush":
		if len(args) > 3 {
			return errPlan("ERR unknown subcommand or wrong number of arguments for 'flush'. Try FUNCTION HELP.")
		}
		if len(args) == 3 && lower(args[2]) != "async" && lower(args[2]) != "sync" {
			return errPlan("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
		}
		return opPlan(service.Op{Kind: "fnflush"}, nil)
	case "list":
		withCode, pattern := false, []byte(nil)
		for i := 2; i < len(args); i++ {
			switch lower(args[i]) {
			case "withcode":
				if withCode {
					return errPlan("ERR Unknown argument %s", args[i])
				}
				withCode = true
			case "libraryname":
				if i+1 >= len(args) {
					return errPlan("ERR library name argument was not given")
				}
				if pattern != nil {
					return errPlan("ERR Unknown argument %s", args[i])
				}
				pattern = args[i+1]
				i++
			default:
				return errPlan("ERR Unknown argument %s", args[i])
			}
		}
		a := [][]byte{[]byte("nocode")}
		if withCode {
			a[0] = []byte("withcode")
		}
		if pattern != nil {
			a = append(a, pattern)
		}
		return opPlan(service.Op{Kind: "fnlist", Args: a}, functionList(withCode))
	case "stats":
		if r, remote := c.busyRun(); remote {
			// The run is at another node's replica and this replica
			// has not reached it: the library counts are this
			// replica's, read from its state without the log (which
			// waits behind the run).
			return plan{reply: func([]service.Result) service.Result {
				res := c.readLocal(service.Op{Kind: "fnlist", Args: [][]byte{[]byte("nocode")}})
				if res.Type != service.ResultArray {
					return res
				}
				r.Libraries = len(res.Elems)
				for _, l := range res.Elems {
					r.Functions += (len(l.Elems) - 2) / 3
				}
				return runningStats(r)
			}}
		} else if r != nil {
			// The log waits behind the busy run: answer from it.
			return constPlan(runningStats(r))
		}
		return opPlan(service.Op{Kind: "fnlist", Args: [][]byte{[]byte("nocode")}}, functionStats)
	case "dump":
		if len(args) != 2 {
			return errPlan("%s", arityErr("function|dump"))
		}
		return opPlan(service.Op{Kind: "fndump"}, nil)
	case "restore":
		if len(args) < 3 || len(args) > 4 {
			return errPlan("ERR unknown subcommand or wrong number of arguments for '%s'. Try FUNCTION HELP.", args[1])
		}
		return opPlan(service.Op{Kind: "fnrestore", Args: args[2:]}, nil)
	case "kill":
		if c.s == nil {
			return errPlan("NOTBUSY No scripts in execution right now.")
		}
		scr := &c.s.scr
		return plan{reply: func([]service.Result) service.Result { return scr.killScript(false) }}
	case "help":
		help := []string{"FUNCTION LOAD [REPLACE] <code>: load a Lua library (#!lua name=<name>); libraries are replicated and persisted.",
			"FUNCTION LIST [WITHCODE] [LIBRARYNAME <pattern>]", "FUNCTION DELETE <library>", "FUNCTION FLUSH [ASYNC|SYNC]", "FUNCTION STATS", "FUNCTION KILL",
			"FUNCTION DUMP: a payload of the libraries (Synod's format)", "FUNCTION RESTORE <payload> [FLUSH|APPEND|REPLACE]"}
		out := make([]service.Result, len(help))
		for i, h := range help {
			out[i] = status(h)
		}
		return constPlan(service.Array(out...))
	}
	return errPlan("ERR unknown subcommand '%s'. Try FUNCTION HELP.", args[1])
}

// functionList renders fnlist's result as FUNCTION LIST's maps.
func functionList(withCode bool) func(service.Result) service.Result {
	return func(r service.Result) service.Result {
		out := make([]service.Result, len(r.Elems))
		for i, l := range r.Elems {
			var fns []service.Result
			for f := l.Elems[2:]; len(f) >= 3; f = f[3:] {
				fns = append(fns, asMap(service.Array(
					service.Bytes([]byte("name")), f[0],
					service.Bytes([]byte("description")), f[1],
					service.Bytes([]byte("flags")), asSet(f[2]))))
			}
			m := []service.Result{
				service.Bytes([]byte("library_name")), l.Elems[0],
				service.Bytes([]byte("engine")), service.Bytes([]byte("LUA")),
				service.Bytes([]byte("functions")), service.Array(fns...),
			}
			if withCode {
				m = append(m, service.Bytes([]byte("library_code")), l.Elems[1])
			}
			out[i] = asMap(service.Array(m...))
		}
		return service.Array(out...)
	}
}

// readLocal runs op, a read, on this node's replica alone
// (automaton.ReadLocal: no log, no leader).
func (c *conn) readLocal(op service.Op) service.Result {
	c.mu.Lock()
	ns := c.ns
	c.mu.Unlock()
	id := automaton.RequestID{Client: c.client, Seq: c.nextSeq()}
	return c.submit(ns.Name, automaton.Request{ID: id, Op: op, Opts: c.requestOptions(automaton.ReadLocal, id), Checked: true, Unanswered: id.Seq})
}

// runningStats is FUNCTION STATS while run is busy: the running script (a
// function's; an EVAL shows none, as in Redis) and the library counts the
// run started with.
func runningStats(r *service.RunningScript) service.Result {
	running := service.Nil()
	if !r.Eval {
		cmd := make([]service.Result, len(r.Command))
		for i, a := range r.Command {
			cmd[i] = service.Bytes([]byte(a))
		}
		running = asMap(service.Array(
			service.Bytes([]byte("name")), service.Bytes([]byte(r.Name)),
			service.Bytes([]byte("command")), service.Array(cmd...),
			service.Bytes([]byte("duration_ms")), service.Int(time.Since(r.Start).Milliseconds())))
	}
	return asMap(service.Array(
		service.Bytes([]byte("running_script")), running,
		service.Bytes([]byte("engines")), asMap(service.Array(
			service.Bytes([]byte("LUA")), asMap(service.Array(
				service.Bytes([]byte("libraries_count")), service.Int(int64(r.Libraries)),
				service.Bytes([]byte("functions_count")), service.Int(int64(r.Functions))))))))
}

// functionStats renders fnlist's result as FUNCTION STATS when no script is
// busy (a script that is not runs inside Apply, and the fnlist operation
// is applied after it).
func functionStats(r service.Result) service.Result {
	nf := 0
	for _, l := range r.Elems {
		nf += (len(l.Elems) - 2) / 3
	}
	return asMap(service.Array(
		service.Bytes([]byte("running_script")), service.Nil(),
		service.Bytes([]byte("engines")), asMap(service.Array(
			service.Bytes([]byte("LUA")), asMap(service.Array(
				service.Bytes([]byte("libraries_count")), service.Int(int64(len(r.Elems))),
				service.Bytes([]byte("functions_count")), service.Int(int64(nf)))))),
	))
}

// scriptReports asks p's eval operation to report what its script ran
// (service.ScriptCalls while a MONITOR is attached to this node, else
// service.ScriptCounts), so that the commands a script runs count in this
// node's command statistics and show in its MONITOR ("lua" lines), as in
// Redis, though they run inside Apply. Not inside MULTI or an interactive
// transaction (the wrapped result would nest deeper than their replies
// may): there a script's commands are not counted or shown.
func (c *conn) scriptReports(p plan) plan {
	if c.s == nil || c.multi.open || c.txn.open || len(p.ops) != 1 {
		return p
	}
	report := service.ScriptCounts
	if c.s.mon.n.Load() > 0 {
		report = service.ScriptCalls
	}
	op := p.ops[0]
	mode := string(op.Args[0])
	ro := strings.HasPrefix(mode, "ro:")
	mode = report + strings.TrimPrefix(mode, "ro:")
	if ro {
		mode = "ro:" + mode
	}
	op.Args = append([][]byte{[]byte(mode)}, op.Args[1:]...)
	p.ops = []service.Op{op}
	counted := false
	p.reported = func(rep []service.Result) {
		for _, e := range rep {
			if len(e.Elems) == 0 {
				continue
			}
			switch string(e.Elems[0].Bytes) {
			case "c": // name, calls, rejected, failed
				if len(e.Elems) != 5 {
					continue
				}
				name := string(e.Elems[1].Bytes)
				calls, rejected, failed := e.Elems[2].Int, e.Elems[3].Int, e.Elems[4].Int
				for n := int64(0); n < calls; n++ {
					c.s.cmds.called(name, 0, n < failed)
				}
				for n := int64(0); n < rejected; n++ {
					c.s.cmds.rejected(name)
				}
			case "e": // the error codes, counted as replies are
				for _, code := range e.Elems[1:] {
					c.s.errs.addCode(string(code.Bytes))
				}
			case "m": // a command executed, for MONITOR
				args := make([][]byte, len(e.Elems)-1)
				for i, a := range e.Elems[1:] {
					args[i] = a.Bytes
				}
				if len(args) > 0 {
					c.feedMonitorsFrom("lua", strings.ToLower(string(args[0])), args)
				}
			case "x":
				counted = true
			case "i": // this replica's run of it, if any, need not be busy
				if len(e.Elems) == 2 {
					service.RunAnswered(string(e.Elems[1].Bytes))
				}
			}
		}
	}
	reply := p.reply
	p.reply = func(rs []service.Result) service.Result {
		r := rs[0]
		if reply != nil {
			r = reply(rs)
		}
		if counted && r.Type == service.ResultErr {
			// Counted where the command failed (Redis counts it once).
			r.Err = countedErr + r.Err
		}
		return r
	}
	return p
}
