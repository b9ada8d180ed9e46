package gateway

import (
	"fmt"
	"sort"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Plans.
//
// Every data command is a plan: its arguments are parsed into the service
// operations to send and a function that renders their results as the reply
// Redis gives. Outside MULTI the plan runs at once (runPlan); inside MULTI
// it is queued and EXEC sends the operations of every queued plan as one
// atomic group (multi.go), then renders each plan's reply from its slice of
// the group's results. A plan that fails to parse, or whose operation the
// namespace's service refuses (Validate), has no operations and replies its
// error: inside MULTI that is a runtime error of that command only, as in
// Redis (syntax errors are found at EXEC, not when queuing).
//
// Replies are service.Results (writeResult renders them). Conventions of
// this package only, for the RESP3 shapes a Result has no type for: a
// status reply other than OK (TYPE's "+string") is a ResultOK carrying its
// text in Bytes; an array whose Err is shapeMap holds field, value pairs
// (HGETALL: a map in RESP3), shapeSet marks a set (SMEMBERS), and a
// ResultBytes whose Err is shapeDouble holds a score (ZSCORE: a double in
// RESP3). RESP2 sees arrays and bulk strings, as from Redis.

// sendMode says how a plan's operations travel when it runs outside MULTI.
type sendMode uint8

const (
	// sendEach: one request per operation, issued concurrently when there
	// are several (multi-key commands outside MULTI: as in a Redis
	// cluster, not atomic across keys).
	sendEach sendMode = iota
	// sendGroup: one atomic group where the namespace's protocol applies
	// groups atomically, else one request per operation (MSET).
	sendGroup
	// sendAtomic: one atomic group, refused where the protocol cannot
	// apply one (MSETNX, RENAME: their meaning needs atomicity).
	sendAtomic
)

// plan is what one data command does.
type plan struct {
	ops  []service.Op
	send sendMode
	// reply renders the results (one per operation, in order) as the
	// command's reply. Nil replies the only result as it is.
	reply func(rs []service.Result) service.Result
	// guards lead the atomic group (MSETNX's "guard k exists 0"); when one
	// fails nothing is applied and the reply is aborted.
	guards  []service.Op
	aborted service.Result
	// noMulti, when set, is the error the command answers inside EXEC.
	noMulti string
	// note publishes the command's keyspace notifications from its reply
	// (notify.go); nil: none.
	note func(service.Result)
	// reported, when set, takes the keys its only operation's result names
	// (service.ReportMark, notify.go consumerEvents); render unwraps that
	// result first.
	reported func(keys []service.Result)
}

// planFunc parses a data command's arguments (name included) into a plan.
type planFunc func(c *conn, args [][]byte) plan

// errPlan is a plan that sends nothing and replies an error.
func errPlan(f string, a ...any) plan {
	r := errResult(f, a...)
	return plan{reply: func([]service.Result) service.Result { return r }}
}

// constPlan is a plan that sends nothing and replies r.
func constPlan(r service.Result) plan {
	return plan{reply: func([]service.Result) service.Result { return r }}
}

// opPlan is a plan of one operation whose result is the reply, passed
// through f when f is not nil.
func opPlan(op service.Op, f func(service.Result) service.Result) plan {
	if f == nil {
		return plan{ops: []service.Op{op}, reply: firstResult} // no closure to allocate
	}
	return plan{ops: []service.Op{op}, reply: func(rs []service.Result) service.Result {
		if f == nil || rs[0].Type == service.ResultErr {
			return rs[0]
		}
		return f(rs[0])
	}}
}

// firstResult is the reply of a plan of one operation answered as it is.
func firstResult(rs []service.Result) service.Result { return rs[0] }

// Shape markers (see the package comment above).
const (
	shapeMap       = "\x00map"
	shapeSet       = "\x00set"
	shapeDouble    = "\x00double"
	shapePairs     = "\x00pairs"     // member, score, ...: nested [member, double] in RESP3
	shapeFields    = "\x00fields"    // field, value, ...: nested [field, value] in RESP3 (HRANDFIELD)
	shapeNullArray = "\x00nullarray" // a ResultNil written as a null array (BLPOP's timeout, LPOP key count)
)

// shaped marks r (an array or bytes result) with shape; errors and nils
// pass unchanged.
func shaped(r service.Result, shape string) service.Result {
	if r.Type == service.ResultArray || r.Type == service.ResultBytes {
		r.Err = shape
	}
	return r
}

// status is a simple-string reply other than OK (see the package comment).
func status(s string) service.Result { return service.Result{Type: service.ResultOK, Bytes: []byte(s)} }

// firstErr returns the first error result of rs.
func firstErr(rs []service.Result) (service.Result, bool) {
	for _, r := range rs {
		if r.Type == service.ResultErr {
			return r, true
		}
	}
	return service.Result{}, false
}

// render applies p's reply function.
func (p plan) render(rs []service.Result) service.Result {
	if p.reported != nil && len(rs) == 1 {
		r, keys := unwrapReport(rs[0])
		rs = []service.Result{r}
		p.reported(keys) // before the reply: it may depend on the report (scriptReports)
	}
	if p.reply == nil {
		if len(rs) == 1 {
			if p.note != nil {
				p.note(rs[0])
			}
			return rs[0]
		}
		return errResult("ERR internal error: a plan of %d operations has no reply", len(rs))
	}
	r := p.reply(rs)
	if p.note != nil {
		p.note(r)
	}
	return r
}

// planOf is cmd's plan for args, with its keyspace notifications.
func (c *conn) planOf(cmd *command, args [][]byte) plan {
	p := cmd.plan(c, args)
	p.note = c.keyspaceNote(cmd.name, args)
	return p
}

// check validates p's operations against the namespace's service and the
// protocol's reach (register protocols run only a subset of KV). A refused
// plan becomes an error plan.
func (c *conn) check(p plan) plan {
	if len(p.ops) == 0 {
		return p
	}
	c.mu.Lock()
	ns, svc := c.ns, c.svc
	c.mu.Unlock()
	if svc == nil {
		return errPlan("ERR this node serves no namespace")
	}
	for _, ops := range [2][]service.Op{p.guards, p.ops} {
		for _, op := range ops {
			if err := svc.Validate(op); err != nil {
				return errPlan("%s", synoderr.Of(synoderr.Invalid, err.Error()).Error())
			}
			if msg := c.beyondRegister(ns.Name, ns.Protocol, ns.Service, op); msg != "" {
				return errPlan("%s", msg)
			}
		}
	}
	return p
}

// beyondRegister returns the refusal of a KV operation that a register
// protocol (ABD, blocking) cannot run, naming the namespaces and protocols
// that can and how to reach them; "" when the protocol can run op.
func (c *conn) beyondRegister(ns, proto, svc string, op service.Op) string {
	if service.RegisterKinds[op.Kind] && (op.Kind != "set" || len(op.Args) == 1) {
		return "" // a register runs it (checked first: it needs no registry lookup)
	}
	if svc != "kv" || !automaton.HasRegisterSemantics(proto) {
		return ""
	}
	var nss []string
	for _, n := range c.s.b.Namespaces() {
		if n.Service == "kv" && !automaton.HasRegisterSemantics(n.Protocol) {
			nss = append(nss, fmt.Sprintf("'%s' (%s)", n.Name, n.Protocol))
		}
	}
	var protos []string
	for _, p := range automaton.Names() {
		if !automaton.HasRegisterSemantics(p) {
			protos = append(protos, p)
		}
	}
	sort.Strings(protos)
	where := "no namespace of this node can; add one to the cluster file"
	if len(nss) > 0 {
		where = "namespaces that can: " + strings.Join(nss, ", ") + " (select one with SYNOD NS <name>), or add one to the cluster file"
	}
	return fmt.Sprintf("ERR operation '%s' needs an atomic read-modify-write, which namespace '%s' cannot run: its protocol %s is a register (get, set, del, exists only); %s with protocol = one of %s",
		op.Kind, ns, proto, where, strings.Join(protos, ", "))
}

// atomicHere reports whether the connection's namespace applies groups
// atomically.
func (c *conn) atomicHere() bool { return automaton.TransactionsOf(c.protocol()).Atomic }

// atomicProtocols names the registered protocols that apply groups
// atomically.
func atomicProtocols() string {
	var have []string
	for _, n := range automaton.Names() {
		if automaton.TransactionsOf(n).Atomic {
			have = append(have, n)
		}
	}
	sort.Strings(have)
	if len(have) == 0 {
		return "no registered protocol can"
	}
	return "protocols that can: " + strings.Join(have, ", ")
}

// runPlan runs p outside MULTI and writes its reply.
func (c *conn) runPlan(name string, p plan) {
	c.runChecked(name, c.check(p))
}

// runChecked is runPlan of a plan already checked.
func (c *conn) runChecked(name string, p plan) {
	if len(p.ops) == 1 && p.ops[0].Kind == "eval" {
		defer c.s.scr.sending(p.ops[0])() // script.go: busy while in flight
	}
	c.writeResult(c.sendPlan(name, p))
}

// allReads says whether every operation only reads (then an error of a
// plan sent per key left nothing half done: LCS).
func allReads(ops []service.Op) bool {
	for _, op := range ops {
		if !(service.KV{}).IsRead(op) {
			return false
		}
	}
	return true
}

// sendPlan sends p's operations (already checked) and returns its reply.
func (c *conn) sendPlan(name string, p plan) service.Result {
	if len(p.ops) == 0 {
		return p.render(nil)
	}
	atomic := false
	if len(p.ops) > 1 || len(p.guards) > 0 {
		atomic = c.atomicHere() // a registry lookup, only where it matters
	}
	group := (len(p.ops) > 1 || len(p.guards) > 0) && !c.txn.open && (p.send == sendAtomic || (p.send == sendGroup && atomic))
	if p.send == sendAtomic && (len(p.ops) > 1 || len(p.guards) > 0) && (c.txn.open || !atomic) {
		return errResult("ERR %s needs its keys changed atomically, which this namespace's protocol (%s) cannot do; nothing was applied (%s)",
			strings.ToUpper(name), c.protocol(), atomicProtocols())
	}
	if !group {
		rs := c.runAll(p.ops)
		r := p.render(rs)
		if r.Type == service.ResultErr && len(p.ops) > 1 && !c.txn.open && !allReads(p.ops) {
			r.Err = withCode(r.Err) + fmt.Sprintf(" (%s is not atomic across keys: the other keys were processed)", strings.ToUpper(name))
		}
		return r
	}
	rs, at, err := c.runGroup(p.guards, p.ops)
	if err.Type == service.ResultErr {
		return err
	}
	if at >= 0 {
		return p.aborted
	}
	return p.render(rs)
}

// runGroup sends guards followed by ops as one atomic group. It returns the
// results of ops, the index of the guard that failed (nothing was applied;
// -1 when none did), or an error result when the group was refused or
// failed as a whole.
func (c *conn) runGroup(guards, ops []service.Op) ([]service.Result, int, service.Result) {
	c.mu.Lock()
	ns, svc, read := c.ns, c.svc, c.read
	c.mu.Unlock()
	all := append(append([]service.Op(nil), guards...), ops...)
	id := automaton.RequestID{Client: c.client, Seq: c.nextSeq()}
	c.noteOwn(svc, service.Op{}, all)
	res, results := c.submitGroup(ns.Name, automaton.Request{ID: id, Ops: all, Opts: c.requestOptions(read, id), Checked: true, Unanswered: id.Seq}) // validated in check
	if res.Type == service.ResultErr {
		return nil, -1, res
	}
	if len(results) != len(all) {
		return nil, -1, errResult("ERR internal error: a group of %d operations answered %d results", len(all), len(results))
	}
	if at, ok := automaton.GroupAborted(all, results); ok {
		return nil, at, service.Result{}
	}
	out := results[len(guards):]
	for i := range out {
		if out[i].Type == service.ResultErr {
			out[i].Err = withCode(out[i].Err)
		}
	}
	return out, -1, service.Result{}
}

// lowerOpts returns args with every argument from index from on that
// equals one of words (case-insensitively) lower-cased: the KV operations
// take option words in lower case (service/kv_doc.go). Arguments before
// from (keys, values) are never touched.
func lowerOpts(args [][]byte, from int, words ...string) [][]byte {
	out := append([][]byte(nil), args...)
	for i := from; i < len(out); i++ {
		for _, w := range words {
			if strings.EqualFold(string(out[i]), w) {
				out[i] = []byte(w)
			}
		}
	}
	return out
}

// keyPlan is a planFunc for a KV command that is one operation of kind on
// the key args[1], with args[2:] as its arguments (option words from index
// optFrom of args lower-cased), its result rendered by f (nil: as is).
func keyPlan(kind string, optFrom int, words []string, f func(service.Result) service.Result) planFunc {
	return func(c *conn, args [][]byte) plan {
		if p, ok := c.kvOnly(strings.ToLower(string(args[0]))); !ok {
			return p
		}
		if words != nil {
			args = lowerOpts(args, optFrom, words...)
		}
		return opPlan(kvOp(kind, args[1], args[2:]...), f)
	}
}

// spacePlan is a planFunc for a keyspace-wide KV command (Key ""): one
// operation of kind with args[1:] as its arguments.
func spacePlan(kind string, f func(service.Result) service.Result) planFunc {
	return func(c *conn, args [][]byte) plan {
		if p, ok := c.kvOnly(strings.ToLower(string(args[0]))); !ok {
			return p
		}
		return opPlan(service.Op{Kind: kind, Args: args[1:]}, f)
	}
}

// Result renderers.
func asMap(r service.Result) service.Result    { return shaped(r, shapeMap) }
func asSet(r service.Result) service.Result    { return shaped(r, shapeSet) }
func asDouble(r service.Result) service.Result { return shaped(r, shapeDouble) }
func asPairs(r service.Result) service.Result  { return shaped(r, shapePairs) }
func asStatus(r service.Result) service.Result {
	if r.Type == service.ResultBytes {
		return status(string(r.Bytes))
	}
	return r
}

// doubles marks every bytes element of an array as a double (ZMSCORE).
func doubles(r service.Result) service.Result {
	if r.Type != service.ResultArray {
		return r
	}
	out := make([]service.Result, len(r.Elems))
	for i, e := range r.Elems {
		out[i] = asDouble(e)
	}
	r.Elems = out
	return r
}

// register adds commands of a Redis command group (COMMAND DOCS) to the
// table.
func register(group string, cmds ...*command) {
	for _, c := range cmds {
		c.group = group
		commands[c.name] = c
	}
}

// Flag sets of the command table (COMMAND INFO).
var (
	fRead      = []string{"readonly"}
	fReadFast  = []string{"readonly", "fast"}
	fWrite     = []string{"write"}
	fWriteFast = []string{"write", "fast"}
	fWriteMem  = []string{"write", "denyoom"}
	fWriteMemF = []string{"write", "denyoom", "fast"}
)

// key1 is a command whose only key is its first argument.
func key1(name string, arity int, flags []string, p planFunc) *command {
	return &command{name: name, arity: arity, flags: flags, first: 1, last: 1, step: 1, plan: p}
}

// keyless is a command without key arguments.
func keyless(name string, arity int, flags []string, p planFunc) *command {
	return &command{name: name, arity: arity, flags: flags, plan: p}
}

// lower is a lower-cased argument.
func lower(a []byte) string { return strings.ToLower(string(a)) }
