package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Command mapping.
//
// In a namespace whose service is "kv" every supported Redis command is a
// plan (plan.go): its arguments are parsed into the KV operations named by
// the service's spec (service/kv_doc.go) and a function rendering their
// results as Redis's reply. One file per family: strings.go (GET, SET with
// NX/XX/GET/EX/PX/EXAT/PXAT/KEEPTTL, SETNX, SETEX, PSETEX, GETSET, GETDEL,
// GETEX, APPEND, INCR/DECR/INCRBY/DECRBY, INCRBYFLOAT, STRLEN, GETRANGE,
// SETRANGE, MGET, MSET, MSETNX), keys.go (DEL, UNLINK, EXISTS, TYPE,
// RENAME, RENAMENX, KEYS, SCAN, DBSIZE, RANDOMKEY, FLUSHDB, FLUSHALL),
// expiry.go, hash.go, list.go, set.go, zset.go; multi.go holds MULTI,
// EXEC, DISCARD, WATCH and UNWATCH. COMMAND INFO gives each command's
// arity, flags and key positions; any command not in the table answers
// Redis's unknown-command error word for word.
//
// Multi-key commands outside MULTI (DEL, EXISTS, UNLINK, MGET, MSET) are
// one atomic group where the namespace's protocol applies groups, as in
// Redis; elsewhere one request per key, as in a Redis cluster: not atomic
// across keys. MSETNX needs a group and is refused elsewhere. Inside MULTI
// every command's operations join EXEC's one atomic group (an MSETNX only
// before any other operation of the transaction: multi.go, execGroup).
// On a register
// protocol (ABD, blocking: get, set, del, exists only) any other operation
// is refused before it is sent, with an error naming the namespaces of
// this node and the registered protocols that can run it, and how to reach
// them (SYNOD NS <name>, or a namespace in the cluster file).
//
// In a namespace whose service is "counter" (one integer, the ESDS thesis chapter
// 4.4) the key is ignored: GET maps to read (the value is replied as a
// bulk string, like GET of a number in Redis) and INCR, INCRBY, DECR,
// DECRBY map to add. Any service's operation can be sent directly with
// SYNOD OP kind [key [arg ...]].
//
// Synod's own commands:
//
//	SYNOD NS [name]                            show or select the connection's namespace
//	SYNOD READ [linearizable|log|quorum|lease|regular|local]  show or select the read consistency
//	SYNOD NAMESPACES                           list namespaces as [name, protocol, service]
//	SYNOD OP kind [key [arg ...]]                run one service operation
//	SYNOD OPT/OPTRESET/LASTOPT                 protocol request options (options.go)
//	SYNOD BEGIN/COMMIT/ABORT/TXN               interactive transactions (txn.go)
//	SYNOD HELP                                 these, and every Redis command served
//	SUBSCRIBE synod:leader:<ns>                fail-over notifications (subscribe.go)
//
// Every operation is validated once, when its command is planned (plan.go,
// check: the namespace's Service.Validate, whose table of operations,
// arities and value checks is the one the gRPC server checks too), before
// it reaches the Backend, so bad input never enters a replicated log; the
// Backend does not check again (Backend.Do).

type handler func(c *conn, args [][]byte)

type command struct {
	name  string
	arity int // Redis convention: n means exactly n, -n means at least n (name included)
	flags []string
	// first, last, step locate key arguments, for COMMAND INFO.
	first, last, step int
	noAuth            bool // allowed before authentication
	fn                handler
	plan              planFunc // a data command (plan.go); fn is then unused
	block             handler  // a blocking command's form outside MULTI (blocking.go)
	group             string   // Redis's command group (COMMAND DOCS)
	// getkeys finds the keys of a command whose keys move (SORT's STORE),
	// for COMMAND GETKEYS (getkeys.go); nil: first, last, step.
	getkeys func(args [][]byte) [][]byte
}

var commands = map[string]*command{}

func init() {
	for _, c := range []*command{
		{name: "ping", arity: -1, flags: []string{"fast", "stale"}, fn: cmdPing},
		{name: "echo", arity: 2, flags: []string{"fast"}, fn: cmdEcho},
		{name: "info", arity: -1, flags: []string{"loading", "stale"}, fn: cmdInfo},
		{name: "command", arity: -1, flags: []string{"loading", "stale"}, fn: cmdCommand},
		{name: "client", arity: -2, flags: []string{"loading", "stale"}, fn: cmdClient},
		{name: "hello", arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, noAuth: true, fn: cmdHello},
		{name: "auth", arity: -2, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, noAuth: true, fn: cmdAuth},
		{name: "quit", arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, noAuth: true, fn: cmdQuit},
		{name: "select", arity: 2, flags: []string{"loading", "stale", "fast"}, fn: cmdSelect},
		{name: "config", arity: -2, flags: []string{"admin", "loading", "stale"}, fn: cmdConfig},
		{name: "synod", arity: -2, flags: []string{"loading", "stale"}, fn: cmdSynod},
	} {
		commands[c.name] = c
	}
}

// lookupCommand is the command named name, whatever its case (ASCII
// letters, as Redis compares command names), found without allocating:
// the name is lowered into a buffer on the stack for short names.
func lookupCommand(name []byte) (*command, bool) {
	var buf [32]byte
	b := buf[:0]
	if len(name) > len(buf) {
		b = make([]byte, 0, len(name))
	}
	for _, ch := range name {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		b = append(b, ch)
	}
	cmd, ok := commands[string(b)]
	return cmd, ok
}

// cmdCache is a connection's last command name as its client spelled it
// and the command it names: a pipeline repeats one name (SET SET SET ...),
// and comparing the name's bytes costs less than lowering it and hashing
// it into commands (lookupCommand) for every command of a batch. The
// table does not change after init, so a cached entry never goes stale.
// Only the goroutine or event loop serving the connection uses it.
type cmdCache struct {
	n    int
	name [16]byte
	cmd  *command
}

