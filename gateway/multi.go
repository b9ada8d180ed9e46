package gateway

import (
	"fmt"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Redis transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//
// MULTI opens a queue on the connection. Every data command after it (a
// plan, plan.go; also SYNOD OP, PING and ECHO) answers +QUEUED, and EXEC
// sends the operations of all queued commands as ONE atomic group
// (automaton.Request.Ops) through the namespace's protocol: they take
// effect together, in order, with nothing interleaved, or not at all. A
// multi-key command inside MULTI (DEL a b, MGET, MSET) contributes all its
// operations to that group, so unlike outside MULTI it is atomic. EXEC
// replies an array holding each queued command's reply, rendered from its
// slice of the group's results.
//
// WATCH key... reads each key's write version now (the KV "version"
// operation) and remembers it; EXEC puts one leading guard per watched key
// ("guard key version v", service.GuardKind) in front of the group, so the
// check happens inside the same step as the writes. When a guard fails the
// protocol applies nothing (automaton.ApplyGroup) and EXEC replies a null
// array, as Redis does when a watched key changed. EXEC, DISCARD and
// UNWATCH forget the watched keys.
//
// Redis's error semantics are kept:
//
//   - A queuing error (unknown command, wrong number of arguments, a
//     command not allowed inside MULTI) answers its error at once and
//     marks the transaction: EXEC then answers "EXECABORT Transaction
//     discarded because of previous errors." and sends nothing.
//   - A runtime error (WRONGTYPE, not an integer, a syntax error in the
//     command's options, found when the plan is parsed or the operation
//     validated) becomes that command's error inside EXEC's array; the
//     other commands are applied.
//   - EXEC or DISCARD without MULTI, nested MULTI and WATCH inside MULTI
//     answer Redis's words ("ERR EXEC without MULTI", "ERR MULTI calls can
//     not be nested", "ERR WATCH inside MULTI is not allowed"); the last two
//     do not mark the transaction, as in Redis.
//
// Decisions (Redis and the issue are silent on these):
//
//   - MSETNX inside MULTI is served when no earlier command of the
//     transaction sends an operation: its check must lead the group
//     (execGroup says how a failed check still answers 0 with the rest
//     applied). Later in the transaction it answers an error inside EXEC's
//     array (use WATCH and MSET): the service has no conditional multi-key
//     set that could run mid-group.
//
//   - On a namespace whose protocol cannot apply a group atomically
//     (automaton.TransactionsOf(p).Atomic is false: ABD, blocking, ESDS,
//     ...), MULTI answers an error naming the protocols that can (from the
//     registry) and the namespaces of this node that use one, yet the
//     connection still enters MULTI, marked: every later command answers an
//     error and is never run, EXEC answers EXECABORT, and DISCARD answers
//     "ERR DISCARD without MULTI" (as Redis after a MULTI that failed),
//     both ending the refused state. A client that
//     pipelines MULTI, SET, EXEC (redis-py, go-redis TxPipeline) therefore
//     never has its SET applied outside a transaction. WATCH there is
//     refused the same way.
//   - Commands that change the connection (SYNOD NS, SYNOD READ, SYNOD
//     BEGIN, SELECT, SUBSCRIBE, AUTH, HELLO, CLIENT, ...) are not
//     allowed inside MULTI ("ERR Command not allowed inside a transaction",
//     a queuing error): their effect would have to wait for EXEC. So are
//     SAVE and SHUTDOWN, as in Redis (no-multi).
//   - CONFIG and INFO (this node's own parameters and figures, no
//     replicated data) are queued and run at EXEC, after the group was
//     applied, each answering in its place in EXEC's array, as in Redis
//     ("MULTI with config error": a CONFIG SET error is that command's
//     entry, the others apply).
//   - MULTI is refused while an interactive transaction (SYNOD BEGIN,
//     txn.go) is open, and SYNOD BEGIN inside MULTI is a queuing error.
//   - Changing the namespace forgets the watched keys (their versions
//     belong to the old namespace).
//   - Request options (SYNOD OPT) pending at EXEC apply to the group, as to
//     any command that runs operations.

// maxQueued bounds a MULTI's queue (commands) so one EXEC stays one
// message of reasonable size.
const maxQueued = 10000

// multiConn is a connection's MULTI state; only its goroutine touches it.
type multiConn struct {
	open    bool
	dirty   bool   // a queuing error: EXEC answers EXECABORT
	refused string // MULTI was refused on this namespace (the error it answered)
	queue   []queued
	watch   []watched
}

type queued struct {
	name string
	p    plan
	// fn, when set, is a node command (multiDeferred) run at EXEC with
	// args, writing its own reply into EXEC's array.
	fn   handler
	args [][]byte
}

type watched struct {
	key     string
	version []byte
}

// execAbort is Redis's answer to EXEC after a queuing error.
const execAbort = "EXECABORT Transaction discarded because of previous errors."

// multiCommands run at once inside MULTI; every other command is queued.
var multiCommands = map[string]bool{"exec": true, "discard": true, "multi": true, "watch": true, "quit": true}

// multiDeferred are the node commands (no plan) queued inside MULTI and run
// at EXEC in their place.
var multiDeferred = map[string]bool{"config": true, "info": true}

func init() {
	register("transactions", []*command{
		{name: "multi", arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, fn: cmdMulti},
		{name: "exec", arity: 1, flags: []string{"noscript", "loading", "stale", "skip_slowlog"}, fn: cmdExec},
		{name: "discard", arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, fn: cmdDiscard},
		{name: "watch", arity: -2, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, first: 1, last: -1, step: 1, fn: cmdWatch},
		{name: "unwatch", arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, fn: cmdUnwatch},
	}...)
}

// queuedPlan returns the plan a command contributes to a MULTI, or false
// when the command cannot be queued.
func (c *conn) queuedPlan(cmd *command, args [][]byte) (plan, bool) {
	switch {
	case cmd.plan != nil:
		return c.planOf(cmd, args), true
	case cmd.name == "synod" && strings.EqualFold(string(args[1]), "op"):
		if len(args) < 3 {
			return errPlan("%s", arityErr("synod|op")), true
		}
		return opPlan(synodOp(args), nil), true
	case cmd.name == "ping" && len(args) <= 2:
		if len(args) == 2 {
			return constPlan(service.Bytes(args[1])), true
		}
		return constPlan(status("PONG")), true
	case cmd.name == "echo":
		return constPlan(service.Bytes(args[1])), true
	case cmd.name == "unwatch":
		// Queued, as in Redis; EXEC forgets the watched keys anyway.
		return constPlan(service.OK()), true
	}
	return plan{}, false
}

// inMulti handles a command while MULTI is open: it queues it (or answers
// its refusal) and returns true, or returns false for the commands that run
// at once (multiCommands).
func (c *conn) inMulti(cmd *command, args [][]byte) bool {
	m := &c.multi
	if !m.open || multiCommands[cmd.name] {
		return false
	}
	if m.refused != "" {
		c.writeError(fmt.Sprintf("ERR command not queued: MULTI was refused on this namespace (%s); EXEC or DISCARD ends it, and nothing is applied",
			strings.TrimPrefix(m.refused, "ERR ")))
		return true
	}
	if multiDeferred[cmd.name] && len(m.queue) < maxQueued {
		cp := make([][]byte, len(args))
		for i, a := range args {
			cp[i] = append([]byte(nil), a...)
		}
		m.queue = append(m.queue, queued{name: cmd.name, fn: cmd.fn, args: cp})
		c.w.WriteSimple("QUEUED")
		return true
	}
	p, ok := c.queuedPlan(cmd, args)
	if !ok {
		m.dirty = true
		c.writeError("ERR Command not allowed inside a transaction")
		return true
	}
	if len(m.queue) >= maxQueued {
		m.dirty = true
		c.writeError(fmt.Sprintf("ERR too many commands in one MULTI (limit %d)", maxQueued))
		return true
	}
	m.queue = append(m.queue, queued{name: cmd.name, p: p})
	c.w.WriteSimple("QUEUED")
	return true
}

// queueError marks an open MULTI after a queuing error (unknown command,
// wrong arity) answered by exec.
func (c *conn) queueError() {
	if c.multi.open {
		c.multi.dirty = true
	}
}

// atomicNamespaces names this node's namespaces whose protocol applies
// groups atomically, as "'name' (protocol)".
func (c *conn) atomicNamespaces() []string {
	var out []string
	for _, n := range c.s.b.Namespaces() {
		if automaton.TransactionsOf(n.Protocol).Atomic {
			out = append(out, fmt.Sprintf("'%s' (%s)", n.Name, n.Protocol))
		}
	}
	return out
}

// noAtomicErr is the refusal of MULTI and WATCH on ns.
func (c *conn) noAtomicErr(what string, ns config.Namespace) string {
	msg := fmt.Sprintf("ERR %s needs a protocol that applies a group of operations atomically; namespace '%s' uses %s, which cannot (%s)",
		what, ns.Name, ns.Protocol, atomicProtocols())
	if nss := c.atomicNamespaces(); len(nss) > 0 {
		msg += "; namespaces of this node that can: " + strings.Join(nss, ", ") + " (SYNOD NS <name>)"
	} else {
		msg += "; add a namespace with one of them to the cluster file"
	}
	return msg
}

func cmdMulti(c *conn, args [][]byte) {
	if c.multi.open {
		c.writeError("ERR MULTI calls can not be nested")
		return
	}
	if c.refuseInTxn("MULTI") {
		return
	}
	c.mu.Lock()
	ns, svc := c.ns, c.svc
	c.mu.Unlock()
	c.multi = multiConn{open: true, watch: c.multi.watch}
	switch {
	case svc == nil:
		c.multi.refused = "ERR this node serves no namespace"
	case !automaton.TransactionsOf(ns.Protocol).Atomic:
		c.multi.refused = c.noAtomicErr("MULTI", ns)
	default:
		c.w.WriteSimple("OK")
		return
	}
	c.writeError(c.multi.refused)
}

func cmdDiscard(c *conn, args [][]byte) {
	if !c.multi.open {
		c.writeError("ERR DISCARD without MULTI")
		return
	}
	refused := c.multi.refused != ""
	c.multi = multiConn{}
	if refused {
		// Redis's MULTI never fails; one that did left no transaction.
		c.writeError("ERR DISCARD without MULTI")
		return
	}
	c.w.WriteSimple("OK")
}

func cmdUnwatch(c *conn, args [][]byte) {
	c.multi.watch = nil
	c.w.WriteSimple("OK")
}

// cmdExec sends the queued plans as one atomic group.
func cmdExec(c *conn, args [][]byte) {
	m := c.multi
	if !m.open {
		c.writeError("ERR EXEC without MULTI")
		return
	}
	c.multi = multiConn{}
	if m.dirty || m.refused != "" {
		c.writeError(execAbort)
		return
	}
	plans := make([]plan, len(m.queue))
	lead := -1 // the plan whose guards lead the group (leadingGuards)
	sent := false
	for i, q := range m.queue {
		if q.fn != nil {
			continue // no operations: run when its reply is due
		}
		p := c.check(q.p)
		switch {
		case len(p.guards) > 0 && !sent:
			lead = i
		case len(p.guards) > 0:
			p = errPlan("%s", q.p.noMulti)
		}
		plans[i] = p
		sent = sent || len(p.ops) > 0
	}
	watch := make([]service.Op, len(m.watch))
	for i, w := range m.watch {
		watch[i] = service.Op{Kind: service.GuardKind, Key: w.key, Args: [][]byte{[]byte("version"), w.version}}
	}
	c.optBegin(&command{name: "exec", first: 1, last: 1, step: 1}, args)
	rs, plans, fail := c.execGroup(watch, plans, lead)
	switch {
	case fail.Type == service.ResultErr:
		c.writeResult(fail)
		return
	case rs == nil && plans == nil:
		c.w.WriteNullArray() // a watched key changed
		return
	}
	c.w.WriteArray(len(plans))
	for i, p := range plans {
		if q := m.queue[i]; q.fn != nil {
			q.fn(c, q.args)
			continue
		}
		n := len(p.ops)
		c.writeResult(p.render(rs[:n]))
		rs = rs[n:]
	}
}

// maxLeadTries bounds EXEC's attempts when a leading MSETNX's keys keep
// changing between its attempts.
const maxLeadTries = 4

// execGroup sends the plans as one atomic group led by the watch guards
// and returns the results and the plans they render (nil, nil when a
// watched key changed), or an error result.
//
// Leading guards (MSETNX inside MULTI). MSETNX's check ("guard k exists
// 0" per key) must lead the group, and is only right there when nothing
// before it in the transaction sends an operation (which could create or
// delete its keys): plan lead is such a command, -1 when there is none;
// an MSETNX queued after an operation answers its noMulti error. Unlike
// WATCH, a failed MSETNX check must not abort the transaction: MSETNX
// answers 0 and the other commands apply, as in Redis. So when its check
// fails at key k, the group is sent again without MSETNX's writes, led
// instead by "guard k exists 1": then MSETNX's 0 is right inside that
// step. Should k vanish in between, the first form is tried again, at
// most maxLeadTries times in all (then TRYAGAIN, nothing applied).
func (c *conn) execGroup(watch []service.Op, plans []plan, lead int) ([]service.Result, []plan, service.Result) {
	exists := "" // the key found existing: MSETNX answers 0
	for try := 0; try < maxLeadTries; try++ {
		ps := plans
		guards := watch
		if lead >= 0 {
			ps = append([]plan(nil), plans...)
			if exists == "" {
				guards = append(append([]service.Op(nil), watch...), plans[lead].guards...)
			} else {
				guards = append(append([]service.Op(nil), watch...), service.Op{Kind: service.GuardKind, Key: exists, Args: [][]byte{[]byte("exists"), []byte("1")}})
				ps[lead] = constPlan(plans[lead].aborted)
			}
		}
		var ops []service.Op
		for _, p := range ps {
			ops = append(ops, p.ops...)
		}
		if len(ops)+len(guards) == 0 {
			return nil, ps, service.Result{}
		}
		rs, at, fail := c.runGroup(guards, ops)
		switch {
		case fail.Type == service.ResultErr:
			return nil, nil, fail
		case at < 0:
			return rs, ps, service.Result{}
		case at < len(watch):
			return nil, nil, service.Result{}
		case exists == "":
			exists = guards[at].Key
		default:
			exists = ""
		}
	}
	return nil, nil, service.Fail(synoderr.TryAgain, "the keys of MSETNX kept changing while EXEC ran; nothing was applied")
}

// cmdWatch reads each key's version for EXEC's guards.
func cmdWatch(c *conn, args [][]byte) {
	if c.multi.open {
		c.writeError("ERR WATCH inside MULTI is not allowed")
		return
	}
	c.mu.Lock()
	ns := c.ns
	c.mu.Unlock()
	if !automaton.TransactionsOf(ns.Protocol).Atomic {
		c.writeError(c.noAtomicErr("WATCH", ns))
		return
	}
	if p, ok := c.kvOnly("watch"); !ok {
		c.writeResult(p.render(nil))
		return
	}
	ops := make([]service.Op, len(args)-1)
	for i, k := range args[1:] {
		ops[i] = kvOp("version", k)
	}
	rs := c.runAll(ops)
	for _, r := range rs {
		if r.Type == service.ResultErr {
			c.writeResult(r)
			return
		}
	}
	for i, r := range rs {
		v := r.Bytes
		if r.Type == service.ResultInt {
			v = []byte(fmt.Sprint(r.Int))
		}
		c.multi.watch = append(c.multi.watch, watched{key: string(args[i+1]), version: v})
	}
	c.w.WriteSimple("OK")
}