// lookup is lookupCommand(name), through the cache.
func (k *cmdCache) lookup(name []byte) (*command, bool) {
	if k.cmd != nil && len(name) == k.n && string(name) == string(k.name[:k.n]) {
		return k.cmd, true
	}
	cmd, ok := lookupCommand(name)
	if ok && len(name) <= len(k.name) {
		k.n = copy(k.name[:], name)
		k.cmd = cmd
	}
	return cmd, ok
}

// exec runs one command and writes its reply.
func (c *conn) exec(args [][]byte) {
	may := c.as.may // replyfn.go: this top-level command only
	c.as.may = false
	cmd, ok := lookupCommand(args[0])
	if !ok {
		var b strings.Builder
		for i := 1; i < len(args) && b.Len() < 128; i++ {
			a := args[i]
			if len(a) > 128-b.Len() {
				a = a[:128-b.Len()]
			}
			fmt.Fprintf(&b, "'%s' ", a)
		}
		n := args[0]
		if len(n) > 128 {
			n = n[:128]
		}
		c.writeError(fmt.Sprintf("ERR unknown command '%s', with args beginning with: %s", n, b.String()))
		c.queueError()
		return
	}
	name := cmd.name
	if (cmd.arity > 0 && len(args) != cmd.arity) || (cmd.arity < 0 && len(args) < -cmd.arity) {
		c.writeError(fmt.Sprintf("ERR wrong number of arguments for '%s' command", name))
		c.queueError()
		c.s.cmds.rejected(name)
		return
	}
	start, errs := time.Now(), c.errReplies
	defer func() {
		if !c.as.submitted && c.as.detour == nil { // else replied, or the detour (evloop.go), counts it
			c.s.cmds.called(name, time.Since(start), c.errReplies > errs)
		}
	}()
	if !c.authed && !cmd.noAuth {
		c.writeError(synoderr.New(synoderr.NoAuth, "Authentication required.").Error())
		return
	}
	c.feedMonitors(name, args) // monitor.go: after the login check, so a refused command is not shown
	if c.refuseSubscribed(name) {
		return
	}
	c.mu.Lock()
	c.lastCmd = name
	c.noteCommand(name, args)
	ns := c.ns.Name
	c.mu.Unlock()
	c.s.acc.note(ns, cmd, args) // access.go; inside MULTI when queued
	if c.redirect(cmd, args) {  // cluster.go
		return
	}
	if c.refuseBusy(name, args) { // script.go
		return
	}
	if c.refuseOOM(cmd) { // maxmemory.go
		return
	}
	if c.inMulti(cmd, args) {
		return
	}
	if !c.optBegin(cmd, args) {
		return
	}
	if cmd.block != nil {
		cmd.block(c, args)
		return
	}
	if cmd.plan != nil {
		if may {
			c.replyAsync(name, c.planOf(cmd, args), start, errs) // replyfn.go
			return
		}
		c.runPlan(name, c.planOf(cmd, args))
		return
	}
	cmd.fn(c, args)
}

func arityErr(name string) string {
	return fmt.Sprintf("ERR wrong number of arguments for '%s' command", name)
}

// --- running operations ---------------------------------------------------

// errResult builds an error result whose text already carries its code.
func errResult(f string, a ...any) service.Result {
	return service.Result{Type: service.ResultErr, Err: fmt.Sprintf(f, a...)}
}

// withCode is msg in its Redis form (synoderr.Text: a leading upper-case
// code kept, else "ERR " prefixed), or a script's status reply unchanged.
func withCode(msg string) string {
	if strings.HasPrefix(msg, service.StatusPrefix) {
		return msg // a script's status reply (script.go)
	}
	return synoderr.Text(msg)
}

// nextSeq returns the next request sequence number of this connection.
func (c *conn) nextSeq() uint64 {
	c.seq++
	return c.seq
}

// run submits op, already validated (a plan's operations are, in check;
// the few operations the gateway builds itself are valid by construction),
// on the connection's namespace: the request is Checked, so the protocol
// does not validate it again. Every failure comes back as an error Result with its Redis
// error code.
func (c *conn) run(op service.Op, seq uint64) service.Result {
	return c.runID(op, automaton.RequestID{Client: c.client, Seq: seq})
}

// runID is run with the request id id.
func (c *conn) runID(op service.Op, id automaton.RequestID) service.Result {
	c.mu.Lock()
	ns, svc, read := c.ns, c.svc, c.read
	c.mu.Unlock()
	if svc == nil {
		return errResult("ERR this node serves no namespace")
	}
	if id.Client == c.client { // a lane's is noted where it is taken
		c.noteOwn(svc, op, nil) // sessions.go
	}
	return c.submit(ns.Name, automaton.Request{ID: id, Op: op, Opts: c.requestOptions(read, id), Txn: c.txnStep(), Checked: true, Unanswered: id.Seq})
}

// submit hands req to the Backend and returns its result, every failure as
// an error Result with its Redis error code.
func (c *conn) submit(ns string, req automaton.Request) service.Result {
	res, _ := c.submitGroup(ns, req)
	return res
}

// submitGroup hands req to the Backend and returns its result and, for an
// atomic group that was applied, the result of each operation. Every
// failure comes back as an error Result with its Redis error code.
func (c *conn) submitGroup(ns string, req automaton.Request) (service.Result, []service.Result) {
	if msg := c.permit(ns, req); msg != "" {
		return errResult("%s", msg), nil
	}
	timeout := c.s.opts.RequestTimeout
	ctx, end := c.dl.acquire(c.s, c.clusterCtx(c.s.ctx), timeout) // deadline.go; cluster.go
	defer end()
	c.orderWrite(req.Op, req.Ops)                    // arrived ordered commands first (order.go)
	release := c.s.blk.writeGate(c, req.Op, req.Ops) // no write to a waited key during a round (blocking.go)
	res, err := c.s.b.Do(ctx, ns, req)
	release()
	return c.answered(req, res, err)
}

// answered turns the Backend's answer to req (a response, or Do's error)
// into its result and, for an atomic group, the result of each operation,
// every failure as an error Result with its Redis error code; it wakes the
// clients blocked on what a successful request wrote.
func (c *conn) answered(req automaton.Request, res automaton.Response, err error) (service.Result, []service.Result) {
	if err == nil && res.Result.Type != service.ResultErr {
		c.s.blk.touched(c, req.Op, req.Ops) // wake blocked clients (blocking.go)
	}
	if err != nil {
		switch {
		case errors.Is(err, ErrShuttingDown) || (errors.Is(err, context.Canceled) && c.s.ctx.Err() != nil):
			return service.Fail(synoderr.TryAgain, "node is shutting down; the outcome of request %v is unknown", req.ID), nil
		case errors.Is(err, context.DeadlineExceeded):
			return service.Fail(synoderr.TryAgain, "request %v timed out after %v; its outcome is unknown (a write may or may not have taken effect)", req.ID, c.s.opts.RequestTimeout), nil
		}
		return service.Fail(synoderr.Internal, "%v", err), nil
	}
	if res.Result.Type == service.ResultErr {
		res.Result.Err = withCode(res.Result.Err)
	}
	return res.Result, res.Results
}

// runOrdered runs a batch's independent operations (validated by their
// plans, as runID's) as one ordered hand-off (BatchBackend.DoBatch), each
// on a lane of its own (as runAll's), and
// returns their results in order: same-key operations take effect in
// command order where the protocol orders key runs (pipeline.go).
func (c *conn) runOrdered(bb BatchBackend, ops []service.Op) []service.Result {
	c.mu.Lock()
	ns, svc, read := c.ns, c.svc, c.read
	c.mu.Unlock()
	out := make([]service.Result, len(ops))
	for len(c.lanes) < len(ops) {
		c.lanes = append(c.lanes, &lane{client: randomClientID()})
	}
	reqs := make([]automaton.Request, 0, len(ops))
	idx := make([]int, 0, len(ops))
	for i, op := range ops {
		if svc == nil {
			out[i] = errResult("ERR this node serves no namespace")
			continue
		}
		id := c.laneID(c.lanes[i], i == len(ops)-1)
		c.lanes[i].note(svc, op, nil) // sessions.go
		req := automaton.Request{ID: id, Op: op, Opts: c.requestOptions(read, id), Checked: true, Unanswered: id.Seq}
		if msg := c.permit(ns.Name, req); msg != "" {
			out[i] = errResult("%s", msg)
			continue
		}
		reqs = append(reqs, req)
		idx = append(idx, i)
	}
	if len(reqs) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(c.s.ctx, c.s.opts.RequestTimeout)
	defer cancel()
	all := make([]service.Op, len(reqs))
	for i, r := range reqs {
		all[i] = r.Op
	}
	c.orderWrite(service.Op{}, all)                    // arrived ordered commands first (order.go)
	release := c.s.blk.writeGate(c, service.Op{}, all) // one gate for the batch (blocking.go)
	resps, errs := bb.DoBatch(ctx, ns.Name, reqs)
	release()
	for k, req := range reqs {
		out[idx[k]], _ = c.answered(req, resps[k], errs[k])
	}
	return out
}

// runAll runs independent operations concurrently (at most 32 at a time) and
// returns their results in order. Inside a transaction (txn.go) they run one
// after the other, in order.
func (c *conn) runAll(ops []service.Op) []service.Result {
	out := make([]service.Result, len(ops))
	if len(ops) == 1 || c.txn.open {
		for i, op := range ops {
			out[i] = c.run(op, c.nextSeq())
		}
		return out
	}
	// Each request in flight has a lane (a client id) of its own: a
	// protocol that keeps one deduplication entry per client sees every
	// client id's requests one at a time, in sequence order.
	n := min(len(ops), maxLanes)
	for len(c.lanes) < n {
		c.lanes = append(c.lanes, &lane{client: randomClientID()})
	}
	free := make(chan *lane, n)
	for _, l := range c.lanes[:n] {
		free <- l
	}
	var wg sync.WaitGroup
	for i, op := range ops {
		l := <-free
		id := c.laneID(l, i == len(ops)-1)
		l.note(c.svc, op, nil) // sessions.go
		wg.Add(1)
		go func() {
			defer func() { free <- l; wg.Done() }()
			out[i] = c.runID(op, id)
		}()
	}
	wg.Wait()
	return out
}

// laneID returns lane l's next request id; last: it is the last request
// of the command or batch, whose id LASTID and LASTOPT name (options.go).
func (c *conn) laneID(l *lane, last bool) automaton.RequestID {
	l.seq++
	id := automaton.RequestID{Client: l.client, Seq: l.seq}
	if last {
		c.mu.Lock()
		c.opts.lastLane = id
		c.mu.Unlock()
	}
	return id
}

// maxLanes bounds a multi-key command's requests in flight at once.
const maxLanes = 32

// A lane is a client id of a connection besides its own, for one of a
// multi-key command's concurrent requests (runAll). Every RequestID
// (client, seq) the gateway sends has at most one request in flight per
// client id, with seq increasing by one per request: the contract's
// client (automaton.RequestID), which protocols deduplicating by the last
// seq per client (pbpaxos, eve, orca-bcast, orca-primary) rely on. A
// connection keeps its lanes, so it uses at most maxLanes+1 client ids.
type lane struct {
	client, seq uint64
	wrote       bool // sent a request that may write (sessions.go)
}

func (c *conn) writeResult(r service.Result) {
	switch r.Type {
	case service.ResultNil:
		if r.Err == shapeNullArray {
			c.w.WriteNullArray()
		} else {
			c.w.WriteNull()
		}
	case service.ResultOK:
		if len(r.Bytes) > 0 {
			c.w.WriteSimple(string(r.Bytes)) // a status reply (plan.go)
		} else {
			c.w.WriteSimple("OK")
		}
	case service.ResultBytes:
		if r.Err == shapeDouble {
			c.w.WriteDouble(r.Bytes)
		} else {
			c.w.WriteBulk(r.Bytes)
		}
	case service.ResultInt:
		c.w.WriteInt(r.Int)
	case service.ResultErr:
		if st, ok := strings.CutPrefix(r.Err, service.StatusPrefix); ok {
			c.w.WriteSimple(st) // a script's status reply (script.go)
			return
		}
		if msg, ok := strings.CutPrefix(r.Err, countedErr); ok {
			c.writeCountedError(withCode(msg))
			return
		}
		c.writeError(withCode(r.Err))
	case service.ResultArray:
		switch r.Err {
		case shapePairs:
			c.writePairs(r.Elems, true)
			return
		case shapeFields:
			c.writePairs(r.Elems, false)
			return
		case shapeMap:
			c.w.WriteMap(len(r.Elems) / 2)
		case shapeSet:
			c.w.WriteSet(len(r.Elems))
		default:
			c.w.WriteArray(len(r.Elems))
		}
		for _, e := range r.Elems {
			c.writeResult(e)
		}
	default:
		c.writeError(fmt.Sprintf("ERR internal error: result type %d", r.Type))
	}
}

// writePairs writes member, score pairs (ZRANGE WITHSCORES): a flat array
// of bulk strings in RESP2, an array of [member, double] in RESP3, as Redis.
func (c *conn) writePairs(elems []service.Result, scores bool) {
	if c.w.Protocol() != 3 {
		c.w.WriteArray(len(elems))
		for _, e := range elems {
			c.writeResult(e)
		}
		return
	}
	c.w.WriteArray(len(elems) / 2)
	for i := 0; i+1 < len(elems); i += 2 {
		c.w.WriteArray(2)
		c.writeResult(elems[i])
		if scores {
			c.writeResult(shaped(elems[i+1], shapeDouble))
		} else {
			c.writeResult(elems[i+1])
		}
	}
}

// --- connection commands ---------------------------------------------------------

func cmdPing(c *conn, args [][]byte) {
	if c.pingSubscribed(args) {
		return
	}
	switch len(args) {
	case 1:
		c.w.WriteSimple("PONG")
	case 2:
		c.w.WriteBulk(args[1])
	default:
		c.writeError(arityErr("ping"))
	}
}

func cmdEcho(c *conn, args [][]byte) { c.w.WriteBulk(args[1]) }

func cmdQuit(c *conn, args [][]byte) {
	c.w.WriteSimple("OK")
	c.quit = true
}

func cmdSelect(c *conn, args [][]byte) {
	n, err := strconv.Atoi(string(args[1]))
	switch {
	case err != nil:
		c.writeError("ERR value is not an integer or out of range")
	case n != 0:
		c.writeError("ERR DB index is out of range: Synod has no numbered databases; choose a namespace with SYNOD NS <name>")
	default:
		c.w.WriteSimple("OK")
	}
}

func cmdAuth(c *conn, args [][]byte) {
	if len(args) > 3 {
		c.writeError("ERR syntax error")
		return
	}
	var msg string
	if len(args) == 3 {
		msg = c.login(string(args[1]), string(args[2]))
	} else {
		msg = c.authenticate("default", string(args[1]))
	}
	if msg != "" {
		c.writeError(msg)
		return
	}
	c.w.WriteSimple("OK")
}

// login is AUTH user pass (and HELLO's AUTH option). Without any password
// or user configured, the default user is Redis's "nopass" user: any
// password logs it in, and every other user name is WRONGPASS, as Redis 7
// answers (the one-argument AUTH is refused with its own error,
// authenticate).
func (c *conn) login(user, pass string) string {
	if c.s.opts.Password == "" && len(c.s.opts.Users) == 0 {
		if user != "default" {
			return wrongPass
		}
		c.authed, c.user = true, nil
		return ""
	}
	return c.authenticate(user, pass)
}

func cmdHello(c *conn, args [][]byte) {
	proto := c.w.Protocol()
	if len(args) >= 2 {
		v, err := strconv.Atoi(string(args[1]))
		if err != nil {
			c.writeError("ERR Protocol version is not an integer or out of range")
			return
		}
		if v != 2 && v != 3 {
			c.writeError("NOPROTO unsupported protocol version")
			return
		}
		proto = v
	}
	var user, pass, name string
	hasAuth, hasName := false, false
	for i := 2; i < len(args); i++ {
		opt := strings.ToUpper(string(args[i]))
		switch {
		case opt == "AUTH" && i+2 < len(args):
			user, pass, hasAuth = string(args[i+1]), string(args[i+2]), true
			i += 2
		case opt == "SETNAME" && i+1 < len(args):
			name, hasName = string(args[i+1]), true
			i++
		default:
			c.writeError(fmt.Sprintf("ERR Syntax error in HELLO option '%s'", args[i]))
			return
		}
	}
	if hasAuth {
		if msg := c.login(user, pass); msg != "" {
			c.writeError(msg)
			return
		}
	}
	if !c.authed {
		c.writeError("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	if hasName {
		if msg := badClientName(name); msg != "" {
			c.writeError(msg)
			return
		}
		c.mu.Lock()
		c.name = name
		c.mu.Unlock()
	}
	c.w.SetProtocol(proto)
	c.w.WriteMap(7)
	c.w.WriteBulkString("server")
	c.w.WriteBulkString("synod")
	c.w.WriteBulkString("version")
	c.w.WriteBulkString(redisVersion)
	c.w.WriteBulkString("proto")
	c.w.WriteInt(int64(proto))
	c.w.WriteBulkString("id")
	c.w.WriteInt(c.id)
	c.w.WriteBulkString("mode")
	c.w.WriteBulkString("standalone")
	c.w.WriteBulkString("role")
	c.w.WriteBulkString("master")
	c.w.WriteBulkString("modules")
	c.w.WriteArray(0)
}

// redisVersion is the Redis version Synod reports, for clients that gate
// features (HELLO, CLIENT SETINFO) on it.
const redisVersion = "7.0.0"

func badClientName(name string) string {
	for i := 0; i < len(name); i++ {
		if name[i] < '!' || name[i] > '~' {
			return "ERR Client names cannot contain spaces, newlines or special characters."
		}
	}
	return ""
}

func cmdClient(c *conn, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	if sub == "unblock" {
		cmdClientUnblock(c, args)
		return
	}
	if sub == "reply" {
		cmdClientReply(c, args) // replymode.go
		return
	}
	if sub == "kill" {
		cmdClientKill(c, args) // clientkill.go
		return
	}
	if sub == "help" && len(args) == 2 {
		c.writeHelp("client", "ID", "INFO", "LIST [TYPE normal|master|replica|pubsub] [ID <id> [<id> ...]]", "GETNAME", "SETNAME <name>",
			"SETINFO LIB-NAME|LIB-VER <value>", "KILL <ip:port> | <filter> <value> [<filter> <value> ...]", "REPLY ON|OFF|SKIP",
			"UNBLOCK <clientid> [TIMEOUT|ERROR]")
		return
	}
	want := map[string]int{"id": 2, "getname": 2, "info": 2, "list": 2, "setname": 3, "setinfo": 4}
	n, ok := want[sub]
	if !ok {
		c.writeError(fmt.Sprintf("ERR unknown subcommand '%s'. Try CLIENT HELP.", args[1]))
		return
	}
	if len(args) != n && !(sub == "list" && len(args) > n) {
		c.writeError(arityErr("client|" + sub))
		return
	}
	switch sub {
	case "id":
		c.w.WriteInt(c.id)
	case "getname":
		c.mu.Lock()
		name := c.name
		c.mu.Unlock()
		if name == "" {
			c.w.WriteNull()
		} else {
			c.w.WriteBulkString(name)
		}
	case "setname":
		name := string(args[2])
		if msg := badClientName(name); msg != "" {
			c.writeError(msg)
			return
		}
		c.mu.Lock()
		c.name = name
		c.mu.Unlock()
		c.w.WriteSimple("OK")
	case "setinfo":
		val := string(args[3])
		switch strings.ToLower(string(args[2])) {
		case "lib-name":
			if msg := badClientName(val); msg != "" {
				c.writeError(msg)
				return
			}
			c.mu.Lock()
			c.libName = val
			c.mu.Unlock()
		case "lib-ver":
			c.mu.Lock()
			c.libVer = val
			c.mu.Unlock()
		default:
			c.writeError(fmt.Sprintf("ERR Unrecognized option '%s'", args[2]))
			return
		}
		c.w.WriteSimple("OK")
	case "info":
		c.w.WriteBulkString(c.infoLine(c.w.Protocol(), true) + "\n")
	case "list":
		all, msg := c.clientListFilter(args[2:])
		if msg != "" {
			c.writeError(msg)
			return
		}
		var b strings.Builder
		for _, o := range all {
			proto := 0 // another connection's writer is not ours to read
			if o == c {
				proto = c.w.Protocol()
			}
			b.WriteString(o.infoLine(proto, o == c))
			b.WriteString("\n")
		}
		c.w.WriteBulkString(b.String())
	}
}

func cmdConfig(c *conn, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	switch sub {
	case "get":
		if len(args) < 3 {
			c.writeError(arityErr("config|get"))
			return
		}
		params := c.configParams()
		names := make([]string, 0, len(params))
		for k := range params {
			names = append(names, k)
		}
		sort.Strings(names)
		var match []string
		for _, k := range names {
			for _, p := range args[2:] {
				if ok, _ := path.Match(strings.ToLower(string(p)), k); ok {
					match = append(match, k)
					break
				}
			}
		}
		for _, p := range args[2:] { // hidden: named exactly (maxmemory.go)
			if v, ok := hiddenParams[strings.ToLower(string(p))]; ok && !slices.Contains(match, strings.ToLower(string(p))) {
				match = append(match, strings.ToLower(string(p)))
				params[strings.ToLower(string(p))] = v
			}
		}
		c.w.WriteMap(len(match))
		for _, k := range match {
			c.w.WriteBulkString(k)
			c.w.WriteBulkString(params[k])
		}
	case "set":
		cmdConfigSet(c, args)
	case "resetstat":
		if len(args) != 2 {
			c.writeError(arityErr("config|resetstat"))
			return
		}
		c.s.resetStats()
		c.w.WriteSimple("OK")
	case "help":
		c.writeHelp("config", "GET <pattern> [<pattern> ...]", "SET <directive> <value> [<directive> <value> ...]", "RESETSTAT", "REWRITE")
	case "rewrite":
		// Redis's answer when it started without a config file: a Synod
		// node's configuration is its cluster file, which CONFIG SET's
		// node-local settings do not change.
		c.writeError("ERR The server is running without a config file")
	default:
		c.writeError(fmt.Sprintf("ERR unknown subcommand '%s'. Try CONFIG HELP.", args[1]))
	}
}

// --- INFO ---------------------------------------------------------------------------

type infoSection struct {
	name   string
	fields map[string]string
}

func cmdInfo(c *conn, args [][]byte) {
	c.mu.Lock()
	nsName, read := c.ns.Name, c.read
	c.mu.Unlock()
	s := c.s
	s.mu.Lock()
	nconn := len(s.conns)
	s.mu.Unlock()
	_, port, _ := net.SplitHostPort(c.nc.LocalAddr().String())
	nss := s.b.Namespaces()
	names := make([]string, len(nss))
	synod := map[string]string{}
	for i, ns := range nss {
		names[i] = ns.Name
		synod["ns_"+ns.Name] = fmt.Sprintf("protocol=%s,service=%s", ns.Protocol, ns.Service)
	}
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	everything := want["all"] || want["everything"]
	all := len(want) == 0 || everything || want["default"]
	keyspace := map[string]string{}
	if all || want["keyspace"] {
		keyspace = c.keyspaceInfo()
	}
	errstats, errTotal := s.errorInfo()
	def := ""
	if len(names) > 0 {
		def = names[0]
	}
	sections := []infoSection{
		{"Server", map[string]string{
			"redis_version":     redisVersion,
			"redis_mode":        "standalone",
			"synod_server":      "synod",
			"os":                runtime.GOOS,
			"arch_bits":         strconv.Itoa(strconv.IntSize),
			"go_version":        runtime.Version(),
			"process_id":        strconv.Itoa(os.Getpid()),
			"run_id":            s.runID,
			"tcp_port":          port,
			"uptime_in_seconds": strconv.Itoa(int(time.Since(s.start).Seconds())),
		}},
		{"Clients", map[string]string{
			"connected_clients":          strconv.Itoa(nconn),
			"blocked_clients":            strconv.FormatInt(s.blk.blocked.Load(), 10),
			"maxclients":                 strconv.FormatInt(s.lim.maxClients.Load(), 10),
			"total_connections_received": strconv.FormatInt(s.totalConns.Load()-s.statBase.conns.Load(), 10),
			"rejected_connections":       strconv.FormatInt(s.rejected.Load()-s.statBase.rejected.Load(), 10),
			"client_output_limit_closed": strconv.FormatInt(s.ov.outputClosed.Load(), 10),
			"client_backpressure_pauses": strconv.FormatInt(s.ov.backpressure.Load(), 10),
			"open_connections_all_ports": strconv.FormatInt(s.ov.clients.Load(), 10),
		}},
		{"Stats", map[string]string{
			"total_commands_processed":   strconv.FormatInt(s.totalCommands.Load()-s.statBase.commands.Load(), 10),
			"total_connections_received": strconv.FormatInt(s.totalConns.Load()-s.statBase.conns.Load(), 10),
			"rejected_connections":       strconv.FormatInt(s.rejected.Load()-s.statBase.rejected.Load(), 10),
			"total_error_replies":        errTotal,
			"migrate_cached_sockets":     "0", // no MIGRATE: no cached sockets
		}},
		{"Errorstats", errstats},
		{"Keyspace", keyspace},
		{"Synod", map[string]string{
			"namespaces":               strings.Join(names, ","),
			"default_namespace":        def,
			"client_namespace":         nsName,
			"client_read_mode":         read.String(),
			"total_commands_processed": strconv.FormatInt(s.totalCommands.Load()-s.statBase.commands.Load(), 10),
			"request_timeout_ms":       strconv.FormatInt(s.opts.RequestTimeout.Milliseconds(), 10),
		}},
	}
	// Redis's order: Server, Clients, Memory, Stats, Replication, CPU,
	// Commandstats, Errorstats, Cluster, Keyspace; then Synod's.
	std := standardSections() // CPU, Memory, Replication, Cluster
	if c.sharded() {
		std[3].fields["cluster_enabled"] = "1" // the Redis Cluster protocol (cluster.go)
	}
	std[1].fields["number_of_cached_scripts"] = strconv.Itoa(s.scr.count()) // this node's script cache
	var ordered []infoSection
	for _, sec := range sections {
		ordered = append(ordered, sec)
		switch sec.name {
		case "Clients":
			ordered = append(ordered, std[1])
		case "Stats":
			ordered = append(ordered, std[2], std[0], infoSection{"Commandstats", s.cmds.info()})
		case "Errorstats":
			ordered = append(ordered, std[3])
		}
	}
	sections = ordered
	for _, sec := range sections {
		if sec.name == "Synod" {
			for k, v := range synod {
				sec.fields[k] = v
			}
		}
	}
	// Backend sections: merged into ours when the name matches, else appended.
	extra := s.b.Info()
	enames := make([]string, 0, len(extra))
	for n := range extra {
		enames = append(enames, n)
	}
	sort.Strings(enames)
	for _, n := range enames {
		merged := false
		for _, sec := range sections {
			if strings.EqualFold(sec.name, n) {
				for k, v := range extra[n] {
					if _, dup := sec.fields[k]; !dup {
						sec.fields[k] = v
					}
				}
				merged = true
			}
		}
		if !merged && n != "" {
			fields := make(map[string]string, len(extra[n]))
			for k, v := range extra[n] {
				fields[k] = v
			}
			sections = append(sections, infoSection{strings.ToUpper(n[:1]) + n[1:], fields})
		}
	}
	var b strings.Builder
	for _, sec := range sections {
		name := strings.ToLower(sec.name)
		if !want[name] && !everything && (!all || name == "commandstats") {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		fmt.Fprintf(&b, "# %s\r\n", sec.name)
		keys := make([]string, 0, len(sec.fields))
		for k := range sec.fields {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%s:%s\r\n", k, sec.fields[k])
		}
	}
	c.w.WriteBulkString(b.String())
}

// keyspaceInfo is INFO's Keyspace section in Redis's format: db0 is the
// connection's namespace (what SELECT 0 names), "db0:keys=N,expires=N,
// avg_ttl=MS", omitted when it holds no key, as Redis omits empty
// databases. Other namespaces are listed in the Synod section (ns_<name>);
// a namespace whose service has no dbinfo operation shows no db line.
func (c *conn) keyspaceInfo() map[string]string {
	out := map[string]string{}
	if _, svc := c.serviceName(); svc != "kv" {
		return out
	}
	r := c.run(service.Op{Kind: "dbinfo"}, c.nextSeq())
	if r.Type != service.ResultArray || len(r.Elems) != 3 || r.Elems[0].Int == 0 {
		return out
	}
	out["db0"] = fmt.Sprintf("keys=%d,expires=%d,avg_ttl=%d", r.Elems[0].Int, r.Elems[1].Int, r.Elems[2].Int)
	return out
}

// --- COMMAND ----------------------------------------------------------------------

func (c *conn) writeCommandInfo(cmd *command) {
	c.w.WriteArray(10)
	c.w.WriteBulkString(cmd.name)
	c.w.WriteInt(int64(cmd.arity))
	c.w.WriteSet(len(cmd.flags))
	for _, f := range cmd.flags {
		c.w.WriteSimple(f)
	}
	c.w.WriteInt(int64(cmd.first))
	c.w.WriteInt(int64(cmd.last))
	c.w.WriteInt(int64(cmd.step))
	cats := redisCategories[cmd.name] // Redis 7.0.15's (redis_cmdtable.go)
	c.w.WriteSet(len(cats))
	for _, cat := range cats {
		c.w.WriteSimple("@" + cat)
	}
	tips := redisTips[cmd.name]
	if keyspaceWide[cmd.name] && c.sharded() {
		tips = shardedKeyspaceTips(tips)
	}
	c.w.WriteSet(len(tips))
	for _, t := range tips {
		c.w.WriteBulkString(t)
	}
	c.writeKeySpecs(redisKeySpecs[cmd.name]) // getkeys.go
	c.w.WriteArray(0)                        // subcommands: COMMAND LIST names the served ones
}

func sortedCommands() []*command {
	out := make([]*command, 0, len(commands))
	for _, cmd := range commands {
		out = append(out, cmd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func cmdCommand(c *conn, args [][]byte) {
	if len(args) == 1 {
		all := sortedCommands()
		c.w.WriteArray(len(all))
		for _, cmd := range all {
			c.writeCommandInfo(cmd)
		}
		return
	}
	switch sub := strings.ToLower(string(args[1])); sub {
	case "count":
		c.w.WriteInt(int64(len(commands)))
	case "help":
		c.writeHelp("command", "(no subcommand)", "COUNT", "DOCS [<command-name> ...]", "GETKEYS <full-command>", "GETKEYSANDFLAGS <full-command>", "INFO [<command-name> ...]",
			"LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]")
	case "docs":
		c.commandDocs(args[2:])
	case "getkeys":
		c.commandGetKeys(args[2:], false)
	case "getkeysandflags":
		c.commandGetKeys(args[2:], true)
	case "list":
		c.commandList(args[2:])
	case "info":
		if len(args) == 2 {
			cmdCommand(c, args[:1])
			return
		}
		c.w.WriteArray(len(args) - 2)
		for _, a := range args[2:] {
			if cmd, ok := commands[strings.ToLower(string(a))]; ok {
				c.writeCommandInfo(cmd)
			} else {
				c.w.WriteNullArray()
			}
		}
	default:
		c.writeError(fmt.Sprintf("ERR unknown subcommand '%s'. Try COMMAND HELP.", args[1]))
	}
}

// aclCategories are Redis 7.0's ACL categories (acl.c, ACLCommandCategories).
var aclCategories = []string{"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
	"bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking",
	"dangerous", "connection", "transaction", "scripting"}

// servedSubcommands are, for each container command Synod serves, the
// subcommands of Redis 7.0 it serves (TestServedSubcommands sends each):
// COMMAND LIST names them as Redis does (client|list), and FILTERBY
// ACLCAT and PATTERN filter them with the commands. Subcommands Synod
// refuses with a reason (ACL SETUSER, ...) or does not know are not named.
var servedSubcommands = map[string][]string{
	"acl":      {"cat", "help", "log", "users", "whoami"},
	"client":   {"getname", "help", "id", "info", "kill", "list", "reply", "setname", "unblock"}, // and SETINFO, Redis 7.2's
	"cluster":  {"help", "info", "keyslot", "myid", "nodes", "shards", "slots"},
	"command":  {"count", "docs", "getkeys", "getkeysandflags", "help", "info", "list"},
	"config":   {"get", "help", "resetstat", "rewrite", "set"},
	"function": {"delete", "dump", "flush", "help", "kill", "list", "load", "restore", "stats"},
	"memory":   {"help", "usage"},
	"object":   {"encoding", "freq", "help", "idletime", "refcount"},
	"pubsub":   {"channels", "help", "numpat", "numsub", "shardchannels", "shardnumsub"},
	"script":   {"exists", "flush", "help", "kill", "load"},
	"xgroup":   {"create", "createconsumer", "delconsumer", "destroy", "help", "setid"},
	"xinfo":    {"consumers", "groups", "help", "stream"},
}

// listedNames are COMMAND LIST's names: every command, and after each
// container its served subcommands.
func listedNames() []string {
	var out []string
	for _, cmd := range sortedCommands() {
		out = append(out, cmd.name)
		for _, sub := range servedSubcommands[cmd.name] {
			out = append(out, cmd.name+"|"+sub)
		}
	}
	return out
}

// commandList answers COMMAND LIST [FILTERBY MODULE name | ACLCAT cat |
// PATTERN glob] as Redis 7.0's commandListCommand: any other argument shape
// is a syntax error; the pattern matches command and subcommand names
// (container|sub) without regard to case; no module is loaded, so MODULE
// answers an empty array. ACLCAT uses Redis 7.0.15's categories of each
// command (redis_cmdtable.go); an unknown category answers an empty array.
func (c *conn) commandList(args [][]byte) {
	var keep func(string) bool
	switch {
	case len(args) == 0:
		keep = func(string) bool { return true }
	case len(args) == 3 && lower(args[0]) == "filterby":
		switch lower(args[1]) {
		case "module":
			keep = func(string) bool { return false }
		case "aclcat":
			cat := lower(args[2])
			keep = func(n string) bool { return slices.Contains(redisCategories[n], cat) }
		case "pattern":
			pat := bytes.ToLower(args[2])
			keep = func(n string) bool { return service.GlobMatch(pat, []byte(n)) }
		default:
			c.writeError("ERR syntax error")
			return
		}
	default:
		c.writeError("ERR syntax error")
		return
	}
	var names []string
	for _, n := range listedNames() {
		if keep(n) {
			names = append(names, n)
		}
	}
	c.w.WriteArray(len(names))
	for _, n := range names {
		c.w.WriteBulkString(n)
	}
}

// groupOf is a command's Redis group (COMMAND DOCS).
func groupOf(cmd *command) string {
	if cmd.group != "" {
		return cmd.group
	}
	switch cmd.name {
	case "info", "command", "config":
		return "server"
	case "synod":
		return "synod"
	}
	for _, f := range cmd.flags {
		if f == "pubsub" {
			return "pubsub"
		}
	}
	return "connection"
}

// commandDocs answers COMMAND DOCS [name ...]: for each command its
// summary, since and group (no argument specs: redis-cli then shows no
// hints, which is all it uses them for).
func (c *conn) commandDocs(names [][]byte) {
	var cmds []*command
	if len(names) == 0 {
		cmds = sortedCommands()
	}
	for _, n := range names {
		if cmd, ok := commands[strings.ToLower(string(n))]; ok {
			cmds = append(cmds, cmd)
		}
	}
	c.w.WriteMap(len(cmds))
	for _, cmd := range cmds {
		c.w.WriteBulkString(cmd.name)
		c.w.WriteMap(3)
		c.w.WriteBulkString("summary")
		summary := fmt.Sprintf("Redis's %s, served by Synod.", strings.ToUpper(cmd.name))
		if cmd.plan != nil {
			summary = fmt.Sprintf("Redis's %s, mapped onto the namespace service's operations (see SYNOD HELP).", strings.ToUpper(cmd.name))
		}
		if cmd.name == "synod" {
			summary = "Synod's own commands (SYNOD HELP)."
		}
		c.w.WriteBulkString(summary)
		c.w.WriteBulkString("since")
		c.w.WriteBulkString("1.0.0")
		c.w.WriteBulkString("group")
		c.w.WriteBulkString(groupOf(cmd))
	}
}

// commandHelp lists every command of the table by group, for SYNOD HELP.
func commandHelp() []string {
	byGroup := map[string][]string{}
	for _, cmd := range sortedCommands() {
		g := groupOf(cmd)
		byGroup[g] = append(byGroup[g], strings.ToUpper(cmd.name))
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	out := []string{"Redis commands served (COMMAND INFO gives arity, flags and key positions; any other answers Redis's unknown-command error):"}
	for _, g := range groups {
		out = append(out, fmt.Sprintf("  %s: %s", g, strings.Join(byGroup[g], " ")))
	}
	return out
}

// --- SYNOD ------------------------------------------------------------------------

var synodHelp = []string{
	"SYNOD NS [name] -- Show or select this connection's namespace.",
	"SYNOD READ [linearizable|log|quorum|lease|regular|local] -- Show or select the read consistency (what each means depends on the protocol; see the README).",
	"SYNOD NAMESPACES -- List namespaces as [name, protocol, service].",
	"SYNOD OP kind [key [arg ...]] -- Run one operation of the namespace's service.",
	"SYNOD MEMBER ADD id peer client | REMOVE id -- Change the namespace's membership (paxos).",
	"SYNOD LEADER -- The namespace's leader as [id, client address], or nil while unknown or leaderless.",
}

func cmdSynod(c *conn, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	switch sub {
	case "ns":
		if len(args) > 3 {
			c.writeError(arityErr("synod|ns"))
			return
		}
		if len(args) == 2 {
			c.mu.Lock()
			name := c.ns.Name
			c.mu.Unlock()
			c.w.WriteBulkString(name)
			return
		}
		if c.refuseInTxn("SYNOD NS") {
			return
		}
		want := string(args[2])
		nss := c.s.b.Namespaces()
		var names []string
		for _, ns := range nss {
			if ns.Name == want {
				svc, err := service.Lookup(ns.Service)
				if err != nil {
					c.writeError(fmt.Sprintf("ERR namespace '%s': %v", want, err))
					return
				}
				c.setNamespace(ns, svc)
				c.changedNamespace()
				c.w.WriteSimple("OK")
				return
			}
			names = append(names, ns.Name)
		}
		c.writeError(fmt.Sprintf("ERR unknown namespace '%s' (namespaces: %s)", want, strings.Join(names, ", ")))
	case "read":
		if len(args) > 3 {
			c.writeError(arityErr("synod|read"))
			return
		}
		if len(args) == 2 {
			c.mu.Lock()
			m := c.read
			c.mu.Unlock()
			c.w.WriteBulkString(m.String())
			return
		}
		m, err := automaton.ParseReadMode(strings.ToLower(string(args[2])))
		if err != nil {
			c.writeError("ERR " + err.Error())
			return
		}
		c.mu.Lock()
		c.read = m
		c.mu.Unlock()
		c.w.WriteSimple("OK")
	case "namespaces":
		if len(args) != 2 {
			c.writeError(arityErr("synod|namespaces"))
			return
		}
		nss := c.s.b.Namespaces()
		c.w.WriteArray(len(nss))
		for _, ns := range nss {
			c.w.WriteArray(3)
			c.w.WriteBulkString(ns.Name)
			c.w.WriteBulkString(ns.Protocol)
			c.w.WriteBulkString(ns.Service)
		}
	case "op":
		if len(args) < 3 {
			c.writeError(arityErr("synod|op"))
			return
		}
		c.runPlan("synod", opPlan(synodOp(args), nil))
	case "help":
		lines := append(append([]string(nil), synodHelp...), commandHelp()...)
		c.w.WriteArray(len(lines))
		for _, l := range lines {
			c.w.WriteSimple(l)
		}
	default:
		if c.txnCommand(sub, args) || c.optCommand(sub, args) || c.memberCommand(sub, args) || c.leaderCommand(sub, args) || c.callCommand(sub, args) {
			return
		}
		c.writeError(fmt.Sprintf("ERR unknown subcommand '%s'. Try SYNOD HELP.", args[1]))
	}
}

// synodOp is the operation of SYNOD OP kind [key [arg ...]]: an operation
// without a key (the spreadsheet's refresh, the matchmaker's machines) has
// the empty key.
func synodOp(args [][]byte) service.Op {
	op := service.Op{Kind: strings.ToLower(string(args[2]))}
	if len(args) > 3 {
		op.Key = string(args[3])
	}
	if len(args) > 4 {
		op.Args = args[4:]
	}
	return op
}

func (c *conn) setNamespace(ns config.Namespace, svc service.Service) {
	c.mu.Lock()
	c.noteNamespace(c.ns) // its sessions end with the connection (sessions.go)
	c.ns, c.svc = ns, svc
	c.mu.Unlock()
}

// writeHelp writes a container command's HELP, in Redis's shape: the
// header line, the subcommands, then HELP.
func (c *conn) writeHelp(name string, subs ...string) {
	subs = append(subs, "HELP")
	c.w.WriteArray(len(subs) + 1)
	c.w.WriteSimple(strings.ToUpper(name) + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
	for _, l := range subs {
		c.w.WriteSimple(l)
	}
}
